/* kc_config_int: file helpers shared by the kubeconfig and in-cluster loaders (not public). */
#ifndef KC_CONFIG_INT_H
#define KC_CONFIG_INT_H

#include <stddef.h>

#include "kc_error.h"

/* Reads a regular file of at most max bytes into *buf (NUL-terminated, caller frees) and *len.
 * Only regular files are read, so a path naming a FIFO or device cannot block or run forever.
 * On failure returns KC_EIO (or KC_ENOMEM) without touching any kc_err: *errno_out (may be NULL)
 * gets the errno (0 when the failure is not one) and why a short reason for a message. */
kc_code kc_config_read_file(const char *path, size_t max, char **buf, size_t *len, int *errno_out,
                            char *why, size_t why_size);

/* The absolute directory of path (the current directory when path has no '/'); caller frees;
 * NULL on allocation failure. */
char *kc_config_dir_of(const char *path);

#endif
