/* Tests for ks_registry: image references as the kubelet parses them, which images exist, and
 * containerd's messages for those that do not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_registry.h"

static ks_image_ref ref_of(const char *image)
{
    ks_image_ref r;
    kc_err e = {0};
    cr_assert_eq(ks_image_ref_parse(image, &r, &e), KC_OK, "%s: %s", image, e.msg);
    return r;
}

Test(ref, normalizes_as_containerd_does)
{
    ks_image_ref r = ref_of("busybox");
    cr_assert_str_eq(r.full, "docker.io/library/busybox:latest");
    r = ref_of("nvidia/samples:vectoradd-cuda11.2.1");
    cr_assert_str_eq(r.full, "docker.io/nvidia/samples:vectoradd-cuda11.2.1");
    r = ref_of("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04");
    cr_assert_str_eq(r.domain, "nvcr.io");
    cr_assert_str_eq(r.path, "nvidia/driver");
    cr_assert_str_eq(r.tag, "595.91.07-ubuntu24.04");
    r = ref_of("localhost:5000/a/b_c__d-e.f");
    cr_assert_str_eq(r.full, "localhost:5000/a/b_c__d-e.f:latest");
    r = ref_of("localhost/x");
    cr_assert_str_eq(r.domain, "localhost");
    const char *dg = "sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
    char img[200];
    snprintf(img, sizeof(img), "mirror.example.com/nvidia/k8s-device-plugin@%s", dg);
    r = ref_of(img);
    cr_assert_str_eq(r.digest, dg);
    cr_assert_str_eq(r.tag, "");
    snprintf(img, sizeof(img), "mirror.example.com/nvidia/k8s-device-plugin:v1@%s", dg);
    r = ref_of(img);
    cr_assert_str_eq(r.tag, "v1");
}

static void refused(const char *image, const char *msg)
{
    ks_image_ref r;
    kc_err e = {0};
    cr_assert_eq(ks_image_ref_parse(image, &r, &e), KC_EINVALID, "%s was accepted", image);
    cr_assert_str_eq(e.msg, msg, "%s", image);
}

Test(ref, refuses_what_the_kubelet_cannot_parse)
{
    refused("Busybox:1", "couldn't parse image name \"Busybox:1\": invalid reference format: "
                         "repository name (library/Busybox) must be lowercase");
    refused("", "couldn't parse image name \"\": invalid reference format");
    refused("a//b", "couldn't parse image name \"a//b\": invalid reference format");
    refused("a:b:c", "couldn't parse image name \"a:b:c\": invalid reference format");
    refused("x:-tag", "couldn't parse image name \"x:-tag\": invalid reference format");
    refused("x@sha256:abc", "couldn't parse image name \"x@sha256:abc\": invalid reference format");
    refused("-x", "couldn't parse image name \"-x\": invalid reference format");
    refused("x_", "couldn't parse image name \"x_\": invalid reference format");
    refused("bad_host.io/x",
            "couldn't parse image name \"bad_host.io/x\": invalid reference format");
    refused("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "couldn't parse image name "
            "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": invalid "
            "repository name (0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef), "
            "cannot specify 64-byte hexadecimal strings");
}

#define HEX32 "0123456789abcdef0123456789abcdef"

Test(ref, refuses_digests_containerd_cannot_check)
{
    /* The grammar allows any algorithm and at least 32 hex digits; the digest check after it
     * knows sha256, sha384 and sha512, each at its size, in lowercase hex. */
    refused("x@md5:" HEX32,
            "couldn't parse image name \"x@md5:" HEX32 "\": unsupported digest algorithm");
    refused("x@Sha256:" HEX32 HEX32, "couldn't parse image name \"x@Sha256:" HEX32 HEX32
                                     "\": invalid checksum digest format");
    refused("x@sha256:" HEX32,
            "couldn't parse image name \"x@sha256:" HEX32 "\": invalid checksum digest length");
    refused("x@sha256:" HEX32 "0123456789ABCDEF0123456789abcdef",
            "couldn't parse image name \"x@sha256:" HEX32
            "0123456789ABCDEF0123456789abcdef\": invalid checksum digest format");
    refused("x@sha256:" HEX32 HEX32 "00", "couldn't parse image name \"x@sha256:" HEX32 HEX32
                                          "00\": invalid checksum digest length");
    /* A name the grammar refuses is refused as such, whatever the digest. */
    refused("X@md5:" HEX32, "couldn't parse image name \"X@md5:" HEX32
                            "\": invalid reference format: repository name (library/X) must be "
                            "lowercase");
    /* Longer algorithms and digests than any real one: refused, never cut short. */
    char img[700];
    snprintf(img, sizeof img, "localhost:5000/a/b@%0200d:%s", 0, HEX32 HEX32);
    img[19] = 'd';
    ks_image_ref r;
    kc_err e = {0};
    cr_assert_eq(ks_image_ref_parse(img, &r, &e), KC_EINVALID);
    cr_assert(strstr(e.msg, "unsupported digest algorithm"), "%s", e.msg);
    /* The three it has are accepted and kept whole. */
    ks_image_ref ok = ref_of("x@sha512:" HEX32 HEX32 HEX32 HEX32);
    cr_assert_str_eq(ok.digest, "sha512:" HEX32 HEX32 HEX32 HEX32);
    cr_assert_str_eq(ok.full, "docker.io/library/x@sha512:" HEX32 HEX32 HEX32 HEX32);
    ok = ref_of("x@sha384:" HEX32 HEX32 HEX32);
    cr_assert_str_eq(ok.digest, "sha384:" HEX32 HEX32 HEX32);
}

