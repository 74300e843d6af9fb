/* ks_registry: image references, the registries' contents and containerd's pull errors. */
#include "ks_registry.h"

#include "kc_yaml.h"
#include "ks_kubelet.h" /* ks_quantity_parse */

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- references ---- */

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* path-component: [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)* */
static bool path_component_ok(const char *s, size_t n)
{
    size_t i = 0;
    if (n == 0 || !is_lower_alnum(s[0]))
        return false;
    while (i < n) {
        while (i < n && is_lower_alnum(s[i]))
            i++;
        if (i == n)
            return true;
        size_t sep = i;
        if (s[i] == '.')
            i++;
        else if (s[i] == '_')
            i += (i + 1 < n && s[i + 1] == '_') ? 2 : 1;
        else if (s[i] == '-')
            while (i < n && s[i] == '-')
                i++;
        else
            return false;
        if (i == sep || i == n || !is_lower_alnum(s[i]))
            return false;
    }
    return true;
}

/* domain: host components [a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])? joined by '.', optional :port */
static bool domain_ok(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t hn = colon ? (size_t)(colon - s) : n;
    if (colon) {
        size_t pn = n - hn - 1;
        if (pn == 0)
            return false;
        for (size_t i = 0; i < pn; i++)
            if (!isdigit((unsigned char)colon[1 + i]))
                return false;
    }
    if (hn == 0)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= hn; i++) {
        if (i < hn && s[i] != '.')
            continue;
        size_t len = i - start;
        if (len == 0 || !isalnum((unsigned char)s[start]) ||
            !isalnum((unsigned char)s[start + len - 1]))
            return false;
        for (size_t k = start; k < i; k++)
            if (!isalnum((unsigned char)s[k]) && s[k] != '-')
                return false;
        start = i + 1;
    }
    return true;
}

static bool tag_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return false;
    if (!isalnum((unsigned char)s[0]) && s[0] != '_')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* algorithm ":" hex; sha256 needs exactly 64 lowercase hex digits. */
/* The reference grammar's digest: algorithm components [A-Za-z][A-Za-z0-9]* joined by one of
 * "-_+.", ':', at least 32 hex digits (either case). */
static bool digest_grammar_ok(const char *s)
{
    const char *p = s;
    for (;;) {
        if (!isalpha((unsigned char)*p))
            return false;
        while (isalnum((unsigned char)*p))
            p++;
        if (*p == ':')
            break;
        if (!*p || !strchr("-_+.", *p))
            return false;
        p++;
    }
    size_t hn = strlen(++p);
    for (const char *h = p; *h; h++)
        if (!isxdigit((unsigned char)*h))
            return false;
    return hn >= 32;
}

/* What containerd's digest check (go-digest) then says of a digest the grammar allows, or NULL:
 * only sha256, sha384 and sha512 are available, hex-encoded in lowercase at their sizes. */
static const char *digest_refusal(const char *s)
{
    static const struct {
        const char *name;
        size_t hex;
    } algs[] = {{"sha256", 64}, {"sha384", 96}, {"sha512", 128}};
    const char *colon = strchr(s, ':');
    size_t an = (size_t)(colon - s), hn = strlen(colon + 1);
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        if (an != strlen(algs[i].name) || strncmp(s, algs[i].name, an))
            continue;
        if (hn != algs[i].hex)
            return "invalid checksum digest length";
        for (const char *h = colon + 1; *h; h++)
            if (!isxdigit((unsigned char)*h) || isupper((unsigned char)*h))
                return "invalid checksum digest format";
        return NULL;
    }
    /* An algorithm it does not have: unsupported when the digest is well formed at all
     * (lowercase algorithm components). */
    for (const char *p = s; p < colon; p++)
        if (isupper((unsigned char)*p))
            return "invalid checksum digest format";
    return "unsupported digest algorithm";
}

static kc_code bad_ref(kc_err *err, const char *image, const char *why)
{
    return kc_err_set(err, KC_EINVALID, "couldn't parse image name \"%s\": %s", image, why);
}

