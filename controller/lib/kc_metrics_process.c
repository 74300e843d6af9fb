/* kc_metrics_process: the standard process_* metrics, sampled from /proc at each render. */
#include "kc_metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static bool next_field(const char **p, const char **start, size_t *len)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (!*s || *s == '\n')
        return false;
    const char *e = s;
    while (*e && *e != ' ' && *e != '\n')
        e++;
    *start = s;
    *len = (size_t)(e - s);
    *p = e;
    return true;
}

kc_code kc_metrics_parse_proc_stat(const char *text, double boot_time_s, long clk_tck,
                                   long page_size, kc_proc_stat *out, kc_err *err)
{
    if (!text || !out || clk_tck <= 0 || page_size <= 0)
        return kc_err_set(err, KC_EARG,
                          "proc stat: text and output are required, clock tick "
                          "and page size must be positive");
    /* The command name is in parentheses and may itself hold ") ", so the fields start after the
     * last ')'. */
    const char *p = strrchr(text, ')');
    if (!p || !strchr(text, '('))
        return kc_err_set(err, KC_EPARSE, "proc stat: no \"(comm)\" field found");
    p++;
    /* Fields counted from 1 as in proc(5): 3 is the state, 14 utime, 15 stime, 22 starttime,
     * 23 vsize, 24 rss. */
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long long rss = 0;
    for (int field = 3; field <= 24; field++) {
        const char *s;
        size_t len;
        if (!next_field(&p, &s, &len))
            return kc_err_set(err, KC_EPARSE, "proc stat: text ends before field %d", field);
        if (field == 3)
            continue;
        char tmp[32];
        if (len >= sizeof(tmp))
            return kc_err_set(err, KC_EPARSE, "proc stat: field %d is too long", field);
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        char *end = NULL;
        long long v = strtoll(tmp, &end, 10);
        if (!end || *end || end == tmp)
            return kc_err_set(err, KC_EPARSE, "proc stat: field %d (\"%s\") is not an integer",
                              field, tmp);
        unsigned long long uv = (unsigned long long)strtoull(tmp, NULL, 10);
        switch (field) {
        case 14:
            utime = uv;
            break;
        case 15:
            stime = uv;
            break;
        case 22:
            start = uv;
            break;
        case 23:
            vsize = uv;
            break;
        case 24:
            rss = v;
            break;
        default:
            break;
        }
    }
    out->cpu_seconds = ((double)utime + (double)stime) / (double)clk_tck;
    out->start_time_seconds = boot_time_s + (double)start / (double)clk_tck;
    out->virtual_bytes = (double)vsize;
    out->resident_bytes = rss > 0 ? (double)rss * (double)page_size : 0;
    return KC_OK;
}

typedef struct proc_collector {
    kc_series *cpu, *rss, *vsize, *start, *open_fds, *max_fds;
} proc_collector;

static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - 1 - len, f);
        len += n;
        if (n == 0 || len + 1 < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static double boot_time(void)
{
    char *stat = read_small_file("/proc/stat");
    double bt = 0;
    const char *line = stat ? strstr(stat, "\nbtime ") : NULL;
    if (line)
        bt = strtod(line + 7, NULL);
    free(stat);
    return bt;
}

static void process_hook(kc_registry *r, void *ud)
{
    proc_collector *pc = ud;
    char *text = read_small_file("/proc/self/stat");
    kc_proc_stat ps;
    if (text && kc_metrics_parse_proc_stat(text, boot_time(), sysconf(_SC_CLK_TCK),
                                           sysconf(_SC_PAGESIZE), &ps, NULL) == KC_OK) {
        /* The CPU counter mirrors the kernel's running total, so it is assigned, not added. */
        kc_counter_set(pc->cpu, ps.cpu_seconds);
        kc_gauge_set(pc->rss, ps.resident_bytes);
        kc_gauge_set(pc->vsize, ps.virtual_bytes);
        kc_gauge_set(pc->start, ps.start_time_seconds);
    }
    free(text);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        double n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
            if (de->d_name[0] != '.')
                n++;
        closedir(d);
        kc_gauge_set(pc->open_fds, n - 1); /* minus the directory stream's own descriptor */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        kc_gauge_set(pc->max_fds, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
}

static kc_code reg_one(kc_registry *r, kc_metric_type type, const char *name, const char *help,
                       kc_series **out, kc_err *err)
{
    kc_metric *m = NULL;
    kc_code rc = type == KC_COUNTER ? kc_metrics_counter(r, name, help, NULL, &m, err)
                                    : kc_metrics_gauge(r, name, help, NULL, &m, err);
    if (rc != KC_OK)
        return rc;
    return kc_metric_series(m, NULL, out, err);
}

kc_code kc_metrics_register_process(kc_registry *r, kc_err *err)
{
    if (!r)
        return kc_err_set(err, KC_EARG, "process metrics: registry must not be NULL");
    /* The hook owns the state, so the registry frees it. Registering twice fails on the first
     * name, which is then already taken. */
    proc_collector *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return kc_err_set(err, KC_ENOMEM, "out of memory registering process metrics");
    kc_code rc;
    if ((rc = reg_one(r, KC_COUNTER, "process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds.", &pc->cpu, err)) ||
        (rc = reg_one(r, KC_GAUGE, "process_resident_memory_bytes",
                      "Resident memory size in bytes.", &pc->rss, err)) ||
        (rc = reg_one(r, KC_GAUGE, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                      &pc->vsize, err)) ||
        (rc = reg_one(r, KC_GAUGE, "process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds.", &pc->start, err)) ||
        (rc = reg_one(r, KC_GAUGE, "process_open_fds", "Number of open file descriptors.",
                      &pc->open_fds, err)) ||
        (rc = reg_one(r, KC_GAUGE, "process_max_fds", "Maximum number of open file descriptors.",
                      &pc->max_fds, err)))
        goto free_pc;
    if ((rc = kc_metrics_add_hook(r, process_hook, pc, free, err)) != KC_OK)
        goto free_pc;
    return KC_OK;
free_pc:
    /* Families registered before the failure stay (they render as zero). */
    free(pc);
    return rc;
}
