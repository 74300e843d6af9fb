/* Tests for kc_log: one line per event, levels, quoting, timestamps. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <stdarg.h>

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

Test(log, parse_level_format_and_time)
{
    cr_assert_eq(kc_log_parse_level("debug"), KC_LOG_DEBUG);
    cr_assert_eq(kc_log_parse_level("WARNING"), KC_LOG_WARN);
    cr_assert_eq(kc_log_parse_level("loud"), -1);
    cr_assert_eq(kc_log_parse_level(NULL), -1);
    cr_assert_eq(kc_log_parse_format("json"), KC_LOG_JSON);
    cr_assert_eq(kc_log_parse_format("text"), KC_LOG_TEXT);
    cr_assert_eq(kc_log_parse_format("console"), KC_LOG_TEXT);
    cr_assert_eq(kc_log_parse_format("xml"), -1);
    cr_assert_eq(kc_log_parse_time_encoding("epoch"), KC_LOG_TIME_EPOCH);
    cr_assert_eq(kc_log_parse_time_encoding("rfc3339nano"), KC_LOG_TIME_RFC3339NANO);
    cr_assert_eq(kc_log_parse_time_encoding("sundial"), -1);
}

/* ---- what a logfmt reader sees: a strict parser of our lines ---- */

typedef struct kv {
    char key[64];
    char *val; /* malloc'd */
} kv;

/* Decodes the escapes both formats use (\" \\ \n \r \t, and \u with four hex digits as
 * UTF-8). */
static size_t unescape_into(const char *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\') {
            out[o++] = p[i];
            continue;
        }
        char e = p[++i];
        if (e == 'n')
            out[o++] = '\n';
        else if (e == 'r')
            out[o++] = '\r';
        else if (e == 't')
            out[o++] = '\t';
        else if (e == 'u') {
            unsigned cp =
                (unsigned)strtoul((char[]){p[i + 1], p[i + 2], p[i + 3], p[i + 4], 0}, NULL, 16);
            i += 4;
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xC0 | cp >> 6);
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xE0 | cp >> 12);
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            }
        } else {
            out[o++] = e;
        }
    }
    out[o] = '\0';
    return o;
}

/* Parses `TS LEVEL key=value key="quoted"...\n`; fails the test on anything logfmt would not
 * read back (a stray quote, an unescaped control byte, a missing newline). */
static int logfmt_parse(const char *line, kv *out, int max)
{
    const char *p = line;
    const char *nl = strchr(line, '\n');
    cr_assert_not_null(nl, "no newline: %s", line);
    cr_assert_eq(nl[1], '\0', "more than one line: %s", line);
    p = strchr(p, ' '); /* after the timestamp */
    cr_assert_not_null(p);
    while (*p == ' ')
        p++;
    p = strchr(p, ' '); /* after the level */
    cr_assert_not_null(p);
    int n = 0;
    while (*p == ' ') {
        while (*p == ' ')
            p++;
        if (*p == '\n')
            break;
        cr_assert_lt(n, max);
        const char *k = p;
        while (*p && *p != '=' && *p != ' ' && *p != '\n') {
            cr_assert((unsigned char)*p > ' ' && *p != '"', "bad key byte in: %s", line);
            p++;
        }
        cr_assert_eq(*p, '=', "no '=' after key: %s", line);
        snprintf(out[n].key, sizeof(out[n].key), "%.*s", (int)(p - k), k);
        p++;
        const char *v = p;
        size_t vl;
        if (*p == '"') {
            v = ++p;
            while (*p != '"') {
                cr_assert((unsigned char)*p >= ' ', "raw control byte in a value: %s", line);
                if (*p == '\\')
                    p++;
                p++;
            }
            vl = (size_t)(p - v);
            p++;
        } else {
            while (*p != ' ' && *p != '\n') {
                cr_assert((unsigned char)*p > ' ' && *p != '"' && *p != '=' && *p != '\\',
                          "bare value needs quotes: %s", line);
                p++;
            }
            vl = (size_t)(p - v);
        }
        out[n].val = malloc(vl * 3 + 1);
        unescape_into(v, vl, out[n].val);
        n++;
        cr_assert(*p == ' ' || *p == '\n', "junk after a value: %s", line);
    }
    return n;
}

