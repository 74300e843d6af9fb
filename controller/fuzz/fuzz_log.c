/* Fuzz target: kc_log's lines. The input gives the message and two field values (split at NUL
 * bytes); whatever they hold, a JSON line must parse with jansson (every value a string, the
 * message back as written where it was UTF-8) and a logfmt line must be one line with balanced
 * quotes and no raw control byte. */
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"

static void check_logfmt(const char *line, size_t n)
{
    if (n == 0 || line[n - 1] != '\n' || memchr(line, '\n', n - 1))
        abort(); /* one event, one line */
    bool in_quotes = false;
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < 0x20)
            abort(); /* a raw control byte */
        if (in_quotes && ch == '\\') {
            i++;
            continue;
        }
        if (ch == '"')
            in_quotes = !in_quotes;
    }
    if (in_quotes)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 3);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = s[size + 1] = s[size + 2] = '\0';
    const char *msg = s;
    const char *a = s + strlen(s) + 1;
    if (a > s + size)
        a = s + size + 1;
    const char *b = a + strlen(a) + 1;
    if (b > s + size + 1)
        b = s + size + 2;
    char line[8192];
    for (int f = 0; f < 2; f++) {
        kc_log_set_format(f ? KC_LOG_JSON : KC_LOG_TEXT);
        size_t n = kc_log_format_linef(line, sizeof(line), KC_LOG_ERROR, msg,
                                       "node=%s err=\"cannot: %s\" n=%d %s", a, b, (int)size, a);
        if (n >= sizeof(line) || strlen(line) != n)
            abort();
        if (f) {
            json_t *o = json_loads(line, 0, NULL);
            if (!o || !json_is_string(json_object_get(o, "msg")) ||
                !json_is_string(json_object_get(o, "level")))
                abort();
            json_decref(o);
        } else {
            check_logfmt(line, n);
        }
    }
    free(s);
    return 0;
}