static kc_code resolve(const ks_registry *r, const char *image, uint64_t *size, char *msg, size_t n)
{
    ks_image_ref ref = ref_of(image);
    return ks_registry_resolve(r, &ref, size, msg, n);
}

Test(registry, nvidias_published_images_exist_others_do_not)
{
    ks_registry *r = ks_registry_new();
    cr_assert_not_null(r);
    uint64_t size = 0;
    char msg[1024];
    const char *exist[] = {
        "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04",
        "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04",
        "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04",
        "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "nvcr.io/nvidia/k8s-device-plugin:v0.14.1",
        "nvcr.io/nvidia/k8s-device-plugin:v0.14.1-ubi8",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
        "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0",
        "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "nvidia/samples:vectoradd-cuda11.2.1",
        "ghcr.io/gpu-operator/gpu-operator-validator:dev",
        "busybox",
        "busybox:1.36",
    };
    for (size_t i = 0; i < sizeof(exist) / sizeof(exist[0]); i++)
        cr_assert_eq(resolve(r, exist[i], &size, msg, sizeof(msg)), KC_OK, "%s: %s", exist[i], msg);
    cr_assert_eq(resolve(r, "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04", &size, msg, sizeof(msg)),
                 KC_OK);
    cr_assert_eq(size, 1000ull << 20, "the driver image is about 1 GB");
    /* The examples: the validator at the chart's version under NVIDIA's operator image,
     * and a GFD version that only the old device plugin repository had. */
    cr_assert_eq(resolve(r, "nvcr.io/nvidia/gpu-operator:0.1.0", &size, msg, sizeof(msg)),
                 KC_ENOTFOUND);
    cr_assert_str_eq(msg, "rpc error: code = NotFound desc = failed to pull and unpack image "
                          "\"nvcr.io/nvidia/gpu-operator:0.1.0\": failed to resolve reference "
                          "\"nvcr.io/nvidia/gpu-operator:0.1.0\": nvcr.io/nvidia/gpu-operator:"
                          "0.1.0: not found");
    cr_assert_eq(resolve(r, "nvcr.io/nvidia/k8s-device-plugin:v0.8.0", &size, msg, sizeof(msg)),
                 KC_ENOTFOUND);
    /* A driver without the OS suffix the operator adds does not exist. */
    cr_assert_eq(resolve(r, "nvcr.io/nvidia/driver:595.91.07", &size, msg, sizeof(msg)),
                 KC_ENOTFOUND);
    /* Digests are not facts kubesim holds. */
    cr_assert_eq(resolve(r,
                         "nvcr.io/nvidia/k8s-device-plugin@sha256:"
                         "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
                         &size, msg, sizeof(msg)),
                 KC_ENOTFOUND);
    cr_assert_eq(resolve(r, "no-such-thing:1", &size, msg, sizeof(msg)), KC_ENOTFOUND);
    cr_assert(strstr(msg, "pull access denied, repository does not exist"), "%s", msg);
    cr_assert_eq(resolve(r, "registry.example.com/x:1", &size, msg, sizeof(msg)), KC_ENOTFOUND);
    cr_assert(strstr(msg, "dial tcp: lookup registry.example.com: no such host"), "%s", msg);
    ks_registry_free(r);
}