kc_code ks_image_ref_parse(const char *image, ks_image_ref *out, kc_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!image || !*image)
        return bad_ref(err, image ? image : "", "invalid reference format");
    size_t len = strlen(image);
    if (len >= sizeof(out->full) - 40)
        return bad_ref(err, "...",
                       "invalid reference format: repository name must not be more "
                       "than 255 characters");
    char buf[800];
    memcpy(buf, image, len + 1);
    /* A 64-hex string alone is an image id, not a name. */
    if (len == 64) {
        bool hex = true;
        for (size_t i = 0; i < len && hex; i++)
            hex = isxdigit((unsigned char)buf[i]) && !isupper((unsigned char)buf[i]);
        if (hex)
            return kc_err_set(err, KC_EINVALID,
                              "couldn't parse image name \"%s\": invalid repository name (%s), "
                              "cannot specify 64-byte hexadecimal strings",
                              image, image);
    }
    char *at = strchr(buf, '@');
    if (at) {
        *at = '\0';
        if (!digest_grammar_ok(at + 1))
            return bad_ref(err, image, "invalid reference format");
    }
    /* Domain: the first component when it has a '.' or ':' or is localhost (or has uppercase,
     * which docker.io names cannot). */
    char *name = buf, *slash = strchr(buf, '/');
    const char *domain = "docker.io";
    if (slash) {
        size_t dn = (size_t)(slash - buf);
        bool is_domain = memchr(buf, '.', dn) || memchr(buf, ':', dn) ||
                         (dn == 9 && !strncmp(buf, "localhost", 9));
        for (size_t i = 0; !is_domain && i < dn; i++)
            is_domain = isupper((unsigned char)buf[i]);
        if (is_domain) {
            if (!domain_ok(buf, dn))
                return bad_ref(err, image, "invalid reference format");
            *slash = '\0';
            domain = buf;
            name = slash + 1;
        }
    }
    /* Tag: after the last ':' of the remainder (a ':' before a '/' belongs to the domain). */
    char *colon = strrchr(name, ':');
    if (colon) {
        *colon = '\0';
        if (!tag_ok(colon + 1))
            return bad_ref(err, image, "invalid reference format");
        snprintf(out->tag, sizeof(out->tag), "%s", colon + 1);
    }
    char remote[300];
    if (!strcmp(domain, "docker.io") && !strchr(name, '/'))
        snprintf(remote, sizeof(remote), "library/%s", name);
    else
        snprintf(remote, sizeof(remote), "%s", name);
    for (const char *p = remote; *p; p++)
        if (isupper((unsigned char)*p)) {
            char why[400];
            snprintf(why, sizeof(why),
                     "invalid reference format: repository name (%s) must be lowercase", remote);
            return bad_ref(err, image, why);
        }
    /* Path components separated by '/'. */
    size_t rn = strlen(remote), start = 0;
    for (size_t i = 0; i <= rn; i++) {
        if (i < rn && remote[i] != '/')
            continue;
        if (!path_component_ok(remote + start, i - start))
            return bad_ref(err, image, "invalid reference format");
        start = i + 1;
    }
    if (strlen(domain) + 1 + rn > 255)
        return bad_ref(err, image,
                       "invalid reference format: repository name must not be more than 255 "
                       "characters");
    /* The digest is checked last, once the name parsed (as the reference parser does). */
    if (at) {
        const char *why = digest_refusal(at + 1);
        if (why)
            return bad_ref(err, image, why);
        snprintf(out->digest, sizeof(out->digest), "%s", at + 1);
    }
    if (!out->tag[0] && !out->digest[0])
        snprintf(out->tag, sizeof(out->tag), "latest");
    snprintf(out->domain, sizeof(out->domain), "%s", domain);
    snprintf(out->path, sizeof(out->path), "%s", remote);
    snprintf(out->full, sizeof(out->full), "%s/%s%s%s%s%s", out->domain, out->path,
             out->tag[0] ? ":" : "", out->tag, out->digest[0] ? "@" : "", out->digest);
    return KC_OK;
}

