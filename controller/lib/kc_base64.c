/* kc_base64: strict padded standard base64 (RFC 4648): the text is checked here, so that an error
 * says what and where; OpenSSL encodes and decodes. */
#include "kc_base64.h"

#include <openssl/evp.h>

#include <stdlib.h>
#include <string.h>

/* Far above any certificate or secret we handle; keeps every size computation below in range. */
#define KC_BASE64_MAX ((size_t)1 << 30)

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

kc_code kc_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len,
                         kc_err *err)
{
    if (!out || !out_len || (!in && len))
        return kc_err_set(err, KC_EARG, "kc_base64_decode: NULL argument");
    *out = NULL;
    *out_len = 0;
    if (len > KC_BASE64_MAX)
        return kc_err_set(err, KC_EPARSE, "base64 text of %zu bytes is too large", len);
    /* Compact the text (whitespace removed), checking every character so an error can say what
     * and where; the decoding below then only sees alphabet characters and trailing '='. */
    unsigned char *text = malloc(len + 1);
    unsigned char *bin = NULL;
    if (!text)
        goto oom;
    size_t n = 0, pad = 0, first_pad_at = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (is_ws(c))
            continue;
        if (c == '=') {
            if (pad == 0)
                first_pad_at = i;
            pad++;
        } else if (b64_value(c) < 0 || pad) {
            free(text);
            if (pad)
                return kc_err_set(err, KC_EPARSE,
                                  "invalid base64: data after '=' padding at "
                                  "position %zu",
                                  i + 1);
            if (c < 0x20 || c >= 0x7f)
                return kc_err_set(err, KC_EPARSE,
                                  "invalid base64: byte 0x%02x at position %zu is not in the "
                                  "base64 alphabet",
                                  c, i + 1);
            return kc_err_set(err, KC_EPARSE,
                              "invalid base64: '%c' at position %zu is not in the base64 alphabet",
                              c, i + 1);
        }
        text[n++] = c;
    }
    if (n % 4 != 0) {
        free(text);
        return kc_err_set(err, KC_EPARSE,
                          "invalid base64: %zu characters is not a multiple of 4 (missing '=' "
                          "padding or truncated)",
                          n);
    }
    if (pad > 2) {
        free(text);
        return kc_err_set(err, KC_EPARSE, "invalid base64: too much '=' padding at position %zu",
                          first_pad_at + 1);
    }
    bin = malloc(n / 4 * 3 + 1);
    if (!bin)
        goto oom;
    /* OpenSSL decodes the checked text; '=' counts as zero bits and its bytes are dropped. */
    int got = n ? EVP_DecodeBlock(bin, text, (int)n) : 0;
    free(text);
    if (got < 0 || (size_t)got != n / 4 * 3) {
        free(bin);
        return kc_err_set(err, KC_EPARSE, "invalid base64 (rejected by the decoder)");
    }
    *out_len = (size_t)got - pad;
    bin[*out_len] = '\0';
    *out = bin;
    return KC_OK;
oom:
    free(text);
    return kc_err_set(err, KC_ENOMEM, "out of memory decoding base64");
}

char *kc_base64_encode(const unsigned char *in, size_t len)
{
    if ((!in && len) || len > KC_BASE64_MAX)
        return NULL;
    char *outb = malloc((len + 2) / 3 * 4 + 1);
    if (!outb)
        return NULL;
    outb[0] = '\0';
    if (len)
        EVP_EncodeBlock((unsigned char *)outb, in, (int)len); /* NUL-terminated, no line breaks */
    return outb;
}