/* What a value becomes once read back: bytes that are not UTF-8 turn into U+FFFD. */
static void expected_value(const char *v, char *out)
{
    const unsigned char *s = (const unsigned char *)v;
    size_t o = 0;
    for (size_t i = 0; s[i];) {
        /* Decide validity the way the writer does: copy valid sequences. */
        size_t k = 0;
        if (s[i] < 0x80)
            k = 1;
        else if ((s[i] & 0xE0) == 0xC0 && s[i] >= 0xC2 && (s[i + 1] & 0xC0) == 0x80)
            k = 2;
        else if ((s[i] & 0xF0) == 0xE0 && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            unsigned cp = (s[i] & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu);
            k = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) ? 3 : 0;
        } else if ((s[i] & 0xF8) == 0xF0 && (s[i + 1] & 0xC0) == 0x80 &&
                   (s[i + 2] & 0xC0) == 0x80 && (s[i + 3] & 0xC0) == 0x80) {
            unsigned cp = (s[i] & 0x07u) << 18 | (s[i + 1] & 0x3Fu) << 12 |
                          (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu);
            k = cp >= 0x10000 && cp <= 0x10FFFF ? 4 : 0;
        }
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
}

Test(log, values_with_quotes_newlines_and_bad_bytes_read_back_in_logfmt_and_json)
{
    static const char *const values[] = {
        "plain",
        "two words",
        "say \"hi\"",
        "back\\slash",
        "line1\nline2\r\n",
        "tab\there",
        "a=b",
        "",
        "bell\x07 and del\x7f",
        "caf\xc3\xa9 \xe2\x82\xac",   /* valid UTF-8 */
        "bad \xff\xfe bytes \xc3",    /* not UTF-8 */
        "overlong \xc0\xaf slash",    /* not UTF-8 */
        "surrogate \xed\xa0\x80 end", /* not UTF-8 */
        "\" err=injected key=\"",
    };
    char line[8192], want[1024];
    for (int fmt = 0; fmt < 2; fmt++) {
        kc_log_set_format(fmt ? KC_LOG_JSON : KC_LOG_TEXT);
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
            const char *v = values[i];
            kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, v,
                                "node=%s err=\"cannot: %s\" n=%d", v, v, 7);
            expected_value(v, want);
            char quoted[1100];
            snprintf(quoted, sizeof(quoted), "cannot: %s", want);
            if (fmt == 0) {
                kv f[8] = {0};
                int n = logfmt_parse(line, f, 8);
                cr_assert_eq(n, 4, "#%zu: %s", i, line);
                cr_assert_str_eq(f[0].key, "msg");
                cr_assert_str_eq(f[0].val, want, "#%zu msg: %s", i, line);
                cr_assert_str_eq(f[1].key, "node");
                cr_assert_str_eq(f[1].val, want, "#%zu node: %s", i, line);
                cr_assert_str_eq(f[2].key, "err");
                cr_assert_str_eq(f[2].val, quoted, "#%zu err: %s", i, line);
                cr_assert_str_eq(f[3].key, "n");
                cr_assert_str_eq(f[3].val, "7");
                for (int k = 0; k < n; k++)
                    free(f[k].val);
            } else {
                json_error_t je;
                json_t *o = json_loads(line, 0, &je);
                cr_assert_not_null(o, "#%zu not JSON (%s): %s", i, je.text, line);
                cr_assert_str_eq(json_string_value(json_object_get(o, "level")), "warn");
                cr_assert_str_eq(json_string_value(json_object_get(o, "msg")), want, "%s", line);
                cr_assert_str_eq(json_string_value(json_object_get(o, "node")), want, "%s", line);
                cr_assert_str_eq(json_string_value(json_object_get(o, "err")), quoted, "%s", line);
                cr_assert_str_eq(json_string_value(json_object_get(o, "n")), "7");
                cr_assert(json_is_string(json_object_get(o, "ts")));
                json_decref(o);
            }
        }
    }
    kc_log_set_format(KC_LOG_TEXT);
}

/* Random values (every byte value, quotes and backslashes favoured): every line is one line
 * that both readers accept, and the values come back. */