/* ---- the registries' contents ---- */

/* A built-in fact: a repository, its compressed size and its tags (space-separated; each
 * version is published with every suffix of `suffixes`, "" meaning the plain version). */
typedef struct fact {
    const char *repo;
    unsigned size_mib;
    const char *versions;
    const char *suffixes; /* space-separated; "-" stands for the plain version; NULL: plain */
} fact;

/* Operand images at the tags NVIDIA's GPU Operator releases (v22.9 to v26.7) name in their
 * values.yaml (drivers also at the other data-center releases of the R560-R580 branches); the
 * device plugin and GFD also without the -ubi8 suffix; every toolkit release of
 * those years in its Ubuntu/UBI (and, until v1.14, CentOS 7) builds; drivers for the operating
 * systems NVIDIA builds them for. Sizes are the compressed sizes a node downloads,
 * rounded (the driver image about 1 GB; the others 50-450 MB). */
static const fact facts[] = {
    {"nvcr.io/nvidia/driver", 1000,
     "515.65.01 525.60.13 525.105.17 535.86.10 535.104.05 535.104.12 535.129.03 550.54.14 "
     "550.54.15 550.90.07 550.127.05 550.127.08 550.144.03 560.35.03 565.57.01 570.86.15 "
     "570.124.06 570.133.20 570.148.08 570.172.08 575.57.08 580.65.06 580.82.07 580.95.05 "
     "580.105.08 580.126.20 595.91.07",
     "-ubuntu20.04 -ubuntu22.04 -ubuntu24.04 -rhel8.8 -rhel8.10 -rhel9.2 -rhel9.4 -rhel9.6 "
     "-rhcos4.14 -rhcos4.16 -rhcos4.18"},
    {"nvcr.io/nvidia/cloud-native/k8s-driver-manager", 80,
     "v0.4.2 v0.5.1 v0.6.0 v0.6.1 v0.6.2 v0.6.4 v0.6.5 v0.6.8 v0.6.10 v0.7.0 v0.8.0 v0.8.1 "
     "v0.9.0 v0.9.1 v0.10.0 v0.11.0 v0.12.0",
     NULL},
    {"nvcr.io/nvidia/k8s/container-toolkit", 120,
     "v1.10.0 v1.11.0 v1.12.0 v1.13.0 v1.13.1 v1.13.2 v1.13.3 v1.13.4 v1.13.5 v1.14.0 v1.14.1 "
     "v1.14.2 v1.14.3 v1.14.4 v1.14.5 v1.14.6",
     "-ubuntu20.04 -ubi8 -centos7"},
    {"nvcr.io/nvidia/k8s/container-toolkit", 120,
     "v1.15.0 v1.16.0 v1.16.1 v1.16.2 v1.17.0 v1.17.1 v1.17.2 v1.17.3 v1.17.4 v1.17.5 v1.17.6 "
     "v1.17.7 v1.17.8",
     "-ubuntu20.04 -ubi8"},
    {"nvcr.io/nvidia/k8s/container-toolkit", 120, "v1.18.0 v1.18.1 v1.19.0 v1.19.1 v1.20.0", NULL},
    {"nvcr.io/nvidia/k8s-device-plugin", 150,
     "v0.12.3 v0.13.0 v0.14.0 v0.14.1 v0.14.2 v0.14.3 v0.14.5 v0.15.0 v0.16.1 v0.16.2", "- -ubi8"},
    {"nvcr.io/nvidia/k8s-device-plugin", 150,
     "v0.17.0 v0.17.0-ubi9 v0.17.1 v0.17.2 v0.17.3 v0.17.4 v0.18.0 v0.18.1 v0.19.0 v0.19.2 "
     "v0.19.3 v0.20.0",
     NULL},
    {"nvcr.io/nvidia/gpu-feature-discovery", 120, "v0.6.2 v0.7.0 v0.8.0 v0.8.1 v0.8.2", "- -ubi8"},
    {"nvcr.io/nvidia/cloud-native/dcgm", 450,
     "3.0.4-1-ubuntu20.04 3.1.3-1-ubuntu20.04 3.1.7-1-ubuntu20.04 3.1.8-1-ubuntu20.04 "
     "3.2.6-1-ubuntu20.04 3.3.0-1-ubuntu22.04 3.3.5-1-ubuntu22.04 3.3.7-1-ubuntu22.04 "
     "3.3.8-1-ubuntu22.04 3.3.9-1-ubuntu22.04 4.1.1-2-ubuntu22.04 4.2.3-1-ubuntu22.04 "
     "4.3.1-1-ubuntu22.04 4.4.1-2-ubuntu22.04 4.4.2-1-ubuntu22.04 4.5.2-1-ubuntu22.04 "
     "4.6.0-1-ubuntu24.04",
     NULL},
    {"nvcr.io/nvidia/k8s/dcgm-exporter", 300,
     "3.0.4-3.0.0-ubuntu20.04 3.1.3-3.1.2-ubuntu20.04 3.1.7-3.1.4-ubuntu20.04 "
     "3.1.8-3.1.5-ubuntu20.04 3.2.6-3.1.9-ubuntu20.04 3.3.0-3.2.0-ubuntu22.04 "
     "3.3.5-3.4.1-ubuntu22.04 3.3.7-3.5.0-ubuntu22.04 3.3.8-3.6.0-ubuntu22.04 "
     "3.3.9-3.6.1-ubuntu22.04 4.1.1-4.0.4-ubuntu22.04 4.2.3-4.1.3-ubuntu22.04 "
     "4.3.1-4.4.0-ubuntu22.04 4.4.1-4.6.0-distroless 4.4.2-4.7.0-distroless "
     "4.5.1-4.8.0-distroless 4.5.3-4.8.2-distroless 4.6.0-4.8.3-distroless",
     NULL},
    {"nvcr.io/nvidia/cloud-native/k8s-mig-manager", 150,
     "v0.5.0-ubuntu20.04 v0.5.2-ubuntu20.04 v0.5.3-ubuntu20.04 v0.5.5-ubuntu20.04 "
     "v0.6.0-ubuntu20.04 v0.7.0-ubuntu20.04 v0.8.0-ubuntu20.04 v0.10.0-ubuntu20.04 "
     "v0.12.1-ubuntu20.04 v0.12.2-ubuntu20.04 v0.12.3-ubuntu20.04 v0.13.0 v0.13.1 v0.14.0 "
     "v0.14.2 v0.15.0",
     NULL},
    /* NVIDIA's validator: its own image until v25.3, then inside the operator's image. */
    {"nvcr.io/nvidia/cloud-native/gpu-operator-validator", 250,
     "v22.9.0 v22.9.1 v22.9.2 v23.3.0 v23.3.1 v23.3.2 v23.6.0 v23.6.1 v23.6.2 v23.9.0 v23.9.1 "
     "v23.9.2 v24.3.0 v24.6.0 v24.6.1 v24.6.2 v24.9.0 v24.9.1 v24.9.2 v25.3.0 v25.3.1 v25.3.2 "
     "v25.3.3 v25.3.4",
     NULL},
    {"nvcr.io/nvidia/gpu-operator", 250,
     "v22.9.0 v22.9.1 v22.9.2 v23.3.0 v23.3.1 v23.3.2 v23.6.0 v23.6.1 v23.6.2 v23.9.0 v23.9.1 "
     "v23.9.2 v24.3.0 v24.6.0 v24.6.1 v24.6.2 v24.9.0 v24.9.1 v24.9.2 v25.3.0 v25.3.1 v25.3.2 "
     "v25.3.3 v25.3.4 v25.10.0 v25.10.1 v26.3.0 v26.3.1 v26.3.2 v26.3.3 v26.7.0",
     NULL},
    {"nvcr.io/nvidia/cloud-native/nvidia-fs", 300,
     "2.14.13 2.15.1 2.16.1 2.17.5 2.20.5 2.26.6 2.27.3 2.29.4", NULL},
    {"nvcr.io/nvidia/cloud-native/gdrdrv", 300,
     "v2.4.1 v2.4.1-1 v2.4.1-2 v2.4.4 v2.5 v2.5.1 v2.5.2 v2.6", NULL},
    {"nvcr.io/nvidia/cloud-native/vgpu-device-manager", 80,
     "v0.2.0 v0.2.1 v0.2.3 v0.2.4 v0.2.6 v0.2.7 v0.2.8 v0.3.0 v0.4.0 v0.4.1 v0.4.2 v0.5.0", NULL},
    {"nvcr.io/nvidia/cloud-native/k8s-kata-manager", 60,
     "v0.1.0 v0.1.1 v0.1.2 v0.2.0 v0.2.1 v0.2.2 v0.2.3", NULL},
    {"nvcr.io/nvidia/cloud-native/k8s-cc-manager", 60, "v0.1.0 v0.1.1 v0.3.0 v0.4.0 v0.4.3", NULL},
    {"nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin", 60, "v0.0.2 v0.0.3 v0.0.5", NULL},
    {"nvcr.io/nvidia/kubevirt-gpu-device-plugin", 60,
     "v1.2.1 v1.2.2 v1.2.3 v1.2.4 v1.2.7 v1.2.9 v1.2.10 v1.3.1 v1.4.0 v1.5.0 v1.6.0", NULL},
    {"nvcr.io/nvidia/cuda", 100,
     "11.7.1-base-ubi8 11.8.0-base-ubi8 12.1.0-base-ubi8 12.1.1-base-ubi8 12.2.0-base-ubi8 "
     "12.2.2-base-ubi8 12.3.1-base-ubi8 12.3.2-base-ubi8 12.4.1-base-ubi8 12.5.1-base-ubi8 "
     "12.6.1-base-ubi8 12.6.2-base-ubi9 12.6.3-base-ubi9 12.8.1-base-ubi9 13.0.0-base-ubi9 "
     "13.0.1-base-ubi9 12.4.0-base-ubuntu22.04 12.4.1-base-ubuntu22.04",
     NULL},
    /* NVIDIA's CUDA vectorAdd samples (the smoke test of its documentation). */
    {"nvcr.io/nvidia/k8s/cuda-sample", 120,
     "vectoradd-cuda11.7.1-ubuntu20.04 vectoradd-cuda11.7.1-ubi8 vectoradd-cuda12.5.0 "
     "vectoradd-cuda12.5.0-ubuntu22.04 vectoradd-cuda12.5.0-ubi8",
     NULL},
    {"docker.io/nvidia/samples", 120, "vectoradd-cuda10.2 vectoradd-cuda11.2.1", NULL},
    /* The project's own images: what its Dockerfile builds, at the chart's appVersion. */
    {"ghcr.io/gpu-operator/gpu-operator", 45, "0.1.0 dev latest", NULL},
    {"ghcr.io/gpu-operator/gpu-operator-validator", 45, "0.1.0 dev latest", NULL},
    /* Public base images test pods use. */
    {"docker.io/library/busybox", 2, "1 1.36 1.36.1 1.37 1.37.0 stable latest", NULL},
    {"docker.io/library/nginx", 70, "1 1.25 1.26 1.27 1.28 1.29 stable mainline latest", NULL},
    {"registry.k8s.io/pause", 1, "3.8 3.9 3.10", NULL},
};

