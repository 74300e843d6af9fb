/* Tests for kc_url, the check of the server URLs kubeconfigs name: what is accepted, and the
 * precise reason for what is refused. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_url.h"

Test(url, parses_what_kubeconfigs_hold)
{
    kc_url u;
    kc_err e;
    cr_assert_eq(kc_url_parse("https://10.0.0.1:6443", &u, &e), KC_OK, "%s", e.msg);
    cr_assert(u.tls);
    cr_assert_str_eq(u.host, "10.0.0.1");
    cr_assert_eq(u.port, 6443);
    cr_assert_str_eq(u.path, "");
    char auth[300];
    cr_assert(kc_url_authority(&u, auth, sizeof(auth)));
    cr_assert_str_eq(auth, "10.0.0.1:6443");

    cr_assert_eq(kc_url_parse("HTTPS://[fd00::1]/k8s/clusters/c-1/", &u, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(u.host, "fd00::1");
    cr_assert(u.host_is_ipv6);
    cr_assert_eq(u.port, 443);
    cr_assert_str_eq(u.path, "/k8s/clusters/c-1");
    cr_assert(kc_url_authority(&u, auth, sizeof(auth)));
    cr_assert_str_eq(auth, "[fd00::1]");

    cr_assert_eq(kc_url_parse("http://kubernetes.default.svc", &u, &e), KC_OK, "%s", e.msg);
    cr_assert_not(u.tls);
    cr_assert_eq(u.port, 80);
    cr_assert_not(kc_url_authority(&u, auth, 5), "a short buffer is reported");
}

Test(url, refuses_with_the_reason)
{
    static const struct {
        const char *url;
        const char *msg;
    } cases[] = {
        {"h:6443", "is not an http(s) URL"},
        {"ftp://h", "the scheme must be https or http"},
        {"https://", "is not a valid URL: No host part"},
        {"https://:6443", "No host part"},
        {"https://h:", "empty port"},
        {"https://h:0", "1..65535"},
        {"https://h:65536", "between 0 and 65535"},
        {"https://h:99999999999999999999", "between 0 and 65535"},
        {"https://h:6443x", "Port number was not a decimal number"},
        {"https://[::1", "Bad IPv6 address"},
        {"https://[nope]:1", "Bad IPv6 address"},
        {"https://[::1]x", "is not a valid URL"},
        {"https://u:p@h/", "must not contain credentials"},
        {"https://h/?x=1", "must not contain a query"},
        {"https://h/#f", "must not contain a fragment"},
        {"https://h w", "is not an http(s) URL"},
        {"https://h\x7f", "is not an http(s) URL"},
        {"https://h/a\"b", "cannot appear in the path"},
        {"https://h!x", "Bad hostname"},
        {"https://h_~x", "cannot appear in a host name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kc_url u;
        kc_err e;
        kc_err_clear(&e);
        cr_assert_eq(kc_url_parse(cases[i].url, &u, &e), KC_EARG, "%s", cases[i].url);
        cr_assert(strstr(e.msg, cases[i].msg), "%s: %s", cases[i].url, e.msg);
    }
    char longhost[400];
    memset(longhost, 'a', sizeof(longhost));
    memcpy(longhost, "https://", 8);
    longhost[sizeof(longhost) - 1] = '\0';
    kc_url u;
    kc_err e;
    cr_assert_eq(kc_url_parse(longhost, &u, &e), KC_EARG);
    cr_assert(strstr(e.msg, "too long"), "%s", e.msg);
}