Test(log, random_values_always_read_back)
{
    unsigned seed = 12345;
    char v[300], want[1024], line[8192];
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(rand_r(&seed) % 200);
        for (size_t i = 0; i < n; i++) {
            int r = rand_r(&seed) % 10;
            v[i] = r == 0 ? '"' : r == 1 ? '\\' : r == 2 ? '\n' : (char)(1 + rand_r(&seed) % 255);
        }
        v[n] = '\0';
        expected_value(v, want);
        kc_log_set_format(round % 2 ? KC_LOG_JSON : KC_LOG_TEXT);
        kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", "k=%s q=\"%s\"", v, v);
        if (round % 2) {
            json_t *o = json_loads(line, 0, NULL);
            cr_assert_not_null(o, "not JSON: %s", line);
            cr_assert_str_eq(json_string_value(json_object_get(o, "k")), want);
            cr_assert_str_eq(json_string_value(json_object_get(o, "q")), want);
            json_decref(o);
        } else {
            kv f[4] = {0};
            cr_assert_eq(logfmt_parse(line, f, 4), 3, "%s", line);
            cr_assert_str_eq(f[1].val, want);
            cr_assert_str_eq(f[2].val, want);
            for (int k = 0; k < 3; k++)
                free(f[k].val);
        }
    }
    kc_log_set_format(KC_LOG_TEXT);
}

Test(log, long_lines_are_cut_and_stay_well_formed)
{
    static char big[5000];
    memset(big, '"', sizeof(big) - 1); /* each escaped to two bytes */
    char line[8192];
    kc_log_set_format(KC_LOG_JSON);
    size_t n = kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", "a=%s b=%s c=%s d=%s e=%s",
                                   big, big, big, big, big);
    cr_assert_lt(n, sizeof(line));
    json_t *o = json_loads(line, 0, NULL);
    cr_assert_not_null(o, "%s", line);
    cr_assert_str_eq(json_string_value(json_object_get(o, "truncated")), "true");
    json_decref(o);
    kc_log_set_format(KC_LOG_TEXT);
    n = kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", "a=%s b=%s c=%s d=%s e=%s", big,
                            big, big, big, big);
    kv f[8] = {0};
    int nf = logfmt_parse(line, f, 8);
    cr_assert_str_eq(f[nf - 1].key, "truncated");
    for (int k = 0; k < nf; k++)
        free(f[k].val);
}

Test(log, time_encodings)
{
    char line[512];
    kc_log_set_format(KC_LOG_JSON);
    kc_log_set_time_encoding(KC_LOG_TIME_EPOCH);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", NULL);
    json_t *o = json_loads(line, 0, NULL);
    cr_assert(json_is_real(json_object_get(o, "ts")), "%s", line);
    json_decref(o);
    kc_log_set_time_encoding(KC_LOG_TIME_MILLIS);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", NULL);
    o = json_loads(line, 0, NULL);
    cr_assert(json_integer_value(json_object_get(o, "ts")) > 1700000000000LL, "%s", line);
    json_decref(o);
    kc_log_set_time_encoding(KC_LOG_TIME_RFC3339NANO);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", NULL);
    o = json_loads(line, 0, NULL);
    cr_assert_eq(strlen(json_string_value(json_object_get(o, "ts"))), 30, "%s", line);
    json_decref(o);
    kc_log_set_time_encoding(KC_LOG_TIME_RFC3339);
    kc_log_set_format(KC_LOG_TEXT);
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

Test(log, an_empty_fields_text_adds_no_field)
{
    char line[512];
    kc_log_set_format(KC_LOG_JSON);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "leadership lost; stopping", "%s", "");
    json_t *o = json_loads(line, 0, NULL);
    cr_assert_not_null(o, "%s", line);
    cr_assert_eq(json_object_size(o), 3, "ts, level and msg only: %s", line);
    json_decref(o);
    kc_log_set_format(KC_LOG_TEXT);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", "%s", "");
    cr_assert_null(strstr(line, "_="), "%s", line);
    kc_log_format_linef(line, sizeof(line), KC_LOG_WARN, "m", "%s", "bare");
    cr_assert_not_null(strstr(line, "_=bare"), "a bare value keeps its key: %s", line);
}