typedef struct entry {
    char *glob;    /* fnmatch on the normalized reference (loaded entries) */
    char *repo;    /* domain/path (facts) */
    char **tags;   /* NULL-terminated (facts) */
    uint64_t size; /* bytes */
} entry;

struct ks_registry {
    entry *e;
    size_t n, cap;
};

static entry *add_entry(ks_registry *r)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        entry *e = realloc(r->e, cap * sizeof(*e));
        if (!e)
            return NULL;
        r->e = e;
        r->cap = cap;
    }
    entry *e = &r->e[r->n++];
    memset(e, 0, sizeof(*e));
    return e;
}

static void entry_free(entry *e)
{
    free(e->glob);
    free(e->repo);
    for (char **t = e->tags; t && *t; t++)
        free(*t);
    free(e->tags);
}

void ks_registry_free(ks_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        entry_free(&r->e[i]);
    free(r->e);
    free(r);
}

/* Splits a space-separated list; "-" is the empty string. */
static size_t words(const char *s, char out[][80], size_t max)
{
    size_t n = 0;
    while (s && *s && n < max) {
        while (*s == ' ')
            s++;
        size_t len = strcspn(s, " ");
        if (!len)
            break;
        if (len >= 80)
            len = 79;
        memcpy(out[n], s, len);
        out[n][len] = '\0';
        if (!strcmp(out[n], "-"))
            out[n][0] = '\0';
        n++;
        s += len;
    }
    return n;
}

