/* Tests for kc_log: one line per event, levels, quoting, timestamps. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"

static char *capture(void (*fn)(void))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    kc_log_set_stream(f);
    fn();
    kc_log_set_stream(NULL);
    fclose(f);
    return buf;
}

static void emit_levels(void)
{
    kc_log_set_level(KC_LOG_INFO);
    kc_debug("hidden", "k=%d", 1);
    kc_info("watch resumed", "resource=%s rv=%d", "nodes", 42);
    kc_warn("multi\nline", NULL);
}

Test(log, one_line_per_event_with_fields)
{
    char *out = capture(emit_levels);
    regex_t re;
    cr_assert_eq(regcomp(&re,
                         "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z INFO  "
                         "msg=\"watch resumed\" resource=nodes rv=42\n"
                         "[0-9T:.Z-]+ WARN  msg=\"multi\\\\nline\"\n$",
                         REG_EXTENDED),
                 0);
    int rc = regexec(&re, out, 0, NULL, 0);
    regfree(&re);
    cr_assert_eq(rc, 0, "unexpected log output:\n%s", out);
    cr_assert_null(strstr(out, "hidden"));
    free(out);
}

Test(log, quote_and_parse_level)
{
    char b[64];
    cr_assert_str_eq(kc_log_quote(b, sizeof(b), "plain"), "plain");
    cr_assert_str_eq(kc_log_quote(b, sizeof(b), "two words"), "\"two words\"");
    cr_assert_str_eq(kc_log_quote(b, sizeof(b), "a\"b"), "\"a\\\"b\"");
    cr_assert_str_eq(kc_log_quote(b, sizeof(b), ""), "\"\"");
    char tiny[6];
    kc_log_quote(tiny, sizeof(tiny), "a long value here");
    cr_assert_lt(strlen(tiny), sizeof(tiny));
    cr_assert_eq(kc_log_parse_level("debug"), KC_LOG_DEBUG);
    cr_assert_eq(kc_log_parse_level("WARNING"), KC_LOG_WARN);
    cr_assert_eq(kc_log_parse_level("loud"), -1);
    cr_assert_eq(kc_log_parse_level(NULL), -1);
}

static void emit_off(void)
{
    kc_log_set_level(KC_LOG_OFF);
    kc_error("nothing", NULL);
    kc_log_set_level(KC_LOG_INFO);
}

Test(log, off_writes_nothing)
{
    char *out = capture(emit_off);
    cr_assert_str_eq(out, "");
    free(out);
}
