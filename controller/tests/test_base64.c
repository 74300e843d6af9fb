/* Tests for kc_base64: padded standard base64 both ways, whitespace, and precise errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_base64.h"

static const char *b64_err(const char *in)
{
    static kc_err e;
    unsigned char *out = (unsigned char *)0x1;
    size_t n = 7;
    kc_err_clear(&e);
    cr_assert_eq(kc_base64_decode(in, strlen(in), &out, &n, &e), KC_EPARSE, "%s", in);
    cr_assert_null(out);
    cr_assert_eq(n, 0);
    return e.msg;
}

Test(base64, round_trip_and_padding)
{
    static const char *cases[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char *s = kc_base64_encode((const unsigned char *)cases[i], strlen(cases[i]));
        cr_assert_str_eq(s, enc[i]);
        unsigned char *out = NULL;
        size_t n = 99;
        kc_err e = {0};
        cr_assert_eq(kc_base64_decode(s, strlen(s), &out, &n, &e), KC_OK, "%s", e.msg);
        cr_assert_eq(n, strlen(cases[i]));
        cr_assert_eq(memcmp(out, cases[i], n), 0);
        cr_assert_eq(out[n], '\0');
        free(out);
        free(s);
    }
    /* Binary data, including NUL bytes, and whitespace-wrapped text. */
    unsigned char bin[] = {0, 1, 0xff, 0, 0x80};
    char *s = kc_base64_encode(bin, sizeof(bin));
    cr_assert_str_eq(s, "AAH/AIA=");
    free(s);
    unsigned char *out = NULL;
    size_t n = 0;
    const char *wrapped = " AAH/\r\n  AIA=\n";
    cr_assert_eq(kc_base64_decode(wrapped, strlen(wrapped), &out, &n, NULL), KC_OK);
    cr_assert_eq(n, sizeof(bin));
    cr_assert_eq(memcmp(out, bin, n), 0);
    free(out);
}

Test(base64, errors)
{
    cr_assert_str_eq(b64_err("Zm9v!"), "invalid base64: '!' at position 5 is not in the base64 "
                                       "alphabet");
    cr_assert_str_eq(b64_err("Zm\x01v"), "invalid base64: byte 0x01 at position 3 is not in the "
                                         "base64 alphabet");
    cr_assert_str_eq(b64_err("Zm9"), "invalid base64: 3 characters is not a multiple of 4 (missing "
                                     "'=' padding or truncated)");
    cr_assert_str_eq(b64_err("Zg=a"), "invalid base64: data after '=' padding at position 4");
    cr_assert_str_eq(b64_err("Z==="), "invalid base64: too much '=' padding at position 2");
    cr_assert_str_eq(b64_err("===="), "invalid base64: too much '=' padding at position 1");
    cr_assert_str_eq(b64_err("Zg==Zg=="), "invalid base64: data after '=' padding at position 5");
    unsigned char *out;
    size_t n;
    cr_assert_eq(kc_base64_decode(NULL, 1, &out, &n, NULL), KC_EARG);
    cr_assert_null(kc_base64_encode(NULL, 1));
}