static bool add_fact(ks_registry *r, const fact *f)
{
    static char vs[64][80], ss[16][80];
    size_t nv = words(f->versions, vs, 64);
    size_t ns = f->suffixes ? words(f->suffixes, ss, 16) : 1;
    if (!f->suffixes)
        ss[0][0] = '\0';
    entry *e = add_entry(r);
    if (!e)
        return false;
    e->repo = strdup(f->repo);
    e->size = (uint64_t)f->size_mib << 20;
    e->tags = calloc(nv * ns + 1, sizeof(char *));
    if (!e->repo || !e->tags)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < nv; i++)
        for (size_t j = 0; j < ns; j++) {
            size_t len = strlen(vs[i]) + strlen(ss[j]) + 1;
            if (!(e->tags[k] = malloc(len)))
                return false;
            snprintf(e->tags[k++], len, "%s%s", vs[i], ss[j]);
        }
    return true;
}

ks_registry *ks_registry_new(void)
{
    ks_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++)
        if (!add_fact(r, &facts[i])) {
            ks_registry_free(r);
            return NULL;
        }
    return r;
}

size_t ks_registry_len(const ks_registry *r)
{
    return r ? r->n : 0;
}

/* A size: bytes or a quantity ("150Mi", "1Gi", "500M"), at most 1 TiB. */
static bool parse_size(const char *s, uint64_t *out)
{
    double v;
    if (!ks_quantity_parse(s, &v) || v < 0 || v > 1099511627776.0)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* Adds the entries of a parsed images file (all or none); takes docs. */
static kc_code load_docs(ks_registry *r, json_t *docs, const char *name, kc_err *err)
{
    kc_code rc = KC_OK;
    const json_t *doc = json_array_get(docs, 0);
    const json_t *images = json_object_get(doc, "images");
    if (!json_is_object(doc) || !json_is_array(images)) {
        rc = kc_err_set(err, KC_EINVALID,
                        "%s: expected a top-level `images:` list of {image, size}", name);
        goto out;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)doc, k, v) if (strcmp(k, "images") != 0)
    {
        rc = kc_err_set(err, KC_EINVALID, "%s: unknown key \"%s\" (known: images)", name, k);
        goto out;
    }
    size_t i;
    const json_t *it;
    size_t first = r->n;
    json_array_foreach(images, i, it)
    {
        if (!json_is_object(it)) {
            rc = kc_err_set(err, KC_EINVALID, "%s: images[%zu]: expected a mapping {image, size}",
                            name, i);
            goto undo;
        }
        json_object_foreach((json_t *)it, k, v) if (strcmp(k, "image") && strcmp(k, "size"))
        {
            rc = kc_err_set(err, KC_EINVALID,
                            "%s: images[%zu]: unknown key \"%s\" (known: image, "
                            "size)",
                            name, i, k);
            goto undo;
        }
        const char *glob = json_string_value(json_object_get(it, "image"));
        if (!glob || !*glob) {
            rc = kc_err_set(err, KC_EINVALID, "%s: images[%zu].image: expected a non-empty string",
                            name, i);
            goto undo;
        }
        uint64_t size = 100ull << 20;
        const json_t *sz = json_object_get(it, "size");
        if (sz) {
            char buf[64];
            if (json_is_integer(sz) && json_integer_value(sz) >= 0)
                snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(sz));
            else
                snprintf(buf, sizeof(buf), "%s",
                         json_string_value(sz) ? json_string_value(sz) : "");
            if (!parse_size(buf, &size)) {
                rc = kc_err_set(err, KC_EINVALID,
                                "%s: images[%zu].size: expected bytes or a quantity such as "
                                "150Mi or 1Gi (at most 1Ti)",
                                name, i);
                goto undo;
            }
        }
        entry *e = add_entry(r);
        if (!e || !(e->glob = strdup(glob))) {
            rc = kc_err_set(err, KC_ENOMEM, "out of memory reading %s", name);
            goto undo;
        }
        e->size = size;
    }
    goto out;
