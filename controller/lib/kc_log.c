/* kc_log: one line per event, with a timestamp, a level and key=value fields, as logfmt or JSON.
 *
 * Callers give the fields as a printf format in logfmt's shape (`node=%s err="%s"`). The format is
 * read as key=value pairs, the conversions expanded into the values, and each value then written
 * escaped for the output format: a quote, a backslash, a newline or a byte that is not UTF-8 in a
 * value cannot break the line, whatever the value holds. */
#include "kc_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* One line at most (longer values are cut, the line stays well-formed). */
#define LINE_MAX_BYTES 8192
/* A value at most, before escaping. */
#define VALUE_MAX  1024
#define FIELDS_MAX 24

static kc_log_level min_level = KC_LOG_INFO;
static kc_log_format out_format = KC_LOG_TEXT;
static kc_log_time time_encoding = KC_LOG_TIME_RFC3339;
static int from_env_done;
static FILE *out_stream;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};
static const char *const level_json[] = {"debug", "info", "warn", "error", "off"};

int kc_log_parse_level(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i <= KC_LOG_OFF; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return KC_LOG_WARN;
    return -1;
}

int kc_log_parse_format(const char *s)
{
    if (!s)
        return -1;
    if (!strcasecmp(s, "text") || !strcasecmp(s, "logfmt") || !strcasecmp(s, "console"))
        return KC_LOG_TEXT;
    if (!strcasecmp(s, "json"))
        return KC_LOG_JSON;
    return -1;
}

int kc_log_parse_time_encoding(const char *s)
{
    static const char *const names[] = {"rfc3339", "rfc3339nano", "iso8601",
                                        "epoch",   "millis",      "nano"};
    if (!s)
        return -1;
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (!strcasecmp(s, names[i]))
            return i;
    return -1;
}

static void init_from_env(void)
{
    if (from_env_done)
        return;
    from_env_done = 1;
    int l = kc_log_parse_level(getenv("KC_LOG_LEVEL"));
    if (l >= 0)
        min_level = (kc_log_level)l;
    int f = kc_log_parse_format(getenv("KC_LOG_FORMAT"));
    if (f >= 0)
        out_format = (kc_log_format)f;
    int t = kc_log_parse_time_encoding(getenv("KC_LOG_TIME"));
    if (t >= 0)
        time_encoding = (kc_log_time)t;
}

void kc_log_set_level(kc_log_level level)
{
    init_from_env();
    min_level = level;
}

kc_log_level kc_log_get_level(void)
{
    init_from_env();
    return min_level;
}

void kc_log_set_format(kc_log_format format)
{
    init_from_env();
    out_format = format;
}

void kc_log_set_time_encoding(kc_log_time enc)
{
    init_from_env();
    time_encoding = enc;
}

void kc_log_set_stream(FILE *f)
{
    pthread_mutex_lock(&log_lock);
    out_stream = f;
    pthread_mutex_unlock(&log_lock);
}

/* ---- an output buffer that never overflows ---- */

typedef struct obuf {
    char *p;
    size_t len, cap; /* cap leaves room for "\n" and NUL */
    bool full;
} obuf;

static void put(obuf *o, const char *s, size_t n)
{
    if (o->full || o->len + n > o->cap) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void puts_(obuf *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0) {
        k = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        k = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        k = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    /* Overlong forms, surrogates and values past Unicode are not UTF-8. */
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return k;
}

/* Writes v escaped the way both a JSON string and a logfmt quoted value read it back: \" \\ \n
 * \r \t, other control bytes as \u00XX, a byte that is not UTF-8 as \ufffd. */
static void put_escaped(obuf *o, const char *v, size_t n)
{
    const unsigned char *s = (const unsigned char *)v;
    for (size_t i = 0; i < n;) {
        unsigned char ch = s[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            put(o, esc, 2);
            i++;
        } else if (ch == '\n') {
            put(o, "\\n", 2);
            i++;
        } else if (ch == '\r') {
            put(o, "\\r", 2);
            i++;
        } else if (ch == '\t') {
            put(o, "\\t", 2);
            i++;
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            put(o, esc, 6);
            i++;
        } else {
            size_t k = utf8_len(s + i, n - i);
            if (k == 0) {
                put(o, "\\ufffd", 6);
                i++;
            } else {
                put(o, v + i, k);
                i += k;
            }
        }
    }
}

/* Whether a logfmt value must be quoted: empty, or holding a space, '=', '"', '\\' or a byte
 * that is not plain printable ASCII. */
static bool needs_quotes(const char *v, size_t n)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch <= ' ' || ch == '=' || ch == '"' || ch == '\\' || ch >= 0x7f)
            return true;
    }
    return false;
}

/* ---- the fields: a printf format in logfmt's shape, read as key=value pairs ---- */

typedef struct field {
    char key[64];
    char val[VALUE_MAX];
    size_t klen, vlen;
} field;

