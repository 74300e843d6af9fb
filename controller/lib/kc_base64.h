/* kc_base64: standard (RFC 4648, padded) base64 for the -data fields of kubeconfigs and Secrets. */
#ifndef KC_BASE64_H
#define KC_BASE64_H

#include <stddef.h>

#include "kc_error.h"

/* Decodes len bytes of padded standard base64. ASCII whitespace (line breaks of wrapped PEM-style
 * text) is skipped; anything else outside the alphabet, a length that is not a multiple of 4 or
 * misplaced '=' is KC_EPARSE with a message saying what and where (the caller prefixes which
 * field). On success *out (caller frees) holds *out_len bytes plus a NUL that is not counted, so
 * text can be used as a C string. */
kc_code kc_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len,
                         kc_err *err);

/* Encodes len bytes as padded standard base64 without line breaks; returns a NUL-terminated string
 * the caller frees, or NULL on allocation failure. */
char *kc_base64_encode(const unsigned char *in, size_t len);

#endif
