/* kc_watch: splits a watch body into lines and decodes each into a typed event. */
#include "kc_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_client.h"

static const char *const type_names[] = {
    [KC_WATCH_ADDED] = "ADDED",     [KC_WATCH_MODIFIED] = "MODIFIED",
    [KC_WATCH_DELETED] = "DELETED", [KC_WATCH_BOOKMARK] = "BOOKMARK",
    [KC_WATCH_ERROR] = "ERROR",
};
#define TYPE_COUNT (sizeof(type_names) / sizeof(type_names[0]))

const char *kc_watch_type_name(kc_watch_type type)
{
    if ((unsigned)type >= TYPE_COUNT)
        return "UNKNOWN";
    return type_names[type];
}

void kc_watch_decoder_init(kc_watch_decoder *d, size_t max_line, kc_watch_event_cb cb, void *ud)
{
    memset(d, 0, sizeof(*d));
    d->cb = cb;
    d->ud = ud;
    d->max_line = max_line ? max_line : KC_WATCH_MAX_LINE_DEFAULT;
}

void kc_watch_decoder_free(kc_watch_decoder *d)
{
    if (!d)
        return;
    free(d->buf);
    d->buf = NULL;
    d->len = d->cap = 0;
}

/* Quotes the start of a line for an error message, escaping anything unprintable, so a binary or
 * huge line cannot garble the log. */
static const char *excerpt(char *out, size_t size, const char *p, size_t n)
{
    const size_t max = 48;
    size_t o = 0;
    for (size_t i = 0; i < n && i < max && o + 5 < size; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
    }
    if (n > max && o + 4 < size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o < size ? o : size - 1] = '\0';
    return out;
}

static kc_code report(const kc_watch_decoder *d, kc_err *err)
{
    if (err)
        *err = d->fail_err;
    return d->failed;
}

static kc_code fail(kc_watch_decoder *d, kc_err *err, kc_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static kc_code fail(kc_watch_decoder *d, kc_err *err, kc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kc_err_clear(&d->fail_err);
    kc_err_vset(&d->fail_err, code, fmt, ap);
    va_end(ap);
    d->failed = code;
    return report(d, err);
}

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

static bool parse_type(const char *s, kc_watch_type *out)
{
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        if (strcmp(s, type_names[i]) == 0) {
            *out = (kc_watch_type)i;
            return true;
        }
    }
    return false;
}

/* Decodes one complete line (without its "\n") and delivers the event. */
static kc_code process_line(kc_watch_decoder *d, const char *p, size_t n, kc_err *err)
{
    char ex[256];
    d->line++;
    if (n && p[n - 1] == '\r')
        n--;
    if (blank(p, n))
        return KC_OK;

    json_error_t jerr;
    json_t *root = json_loadb(p, n, 0, &jerr);
    if (!root)
        return fail(d, err, KC_EPARSE,
                    "watch stream line %lu: invalid JSON at column %d (%s); line starts \"%s\"",
                    d->line, jerr.column, jerr.text, excerpt(ex, sizeof(ex), p, n));

    kc_code rc = KC_OK;
    const char *tname = json_string_value(json_object_get(root, "type"));
    json_t *obj = json_object_get(root, "object");
    kc_watch_type type;
    if (!json_is_object(root)) {
        rc = fail(d, err, KC_EPARSE,
                  "watch stream line %lu: expected a JSON object {\"type\",\"object\"}, got "
                  "\"%s\"",
                  d->line, excerpt(ex, sizeof(ex), p, n));
    } else if (!tname) {
        rc = fail(d, err, KC_EPARSE,
                  "watch stream line %lu: event has no string \"type\"; line starts \"%s\"",
                  d->line, excerpt(ex, sizeof(ex), p, n));
    } else if (!parse_type(tname, &type)) {
        rc = fail(d, err, KC_EPARSE,
                  "watch stream line %lu: unknown event type \"%s\" (expected ADDED, MODIFIED, "
                  "DELETED, BOOKMARK or ERROR)",
                  d->line, excerpt(ex, sizeof(ex), tname, strlen(tname)));
    } else if (!json_is_object(obj)) {
        rc = fail(d, err, KC_EPARSE,
                  "watch stream line %lu: %s event has %s \"object\" (expected a JSON object)",
                  d->line, tname, obj ? "a non-object" : "no");
    } else if (d->cb) {
        kc_err cerr;
        kc_err_clear(&cerr);
        kc_code crc = d->cb(type, obj, d->ud, &cerr);
        d->events++;
        if (crc != KC_OK) {
            if (cerr.code != crc || !cerr.msg[0])
                kc_err_set(&cerr, crc, "watch event handler stopped the stream at line %lu",
                           d->line);
            d->fail_err = cerr;
            d->failed = crc;
            rc = report(d, err);
        }
    } else {
        d->events++;
    }
    json_decref(root);
    return rc;
}

