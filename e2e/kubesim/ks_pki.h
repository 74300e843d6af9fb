/* ks_pki: file helpers of kubesim's state directory (shared by ks_pki.c, ks_auth.c, the kubelet
 * and main.c). The PKI and kubeconfig entry points are in ks_sim.h. */
#ifndef KS_PKI_H
#define KS_PKI_H

#include <stddef.h>
#include <sys/types.h>

#include "kc_error.h"

/* mkdir -p with mode 0755 for every missing component. KC_EIO naming the component. */
kc_code ks_pki_mkdirs(const char *path, kc_err *err);

/* Writes data atomically (a temporary file in the same directory, fsync'd, then renamed over
 * path) with the given permission bits. KC_EIO naming the file and the failing step. */
kc_code ks_pki_write_file(const char *path, const void *data, size_t len, mode_t mode, kc_err *err);

/* Reads a whole regular file (at most 16 MiB) into a NUL-terminated malloc'd buffer. KC_ENOTFOUND
 * when it does not exist, KC_EIO otherwise. */
kc_code ks_pki_read_file(const char *path, char **out, size_t *len, kc_err *err);

/* Fills buf with 2*nbytes lowercase hex characters of cryptographic randomness plus a NUL
 * (buf_size must be at least 2*nbytes+1). KC_EIO when the random source fails. */
kc_code ks_pki_random_hex(char *buf, size_t buf_size, size_t nbytes, kc_err *err);

#endif