undo:
    while (r->n > first)
        entry_free(&r->e[--r->n]);
out:
    json_decref(docs);
    return rc;
}

kc_code ks_registry_load_text(ks_registry *r, const char *text, size_t len, const char *name,
                              kc_err *err)
{
    json_t *docs = NULL;
    kc_code rc = kc_yaml_parse(text, len, name, &docs, err);
    return rc == KC_OK ? load_docs(r, docs, name, err) : rc;
}

kc_code ks_registry_load(ks_registry *r, const char *path, kc_err *err)
{
    json_t *docs = NULL;
    kc_code rc = kc_yaml_parse_file(path, &docs, err);
    return rc == KC_OK ? load_docs(r, docs, path, err) : rc;
}

/* ---- lookups ---- */

static bool fact_has(const entry *e, const ks_image_ref *ref)
{
    if (ref->digest[0] || !e->tags)
        return false; /* digests are not facts we hold */
    for (char **t = e->tags; *t; t++)
        if (!strcmp(*t, ref->tag))
            return true;
    return false;
}

kc_code ks_registry_resolve(const ks_registry *r, const ks_image_ref *ref, uint64_t *size,
                            char *msg, size_t msg_size)
{
    char repo[600];
    snprintf(repo, sizeof(repo), "%s/%s", ref->domain, ref->path);
    bool repo_known = false, domain_known = false;
    size_t dn = strlen(ref->domain);
    for (size_t i = 0; r && i < r->n; i++) {
        const entry *e = &r->e[i];
        if (e->glob) {
            if (fnmatch(e->glob, ref->full, 0) == 0) {
                *size = e->size;
                return KC_OK;
            }
            if (!strncmp(e->glob, ref->domain, dn) && e->glob[dn] == '/')
                domain_known = true;
            continue;
        }
        if (!strcmp(e->repo, repo)) {
            repo_known = domain_known = true;
            if (fact_has(e, ref)) {
                *size = e->size;
                return KC_OK;
            }
        } else if (!strncmp(e->repo, ref->domain, dn) && e->repo[dn] == '/') {
            domain_known = true;
        }
    }
    const char *f = ref->full;
    if (!domain_known)
        snprintf(msg, msg_size,
                 "rpc error: code = Unknown desc = failed to pull and unpack image \"%s\": failed "
                 "to resolve reference \"%s\": failed to do request: Head \"https://%s/v2/%s/"
                 "manifests/%s\": dial tcp: lookup %.*s: no such host",
                 f, f, ref->domain, ref->path, ref->digest[0] ? ref->digest : ref->tag,
                 (int)strcspn(ref->domain, ":"), ref->domain);
    else if (!repo_known && !strcmp(ref->domain, "docker.io"))
        snprintf(msg, msg_size,
                 "rpc error: code = Unknown desc = failed to pull and unpack image \"%s\": failed "
                 "to resolve reference \"%s\": pull access denied, repository does not exist or "
                 "may require authorization: server message: insufficient_scope: authorization "
                 "failed",
                 f, f);
    else
        snprintf(msg, msg_size,
                 "rpc error: code = NotFound desc = failed to pull and unpack image \"%s\": failed "
                 "to resolve reference \"%s\": %s: not found",
                 f, f, f);
    return KC_ENOTFOUND;
}
