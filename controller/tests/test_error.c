/* Tests for kc_error: code names, HTTP and Status-reason mapping, message handling. */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_error.h"

Test(error, maps_http_status_and_reason)
{
    cr_assert_eq(kc_code_from_http(404), KC_ENOTFOUND);
    cr_assert_eq(kc_code_from_http(429), KC_ETOOMANYREQUESTS);
    cr_assert_eq(kc_code_from_http(502), KC_ESERVER);
    cr_assert_eq(kc_code_from_reason("AlreadyExists", 409), KC_EALREADYEXISTS);
    cr_assert_eq(kc_code_from_reason("Conflict", 409), KC_ECONFLICT);
    cr_assert_eq(kc_code_from_reason("", 409), KC_ECONFLICT);
    cr_assert_eq(kc_code_from_reason("Expired", 410), KC_EEXPIRED);
    cr_assert_str_eq(kc_code_name(KC_EINVALID), "Invalid");
    cr_assert_str_eq(kc_code_name((kc_code)999), "Unknown");
}

Test(error, set_and_prefix_keep_message)
{
    kc_err e;
    kc_err_clear(&e);
    cr_assert_eq(kc_err_set(&e, KC_ECONFIG, "field %s missing", "server"), KC_ECONFIG);
    kc_err_prefix(&e, "kubeconfig %s", "/tmp/x");
    cr_assert_str_eq(e.msg, "kubeconfig /tmp/x: field server missing");
    cr_assert_str_eq(e.reason, "ConfigError");
    cr_assert_eq(kc_err_set(NULL, KC_EIO, "ignored"), KC_EIO);
}