/* Appends to a fixed buffer, cutting what does not fit. */
static void append(char *buf, size_t *len, size_t cap, const char *s, size_t n)
{
    if (*len + n > cap)
        n = cap - *len;
    memcpy(buf + *len, s, n);
    *len += n;
}

/* Expands one conversion spec at *pp (after '%') with its argument into buf; advances *pp. */
static void expand(const char **pp, va_list *ap, char *buf, size_t *len, size_t cap)
{
    const char *p = *pp;
    char spec[32] = "%";
    size_t sl = 1;
    bool star_w = false, star_p = false;
    int lng = 0;     /* 'l' count */
    bool sz = false; /* z */
    while (*p && strchr("-+ #0", *p) && sl < 20)
        spec[sl++] = *p++;
    if (*p == '*') {
        star_w = true;
        spec[sl++] = *p++;
    }
    while (*p >= '0' && *p <= '9' && sl < 20)
        spec[sl++] = *p++;
    if (*p == '.') {
        spec[sl++] = *p++;
        if (*p == '*') {
            star_p = true;
            spec[sl++] = *p++;
        }
        while (*p >= '0' && *p <= '9' && sl < 24)
            spec[sl++] = *p++;
    }
    while (*p == 'l' || *p == 'h' || *p == 'z' || *p == 'j' || *p == 't') {
        if (*p == 'l')
            lng++;
        if (*p == 'z')
            sz = true;
        if (sl < 28)
            spec[sl++] = *p;
        p++;
    }
    char conv = *p ? *p++ : '\0';
    spec[sl++] = conv;
    spec[sl] = '\0';
    *pp = p;
    int w = star_w ? va_arg(*ap, int) : 0, pr = star_p ? va_arg(*ap, int) : 0;
    char tmp[VALUE_MAX];
    int n = 0;
#define FMT(arg)                                                                                   \
    (star_w && star_p ? snprintf(tmp, sizeof(tmp), spec, w, pr, arg)                               \
     : star_w         ? snprintf(tmp, sizeof(tmp), spec, w, arg)                                   \
     : star_p         ? snprintf(tmp, sizeof(tmp), spec, pr, arg)                                  \
                      : snprintf(tmp, sizeof(tmp), spec, arg))
    switch (conv) {
    case 'd':
    case 'i':
        n = sz         ? FMT(va_arg(*ap, ssize_t))
            : lng >= 2 ? FMT(va_arg(*ap, long long))
            : lng == 1 ? FMT(va_arg(*ap, long))
                       : FMT(va_arg(*ap, int));
        break;
    case 'u':
    case 'x':
    case 'X':
    case 'o':
        n = sz         ? FMT(va_arg(*ap, size_t))
            : lng >= 2 ? FMT(va_arg(*ap, unsigned long long))
            : lng == 1 ? FMT(va_arg(*ap, unsigned long))
                       : FMT(va_arg(*ap, unsigned));
        break;
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
        n = FMT(va_arg(*ap, double));
        break;
    case 'c':
        n = FMT(va_arg(*ap, int));
        break;
    case 'p':
        n = FMT(va_arg(*ap, void *));
        break;
    case 's': {
        const char *s = va_arg(*ap, const char *);
        n = FMT(s ? s : "(null)");
        break;
    }
    case '%':
        tmp[0] = '%';
        n = 1;
        break;
    default: /* an unknown conversion: shown as written, no argument taken */
        n = snprintf(tmp, sizeof(tmp), "%s", spec);
        break;
    }
#undef FMT
    if (n > 0)
        append(buf, len, cap, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Reads the fields format into pairs; text that is not key=value becomes a value of key "_". */
static int parse_fields(const char *fmt, va_list *ap, field *fs, int max)
{
    int nf = 0;
    const char *p = fmt;
    while (*p && nf < max) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        field *f = &fs[nf];
        f->klen = f->vlen = 0;
        /* The key: up to '=' (or a space: then the text is a bare value). */
        const char *k = p;
        while (*p && *p != '=' && *p != ' ' && *p != '%' && *p != '"')
            p++;
        if (*p == '=' && p > k) {
            append(f->key, &f->klen, sizeof(f->key) - 1, k, (size_t)(p - k));
            p++;
        } else {
            p = k;
            append(f->key, &f->klen, sizeof(f->key) - 1, "_", 1);
        }
        f->key[f->klen] = '\0';
        bool quoted = *p == '"';
        if (quoted)
            p++;
        while (*p && (quoted ? *p != '"' : *p != ' ')) {
            if (*p == '%') {
                p++;
                expand(&p, ap, f->val, &f->vlen, sizeof(f->val) - 1);
            } else if (quoted && *p == '\\' && p[1]) {
                append(f->val, &f->vlen, sizeof(f->val) - 1, p + 1, 1);
                p += 2;
            } else {
                append(f->val, &f->vlen, sizeof(f->val) - 1, p, 1);
                p++;
            }
        }
        if (quoted && *p == '"')
            p++;
        f->val[f->vlen] = '\0';
        /* An empty fields text ("%s" of "") is no field at all. */
        if (f->klen != 1 || f->key[0] != '_' || f->vlen != 0)
            nf++;
    }
    return nf;
}

/* ---- the line ---- */

static void put_time(obuf *o, bool json)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char b[64];
    int n;
    if (time_encoding == KC_LOG_TIME_EPOCH)
        n = snprintf(b, sizeof(b), "%lld.%06ld", (long long)ts.tv_sec, ts.tv_nsec / 1000);
    else if (time_encoding == KC_LOG_TIME_MILLIS)
        n = snprintf(b, sizeof(b), "%lld", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    else if (time_encoding == KC_LOG_TIME_NANO)
        n = snprintf(b, sizeof(b), "%lld", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    else {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        n = (int)strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
        if (time_encoding == KC_LOG_TIME_RFC3339NANO)
            n += snprintf(b + n, sizeof(b) - (size_t)n, ".%09ldZ", ts.tv_nsec);
        else
            n += snprintf(b + n, sizeof(b) - (size_t)n, ".%03ldZ", ts.tv_nsec / 1000000);
    }
    bool numeric = time_encoding == KC_LOG_TIME_EPOCH || time_encoding == KC_LOG_TIME_MILLIS ||
                   time_encoding == KC_LOG_TIME_NANO;
    if (json && !numeric)
        put(o, "\"", 1);
    put(o, b, (size_t)n);
    if (json && !numeric)
        put(o, "\"", 1);
}

static void put_json_pair(obuf *o, const char *k, size_t kl, const char *v, size_t vl)
{
    put(o, ",\"", 2);
    put_escaped(o, k, kl);
    put(o, "\":\"", 3);
    put_escaped(o, v, vl);
    put(o, "\"", 1);
}

static void put_text_pair(obuf *o, const char *k, size_t kl, const char *v, size_t vl)
{
    put(o, " ", 1);
    put_escaped(o, k, kl);
    put(o, "=", 1);
    if (needs_quotes(v, vl)) {
        put(o, "\"", 1);
        put_escaped(o, v, vl);
        put(o, "\"", 1);
    } else {
        put(o, v, vl);
    }
}

size_t kc_log_format_line(char *buf, size_t size, kc_log_level level, const char *msg,
                          const char *fields, va_list ap)
{
    if (!buf || size < 4)
        return 0;
    field fs[FIELDS_MAX]; /* about 26 KiB of stack */
    int nf = 0;
    if (fields && fields[0]) {
        va_list cp;
        va_copy(cp, ap);
        nf = parse_fields(fields, &cp, fs, FIELDS_MAX);
        va_end(cp);
    }
    if (!msg)
        msg = "";
    bool json = out_format == KC_LOG_JSON;
    /* Cut values, never the structure: fields are dropped from the end when the line is full.
     * Room is kept for the closing brace, the newline and the NUL. */
    obuf o = {.p = buf, .cap = size - 3};
    if (json) {
        put(&o, "{\"ts\":", 6);
        put_time(&o, true);
        put(&o, ",\"level\":\"", 10);
        puts_(&o, level_json[level]);
        put(&o, "\"", 1);
        put_json_pair(&o, "msg", 3, msg, strlen(msg));
    } else {
        put_time(&o, false);
        char lv[8];
        snprintf(lv, sizeof(lv), " %-5s", level_names[level]);
        puts_(&o, lv);
        put_text_pair(&o, "msg", 3, msg, strlen(msg));
    }
    if (o.full) /* the message alone is too long */
        return kc_log_format_line(buf, size, level, "(message too long)", NULL, ap);
    for (int i = 0; i < nf; i++) {
        size_t before = o.len;
        if (json)
            put_json_pair(&o, fs[i].key, fs[i].klen, fs[i].val, fs[i].vlen);
        else
            put_text_pair(&o, fs[i].key, fs[i].klen, fs[i].val, fs[i].vlen);
        if (o.full) {
            o.len = before;
            o.full = false;
            if (json)
                put_json_pair(&o, "truncated", 9, "true", 4);
            else
                put(&o, " truncated=true", 15);
            break;
        }
    }
    if (json)
        buf[o.len++] = '}';
    buf[o.len++] = '\n';
    buf[o.len] = '\0';
    return o.len;
}

size_t kc_log_format_linef(char *buf, size_t size, kc_log_level level, const char *msg,
                           const char *fields, ...)
{
    va_list ap;
    va_start(ap, fields);
    size_t n = kc_log_format_line(buf, size, level, msg, fields, ap);
    va_end(ap);
    return n;
}

void kc_log(kc_log_level level, const char *msg, const char *fields, ...)
{
    init_from_env();
    if (level < min_level || level >= KC_LOG_OFF)
        return;
    char line[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fields);
    size_t n = kc_log_format_line(line, sizeof(line), level, msg, fields, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    FILE *f = out_stream ? out_stream : stderr;
    fwrite(line, 1, n, f);
    fflush(f);
    pthread_mutex_unlock(&log_lock);
}
