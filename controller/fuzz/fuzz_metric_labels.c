/* Fuzz target: metric/label name validation and escaping in the text format, /proc/<pid>/stat
 * decoding and listen-address parsing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_httpd.h"
#include "kc_metrics.h"

/* Splits the input at NUL bytes into up to n strings (missing ones are ""). */
static size_t split(char *buf, size_t size, const char **parts, size_t n)
{
    size_t k = 0;
    parts[k++] = buf;
    for (size_t i = 0; i < size && k < n; i++)
        if (buf[i] == '\0')
            parts[k++] = buf + i + 1;
    for (size_t i = k; i < n; i++)
        parts[i] = "";
    return k;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Escaping must keep each sample on one line: HELP, TYPE and one line per sample. */
static void fuzz_render(const char **p)
{
    kc_registry *r = NULL;
    if (kc_registry_new(&r, NULL) != KC_OK)
        return;
    kc_err err = {0};
    kc_metric *g = NULL, *h = NULL;
    const char *labels[] = {p[1], NULL};
    const char *values[] = {p[2], NULL};
    size_t want = 0;
    if (kc_metrics_gauge(r, p[0], p[3], labels, &g, &err) == KC_OK) {
        if (kc_metric_with(g, values) == NULL)
            abort();
        kc_gauge_set(kc_metric_with(g, values), (double)strlen(p[2]) / 3.0);
        want += 3;
    } else if (err.code != KC_EARG) {
        abort();
    }
    char hname[300];
    snprintf(hname, sizeof(hname), "%.200s_h", p[0]);
    if (kc_metrics_histogram(r, hname, p[3], labels, (const double[]){0.5, 1}, 2, &h, &err) ==
        KC_OK) {
        kc_histogram_observe(kc_metric_with(h, values), (double)strlen(p[3]));
        want += 2 + 3 + 2; /* HELP, TYPE, 3 buckets, _sum, _count */
    }
    char *text = kc_metrics_render(r);
    if (!text || count_lines(text) != want)
        abort();
    free(text);
    kc_registry_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    const char *p[4];
    switch (data[0] % 3) {
    case 0:
        split(buf, size - 1, p, 4);
        fuzz_render(p);
        break;
    case 1: {
        kc_proc_stat ps;
        kc_err err = {0};
        if (kc_metrics_parse_proc_stat(buf, 1.7e9, 100, 4096, &ps, &err) != KC_OK &&
            err.code != KC_EPARSE)
            abort();
        break;
    }
    default: {
        char host[64];
        int port = -1;
        kc_err err = {0};
        if (kc_httpd_parse_addr(buf, host, sizeof(host), &port, &err) == KC_OK) {
            if (port < 0 || port > 65535 || strlen(host) >= sizeof(host))
                abort();
        } else if (err.code != KC_EARG) {
            abort();
        }
        break;
    }
    }
    free(buf);
    return 0;
}
