/* kc_log: leveled, timestamped, one-line-per-event logging with key=value fields. */
#ifndef KC_LOG_H
#define KC_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef enum kc_log_level {
    KC_LOG_DEBUG = 0,
    KC_LOG_INFO = 1,
    KC_LOG_WARN = 2,
    KC_LOG_ERROR = 3,
    KC_LOG_OFF = 4
} kc_log_level;

/* How lines are written: logfmt (`ts LEVEL msg="..." key=value`, the default, or
 * KC_LOG_FORMAT=text) or one JSON object per line (`{"ts":...,"level":"info","msg":"...",
 * "key":"value"}`, KC_LOG_FORMAT=json). Every field value is a string in JSON. */
typedef enum kc_log_format { KC_LOG_TEXT = 0, KC_LOG_JSON = 1 } kc_log_format;
/* The timestamp: RFC 3339 UTC with milliseconds (default) or nanoseconds, ISO 8601 (the same as
 * RFC 3339 here), or seconds / milliseconds / nanoseconds since the epoch (numbers in JSON):
 * the time encodings NVIDIA's operator.logging.timeEncoding names. */
typedef enum kc_log_time {
    KC_LOG_TIME_RFC3339 = 0,
    KC_LOG_TIME_RFC3339NANO,
    KC_LOG_TIME_ISO8601,
    KC_LOG_TIME_EPOCH,
    KC_LOG_TIME_MILLIS,
    KC_LOG_TIME_NANO
} kc_log_time;

/* Sets the minimum level written (default INFO, or KC_LOG_LEVEL=debug|info|warn|error|off). */
void kc_log_set_level(kc_log_level level);
kc_log_level kc_log_get_level(void);
/* Parses "debug", "info", "warn", "error", "off"; returns -1 on anything else. */
int kc_log_parse_level(const char *s);
void kc_log_set_format(kc_log_format format);
/* Parses "text" (also "logfmt", "console") or "json"; -1 on anything else. */
int kc_log_parse_format(const char *s);
/* Default RFC 3339, or KC_LOG_TIME=<one of the names below>. */
void kc_log_set_time_encoding(kc_log_time enc);
/* Parses "rfc3339", "rfc3339nano", "iso8601", "epoch", "millis", "nano"; -1 otherwise. */
int kc_log_parse_time_encoding(const char *s);
/* Redirects output (default stderr); the stream stays owned by the caller. */
void kc_log_set_stream(FILE *f);

/* Writes one line: `2026-11-21T19:30:00.123Z INFO  msg="watch resumed" resource=nodes rv=42`.
 * `fields` is a printf format in logfmt's shape (may be NULL): `key=%s key="%s ..."`. It is read
 * as key=value pairs (a value in quotes may hold spaces), the conversions are expanded into the
 * values, and each value is written escaped: quoted in logfmt when it holds a space, '=', a quote,
 * a backslash or a byte that is not printable ASCII; `\"`, `\\`, `\n`, `\r`, `\t`, other
 * control bytes as `\u00XX` and bytes that are not UTF-8 as `\ufffd` in both formats. Lines
 * are at most 8 KiB (values cut, then fields dropped with truncated=true). Thread-safe: each line
 * is written with one call. */
void kc_log(kc_log_level level, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));
/* The line kc_log would write (with its newline) into buf; returns its length. Tests and
 * fuzzing. */
size_t kc_log_format_line(char *buf, size_t size, kc_log_level level, const char *msg,
                          const char *fields, va_list ap);
size_t kc_log_format_linef(char *buf, size_t size, kc_log_level level, const char *msg,
                           const char *fields, ...) __attribute__((format(printf, 5, 6)));

#define kc_debug(msg, ...) kc_log(KC_LOG_DEBUG, msg, __VA_ARGS__)
#define kc_info(msg, ...)  kc_log(KC_LOG_INFO, msg, __VA_ARGS__)
#define kc_warn(msg, ...)  kc_log(KC_LOG_WARN, msg, __VA_ARGS__)
#define kc_error(msg, ...) kc_log(KC_LOG_ERROR, msg, __VA_ARGS__)

#endif