Test(registry, the_projects_images_are_at_the_charts_appversion)
{
    const char *data = getenv("KC_TEST_DATA");
    cr_assert_not_null(data);
    char path[4096], line[256], version[64] = "";
    snprintf(path, sizeof(path), "%s/../../../charts/gpu-operator/Chart.yaml", data);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "appVersion: \"%63[^\"]\"", version) == 1)
            break;
    fclose(f);
    cr_assert(version[0], "no appVersion in %s", path);
    ks_registry *r = ks_registry_new();
    uint64_t size;
    char msg[1024], img[200];
    snprintf(img, sizeof(img), "ghcr.io/gpu-operator/gpu-operator-validator:%s", version);
    cr_assert_eq(resolve(r, img, &size, msg, sizeof(msg)), KC_OK, "%s: %s", img, msg);
    snprintf(img, sizeof(img), "ghcr.io/gpu-operator/gpu-operator:%s", version);
    cr_assert_eq(resolve(r, img, &size, msg, sizeof(msg)), KC_OK, "%s: %s", img, msg);
    ks_registry_free(r);
}

Test(registry, an_images_file_adds_registries)
{
    ks_registry *r = ks_registry_new();
    size_t before = ks_registry_len(r);
    const char *text = "images:\n- image: \"mirror.example.com/*\"\n  size: 150Mi\n"
                       "- image: registry.example/web:1.0\n";
    kc_err e = {0};
    cr_assert_eq(ks_registry_load_text(r, text, strlen(text), "images.yaml", &e), KC_OK, "%s",
                 e.msg);
    cr_assert_eq(ks_registry_len(r), before + 2);
    uint64_t size = 0;
    char msg[1024];
    cr_assert_eq(resolve(r, "mirror.example.com/nvidia/driver:1", &size, msg, sizeof(msg)), KC_OK);
    cr_assert_eq(size, 150ull << 20);
    cr_assert_eq(resolve(r, "registry.example/web:1.0", &size, msg, sizeof(msg)), KC_OK);
    cr_assert_eq(size, 100ull << 20, "the default size");
    /* The registry is known now: a missing tag is "not found", not "no such host". */
    cr_assert_eq(resolve(r, "registry.example/web:2.0", &size, msg, sizeof(msg)), KC_ENOTFOUND);
    cr_assert(strstr(msg, "registry.example/web:2.0: not found"), "%s", msg);
    ks_registry_free(r);
}

static void bad_file(const char *text, const char *msg)
{
    ks_registry *r = ks_registry_new();
    size_t before = ks_registry_len(r);
    kc_err e = {0};
    cr_assert_neq(ks_registry_load_text(r, text, strlen(text), "f.yaml", &e), KC_OK, "%s", text);
    cr_assert_str_eq(e.msg, msg);
    cr_assert_eq(ks_registry_len(r), before, "a refused file adds nothing");
    ks_registry_free(r);
}

Test(registry, a_bad_images_file_is_refused_with_the_place)
{
    bad_file("images: 3\n", "f.yaml: expected a top-level `images:` list of {image, size}");
    bad_file("images: []\nextra: 1\n", "f.yaml: unknown key \"extra\" (known: images)");
    bad_file("images:\n- image: a\n- 7\n", "f.yaml: images[1]: expected a mapping {image, size}");
    bad_file("images:\n- image: a\n- {image: b, sise: 1}\n",
             "f.yaml: images[1]: unknown key \"sise\" (known: image, size)");
    bad_file("images:\n- {image: \"\"}\n", "f.yaml: images[0].image: expected a non-empty string");
    bad_file("images:\n- {image: a, size: 12Qi}\n",
             "f.yaml: images[0].size: expected bytes or a quantity such as 150Mi or 1Gi (at most "
             "1Ti)");
    bad_file("images:\n- {image: a, size: 2000Gi}\n",
             "f.yaml: images[0].size: expected bytes or a quantity such as 150Mi or 1Gi (at most "
             "1Ti)");
}
