/* ks_registry: the image registries kubesim's kubelet pulls from. Which images exist (NVIDIA's
 * published operand images and tags, the project's own images, a few public base images, plus
 * entries of an --images file), their sizes (for the pull-time model), and the error a node's
 * container runtime (containerd) reports for an image that does not exist. */
#ifndef KS_REGISTRY_H
#define KS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kc_error.h"

/* A parsed image reference, normalized as containerd does: "busybox" is
 * docker.io/library/busybox:latest, "nvcr.io/nvidia/driver:570.1-ubuntu22.04" stays. */
typedef struct ks_image_ref {
    char domain[256]; /* "docker.io", "nvcr.io", "localhost:5000" */
    char path[256];   /* "library/busybox", "nvidia/k8s-device-plugin" */
    char tag[129];    /* "latest" when neither tag nor digest was given; "" with a digest only */
    char digest[136]; /* "sha256:<64 hex>" or "" */
    char full[800];   /* domain/path[:tag][@digest] */
} ks_image_ref;

/* Parses a container's image as the kubelet (and the distribution reference grammar) does.
 * KC_EINVALID with the kubelet's message for a name it cannot use:
 * `couldn't parse image name "Busybox": invalid reference format: repository name (library/
 * Busybox) must be lowercase`. */
kc_code ks_image_ref_parse(const char *image, ks_image_ref *out, kc_err *err);

typedef struct ks_registry ks_registry;

/* The built-in facts (NVIDIA's operand images at the tags its releases name, the project's
 * images at dev, latest and the chart's appVersion, busybox, nginx, pause, CUDA samples). */
ks_registry *ks_registry_new(void);
void ks_registry_free(ks_registry *r);

/* Adds the entries of an images file (YAML):
 *   images:
 *   - image: mirror.example.com/...  # fnmatch(3) glob on the normalized reference
 *     size: 150Mi                     # compressed size (pull time); optional, default 100Mi
 * KC_EPARSE / KC_EINVALID naming the file and the entry (`images.yaml: images[2].size: ...`). */
kc_code ks_registry_load(ks_registry *r, const char *path, kc_err *err);
/* The same from text (name names it in messages). */
kc_code ks_registry_load_text(ks_registry *r, const char *text, size_t len, const char *name,
                              kc_err *err);
/* Number of entries (facts and loaded). */
size_t ks_registry_len(const ks_registry *r);

/* Whether ref exists. KC_OK with *size (bytes); KC_ENOTFOUND with containerd's message in msg
 * (as the kubelet puts it in the container's waiting message), e.g.
 * `rpc error: code = NotFound desc = failed to pull and unpack image "nvcr.io/nvidia/
 * gpu-operator:0.1.0": failed to resolve reference "nvcr.io/nvidia/gpu-operator:0.1.0":
 * nvcr.io/nvidia/gpu-operator:0.1.0: not found`. */
kc_code ks_registry_resolve(const ks_registry *r, const ks_image_ref *ref, uint64_t *size,
                            char *msg, size_t msg_size);

#endif
