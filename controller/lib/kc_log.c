/* kc_log: one line per event, with an RFC 3339 UTC timestamp, a level and key=value fields. */
#include "kc_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static kc_log_level min_level = KC_LOG_INFO;
static int level_from_env_done;
static FILE *out_stream;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};

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

static void init_from_env(void)
{
    if (level_from_env_done)
        return;
    level_from_env_done = 1;
    int l = kc_log_parse_level(getenv("KC_LOG_LEVEL"));
    if (l >= 0)
        min_level = (kc_log_level)l;
}

void kc_log_set_level(kc_log_level level)
{
    level_from_env_done = 1;
    min_level = level;
}

kc_log_level kc_log_get_level(void)
{
    init_from_env();
    return min_level;
}

void kc_log_set_stream(FILE *f)
{
    pthread_mutex_lock(&log_lock);
    out_stream = f;
    pthread_mutex_unlock(&log_lock);
}

const char *kc_log_quote(char *buf, size_t size, const char *value)
{
    if (!buf || size == 0)
        return "";
    if (!value)
        value = "";
    if (value[0] && !strpbrk(value, " \t\"=\n")) {
        snprintf(buf, size, "%s", value);
        return buf;
    }
    size_t o = 0;
    buf[o++] = '"';
    for (const char *p = value; *p && o + 3 < size; p++) {
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = *p;
        } else if (*p == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else {
            buf[o++] = *p;
        }
    }
    if (o < size - 1)
        buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

void kc_log(kc_log_level level, const char *msg, const char *fields, ...)
{
    init_from_env();
    if (level < min_level || level >= KC_LOG_OFF)
        return;
    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char qmsg[1024];
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s msg=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level],
                     kc_log_quote(qmsg, sizeof(qmsg), msg ? msg : ""));
    if (n < 0)
        return;
    size_t used = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    if (fields && fields[0] && used + 2 < sizeof(line)) {
        line[used++] = ' ';
        va_list ap;
        va_start(ap, fields);
        int m = vsnprintf(line + used, sizeof(line) - used, fields, ap);
        va_end(ap);
        if (m > 0)
            used += (size_t)m < sizeof(line) - used ? (size_t)m : sizeof(line) - used - 1;
    }
    /* One event, one line: fold any newline a field smuggled in. */
    for (size_t i = 0; i < used; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    if (used + 1 >= sizeof(line))
        used = sizeof(line) - 2;
    line[used++] = '\n';
    line[used] = '\0';
    pthread_mutex_lock(&log_lock);
    FILE *f = out_stream ? out_stream : stderr;
    fwrite(line, 1, used, f);
    fflush(f);
    pthread_mutex_unlock(&log_lock);
}
