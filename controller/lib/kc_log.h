/* kc_log: leveled, timestamped, one-line-per-event logging with key=value fields. */
#ifndef KC_LOG_H
#define KC_LOG_H

#include <stdio.h>

typedef enum kc_log_level {
    KC_LOG_DEBUG = 0,
    KC_LOG_INFO = 1,
    KC_LOG_WARN = 2,
    KC_LOG_ERROR = 3,
    KC_LOG_OFF = 4
} kc_log_level;

/* Sets the minimum level written (default INFO, or KC_LOG_LEVEL=debug|info|warn|error|off). */
void kc_log_set_level(kc_log_level level);
kc_log_level kc_log_get_level(void);
/* Parses "debug", "info", "warn", "error", "off"; returns -1 on anything else. */
int kc_log_parse_level(const char *s);
/* Redirects output (default stderr); the stream stays owned by the caller. */
void kc_log_set_stream(FILE *f);

/* Writes one line: `2026-11-21T19:30:00.123Z INFO msg="watch resumed" resource=nodes rv=42`.
 * `fields` is a printf format for the key=value part (may be NULL); values holding spaces or quotes
 * should be passed through kc_log_quote. Thread-safe: each line is written with one call. */
void kc_log(kc_log_level level, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/* Quotes a value for a key=value field when it holds spaces, quotes or '='; returns buf. */
const char *kc_log_quote(char *buf, size_t size, const char *value);

#define kc_debug(msg, ...) kc_log(KC_LOG_DEBUG, msg, __VA_ARGS__)
#define kc_info(msg, ...)  kc_log(KC_LOG_INFO, msg, __VA_ARGS__)
#define kc_warn(msg, ...)  kc_log(KC_LOG_WARN, msg, __VA_ARGS__)
#define kc_error(msg, ...) kc_log(KC_LOG_ERROR, msg, __VA_ARGS__)

#endif
