/* kc_metrics: a thread-safe Prometheus registry (counters, gauges, histograms) and its text format.
 */
#ifndef KC_METRICS_H
#define KC_METRICS_H

#include <stddef.h>

#include "kc_error.h"

typedef struct kc_registry kc_registry; /* owns every metric registered in it */
typedef struct kc_metric kc_metric;     /* a metric family: name, help, type, label names */
typedef struct kc_series kc_series;     /* one child of a family: a tuple of label values */

typedef enum kc_metric_type { KC_COUNTER, KC_GAUGE, KC_HISTOGRAM } kc_metric_type;

/* Builds the label-name or label-value array argument in place: KC_LABELS("resource", "verb"). */
#define KC_LABELS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Creates an empty registry. Free with kc_registry_free, which frees every metric and series in
 * it (their handles become invalid). */
kc_code kc_registry_new(kc_registry **out, kc_err *err);
void kc_registry_free(kc_registry *r);

/* Registers a family. name must match [a-zA-Z_:][a-zA-Z0-9_:]* and be new in the registry; help
 * is free text (NULL → ""). labels is a NULL-terminated array of label names (NULL or empty for
 * none), each matching [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", no duplicates. Strings are
 * copied. *out stays owned by the registry and is valid until kc_registry_free. A family without
 * labels has its single series (value 0) from the start; a labelled family renders nothing until
 * a series is created. Bad input → KC_EARG naming the offending name. */
kc_code kc_metrics_counter(kc_registry *r, const char *name, const char *help,
                           const char *const *labels, kc_metric **out, kc_err *err);
kc_code kc_metrics_gauge(kc_registry *r, const char *name, const char *help,
                         const char *const *labels, kc_metric **out, kc_err *err);
/* bounds: nbounds strictly increasing finite upper bounds ("+Inf" is implied and added); NULL and
 * 0 select the Prometheus defaults .005 .01 .025 .05 .1 .25 .5 1 2.5 5 10. "le" is not allowed as
 * a label name. */
kc_code kc_metrics_histogram(kc_registry *r, const char *name, const char *help,
                             const char *const *labels, const double *bounds, size_t nbounds,
                             kc_metric **out, kc_err *err);

/* Fills out[0..count) with start, start*factor, start*factor^2, ... (start > 0, factor > 1). */
kc_code kc_metrics_exp_buckets(double start, double factor, size_t count, double *out, kc_err *err);

/* The series for a tuple of label values, created (value 0) on first use. values is a
 * NULL-terminated array (KC_LABELS) of exactly as many strings as the family has label names, in
 * the same order (NULL for a family without labels); any UTF-8 text is allowed. The handle is owned
 * by the family and stays valid until the series is deleted or the registry freed. A wrong number
 * of values → KC_EARG. */
kc_code kc_metric_series(kc_metric *m, const char *const *values, kc_series **out, kc_err *err);
/* As kc_metric_series, without an error record: NULL on a wrong value count or allocation failure
 * (every value operation below accepts NULL and then does nothing). Meant for chained calls:
 * kc_counter_inc(kc_metric_with(m, KC_LABELS("pods", "GET"))). */
kc_series *kc_metric_with(kc_metric *m, const char *const *values);
/* Removes one series (its handle becomes invalid); KC_ENOTFOUND when it did not exist. */
kc_code kc_metric_delete(kc_metric *m, const char *const *values, kc_err *err);
/* Removes every series of a labelled family (resets an unlabelled one to 0). */
void kc_metric_reset(kc_metric *m);
kc_metric_type kc_metric_get_type(const kc_metric *m);
const char *kc_metric_name(const kc_metric *m);

/* Value operations; thread-safe. Each one is a no-op on a NULL series or on a series of another
 * type (a gauge operation on a counter does nothing). Counters only go up: a negative, NaN or
 * infinite kc_counter_add is ignored. */
void kc_counter_inc(kc_series *s);
void kc_counter_add(kc_series *s, double v);
/* Mirrors a running total kept elsewhere (kernel CPU time, a client's request count) into a
 * counter: the value is taken when it is higher than the current one, ignored otherwise. */
void kc_counter_set(kc_series *s, double v);
void kc_gauge_set(kc_series *s, double v);
void kc_gauge_inc(kc_series *s);
void kc_gauge_dec(kc_series *s);
void kc_gauge_add(kc_series *s, double v);
/* Sets a gauge to the current wall-clock time in seconds since the epoch. */
void kc_gauge_set_to_now(kc_series *s);
void kc_histogram_observe(kc_series *s, double v);
/* Current value of a counter or gauge (sum of a histogram); 0 for NULL. */
double kc_series_value(kc_series *s);
/* Number of observations of a histogram; 0 for NULL or other types. */
unsigned long long kc_series_count(kc_series *s);

/* Runs fn(r, ud) at the start of every kc_metrics_render, before any family is read, so values
 * that are cheaper to sample than to track (queue depths, process statistics) can be set then. fn
 * runs on the rendering thread, must not register families, and must not call
 * kc_metrics_render. */
typedef void (*kc_metrics_hook)(kc_registry *r, void *ud);
/* ud_free (may be NULL) is called on ud when the registry is freed. */
kc_code kc_metrics_add_hook(kc_registry *r, kc_metrics_hook fn, void *ud, void (*ud_free)(void *ud),
                            kc_err *err);

/* Removes the hooks registered with fn and ud (calling their ud_free). It waits for a render in
 * progress, so once it returns no such hook runs: an owner of ud calls it before freeing ud. */
void kc_metrics_remove_hook(kc_registry *r, kc_metrics_hook fn, void *ud);

/* Registers the standard process metrics, sampled from /proc at each render:
 * process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_start_time_seconds, process_open_fds, process_max_fds. */
kc_code kc_metrics_register_process(kc_registry *r, kc_err *err);

/* Renders every family in text exposition format 0.0.4: families sorted by name, each with
 * "# HELP" (backslash and newline escaped) and "# TYPE" lines, series sorted by label values,
 * label values escaped (\\, \", \n), histograms as cumulative _bucket{le=...}, _sum and _count.
 * Returns a malloc'd NUL-terminated string the caller frees, or NULL when out of memory. */
char *kc_metrics_render(kc_registry *r);

/* The fields of /proc/<pid>/stat the process collector uses, decoded. */
typedef struct kc_proc_stat {
    double cpu_seconds;        /* utime + stime */
    double start_time_seconds; /* since the epoch */
    double virtual_bytes;
    double resident_bytes;
} kc_proc_stat;
/* Decodes the text of /proc/<pid>/stat (the command name may hold spaces and parentheses).
 * boot_time_s is btime from /proc/stat; clk_tck and page_size are sysconf's values (> 0).
 * Malformed text → KC_EPARSE saying which field. */
kc_code kc_metrics_parse_proc_stat(const char *text, double boot_time_s, long clk_tck,
                                   long page_size, kc_proc_stat *out, kc_err *err);

#endif