static kc_code append(kc_watch_decoder *d, const char *p, size_t n, kc_err *err)
{
    if (d->len + n > d->cap) {
        size_t ncap = d->cap ? d->cap : 4096;
        while (ncap < d->len + n)
            ncap *= 2;
        if (ncap > d->max_line)
            ncap = d->max_line;
        char *nb = realloc(d->buf, ncap);
        if (!nb)
            return fail(d, err, KC_ENOMEM, "watch stream: cannot buffer a %zu-byte line",
                        d->len + n);
        d->buf = nb;
        d->cap = ncap;
    }
    memcpy(d->buf + d->len, p, n);
    d->len += n;
    return KC_OK;
}

/* p/n: the start of the offending line (the buffered part when there is one). */
static kc_code too_long(kc_watch_decoder *d, const char *p, size_t n, kc_err *err)
{
    char ex[256];
    return fail(d, err, KC_EPARSE,
                "watch stream line %lu: longer than the %zu-byte limit without a newline; line "
                "starts \"%s\"",
                d->line + 1, d->max_line, excerpt(ex, sizeof(ex), p, n));
}

kc_code kc_watch_decoder_feed(kc_watch_decoder *d, const char *data, size_t len, kc_err *err)
{
    if (!d || (!data && len)) {
        kc_err_clear(err);
        return kc_err_set(err, KC_EARG, "kc_watch_decoder_feed: NULL decoder or data");
    }
    if (d->failed)
        return report(d, err);
    size_t off = 0;
    while (off < len) {
        const char *start = data + off;
        const char *nl = memchr(start, '\n', len - off);
        size_t n = nl ? (size_t)(nl - start) : len - off;
        if (d->len + n > d->max_line)
            return d->len ? too_long(d, d->buf, d->len, err) : too_long(d, start, n, err);
        if (!nl) {
            if (append(d, start, n, err) != KC_OK)
                return d->failed;
            break;
        }
        kc_code rc;
        if (d->len == 0) {
            /* Common case: the whole line is in this chunk, decode it in place. */
            rc = process_line(d, start, n, err);
        } else {
            if (append(d, start, n, err) != KC_OK)
                return d->failed;
            rc = process_line(d, d->buf, d->len, err);
            d->len = 0;
        }
        if (rc != KC_OK)
            return rc;
        off += n + 1;
    }
    return KC_OK;
}

kc_code kc_watch_decoder_finish(kc_watch_decoder *d, kc_err *err)
{
    if (!d) {
        kc_err_clear(err);
        return kc_err_set(err, KC_EARG, "kc_watch_decoder_finish: NULL decoder");
    }
    if (d->failed)
        return report(d, err);
    if (d->len && !blank(d->buf, d->len)) {
        char ex[256];
        return fail(d, err, KC_EPARSE,
                    "truncated watch stream: %zu bytes of an incomplete event after line %lu "
                    "(\"%s\")",
                    d->len, d->line, excerpt(ex, sizeof(ex), d->buf, d->len));
    }
    d->len = 0;
    return KC_OK;
}

kc_code kc_watch_status_error(const json_t *status, kc_err *err)
{
    if (!json_is_object(status))
        return kc_err_set(err, KC_EPARSE, "watch ERROR event: object is not a Status");
    /* Start from a clean record: callers often pass an uninitialised one. */
    kc_err_clear(err);
    json_int_t code = json_integer_value(json_object_get(status, "code"));
    if (code < 0 || code > 999)
        code = 0;
    kc_code rc = kc_status_from_json((int)code, status, err);
    if (rc == KC_OK) {
        /* An ERROR event is a failure whatever its Status says. */
        const char *msg = json_string_value(json_object_get(status, "message"));
        rc = kc_err_set(err, KC_EHTTP, "watch ERROR event with code %d: %s", (int)code,
                        msg ? msg : "(no message)");
    }
    return rc;
}
