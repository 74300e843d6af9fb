/* kc_metrics: a Prometheus registry whose families and series are rendered in text format 0.0.4. */
#include "kc_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kc_series {
    kc_metric *fam;
    char **values; /* fam->nlabels strings */
    uint64_t hash;
    double value;         /* counter and gauge value; histogram sum */
    uint64_t count;       /* histogram observations */
    uint64_t *per_bucket; /* histogram: non-cumulative counts, nbounds + 1 (+Inf) slots */
    kc_series *next;      /* hash chain */
};

struct kc_metric {
    kc_metric_type type;
    char *name;
    char *help;
    char **labels;
    size_t nlabels;
    double *bounds; /* histogram upper bounds without +Inf */
    size_t nbounds;
    /* One lock per family guards its series table and every value in it, so a histogram's
     * buckets, sum and count are always read consistently. */
    pthread_mutex_t lock;
    kc_series **table;
    size_t table_size; /* power of two */
    size_t nseries;
};

typedef struct hook {
    kc_metrics_hook fn;
    void *ud;
    void (*ud_free)(void *ud);
} hook;

struct kc_registry {
    pthread_mutex_t lock; /* guards fams and hooks (families are only freed with the registry) */
    kc_metric **fams;     /* sorted by name */
    size_t nfams, capfams;
    hook *hooks;
    size_t nhooks;
    /* Serializes renders so hooks never run concurrently with themselves. */
    pthread_mutex_t render_lock;
};

static const double default_bounds[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

kc_code kc_registry_new(kc_registry **out, kc_err *err)
{
    kc_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating a metrics registry");
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->render_lock, NULL);
    *out = r;
    return KC_OK;
}

static void series_free(kc_series *s, size_t nlabels)
{
    if (!s)
        return;
    if (s->values)
        for (size_t i = 0; i < nlabels; i++)
            free(s->values[i]);
    free(s->values);
    free(s->per_bucket);
    free(s);
}

static void strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void family_free(kc_metric *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->table_size; i++) {
        kc_series *s = m->table[i];
        while (s) {
            kc_series *next = s->next;
            series_free(s, m->nlabels);
            s = next;
        }
    }
    free(m->table);
    pthread_mutex_destroy(&m->lock);
    strv_free(m->labels, m->nlabels);
    free(m->bounds);
    free(m->name);
    free(m->help);
    free(m);
}

void kc_registry_free(kc_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nfams; i++)
        family_free(r->fams[i]);
    free(r->fams);
    for (size_t i = 0; i < r->nhooks; i++)
        if (r->hooks[i].ud_free)
            r->hooks[i].ud_free(r->hooks[i].ud);
    free(r->hooks);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->render_lock);
    free(r);
}

static bool valid_metric_name(const char *s)
{
    if (!s || !s[0])
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(p != s && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    if (!s || !s[0])
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(p != s && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

static uint64_t hash_values(const char *const *values, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++) {
            h ^= *p;
            h *= 1099511628211ULL;
        }
        /* A byte no UTF-8 text holds separates the values, so ("ab","c") differs from ("a","bc").
         */
        h ^= 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

static kc_series *series_new(kc_metric *m, const char *const *values, uint64_t hash)
{
    kc_series *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->fam = m;
    s->hash = hash;
    if (m->nlabels) {
        s->values = calloc(m->nlabels, sizeof(char *));
        if (!s->values)
            goto fail;
        for (size_t i = 0; i < m->nlabels; i++)
            if (!(s->values[i] = strdup(values[i])))
                goto fail;
    }
    if (m->type == KC_HISTOGRAM) {
        s->per_bucket = calloc(m->nbounds + 1, sizeof(uint64_t));
        if (!s->per_bucket)
            goto fail;
    }
    return s;
fail:
    series_free(s, m->nlabels);
    return NULL;
}

/* Grows the chain table when it averages more than one series per slot. Called with m->lock. */
static void table_maybe_grow(kc_metric *m)
{
    if (m->nseries < m->table_size)
        return;
    size_t nsize = m->table_size * 2;
    kc_series **nt = calloc(nsize, sizeof(*nt));
    if (!nt)
        return; /* longer chains still work */
    for (size_t i = 0; i < m->table_size; i++) {
        kc_series *s = m->table[i];
        while (s) {
            kc_series *next = s->next;
            size_t slot = s->hash & (nsize - 1);
            s->next = nt[slot];
            nt[slot] = s;
            s = next;
        }
    }
    free(m->table);
    m->table = nt;
    m->table_size = nsize;
}

static bool values_equal(const kc_series *s, const char *const *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s->values[i], values[i]) != 0)
            return false;
    return true;
}

/* Finds or creates a series. Called with m->lock held. */
static kc_series *series_get(kc_metric *m, const char *const *values, bool create)
{
    uint64_t h = hash_values(values, m->nlabels);
    size_t slot = h & (m->table_size - 1);
    for (kc_series *s = m->table[slot]; s; s = s->next)
        if (s->hash == h && values_equal(s, values, m->nlabels))
            return s;
    if (!create)
        return NULL;
    kc_series *s = series_new(m, values, h);
    if (!s)
        return NULL;
    s->next = m->table[slot];
    m->table[slot] = s;
    m->nseries++;
    table_maybe_grow(m);
    return s;
}

static kc_code check_labels(const char *name, const char *const *labels, kc_metric_type type,
                            size_t *n_out, kc_err *err)
{
    size_t n = 0;
    for (; labels && labels[n]; n++) {
        const char *l = labels[n];
        if (!valid_label_name(l))
            return kc_err_set(err, KC_EARG,
                              "metric %s: label name \"%s\" is invalid: expected "
                              "[a-zA-Z_][a-zA-Z0-9_]*",
                              name, l);
        if (strncmp(l, "__", 2) == 0)
            return kc_err_set(err, KC_EARG,
                              "metric %s: label name \"%s\" is reserved (starts with \"__\")", name,
                              l);
        if (type == KC_HISTOGRAM && strcmp(l, "le") == 0)
            return kc_err_set(err, KC_EARG,
                              "histogram %s: label name \"le\" is reserved for bucket bounds",
                              name);
        for (size_t j = 0; j < n; j++)
            if (strcmp(labels[j], l) == 0)
                return kc_err_set(err, KC_EARG, "metric %s: label name \"%s\" given twice", name,
                                  l);
    }
    *n_out = n;
    return KC_OK;
}

static kc_code check_bounds(const char *name, const double *b, size_t n, kc_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(b[i]) || isinf(b[i]))
            return kc_err_set(err, KC_EARG, "histogram %s: bucket bound %zu is not finite", name,
                              i);
        if (i > 0 && !(b[i] > b[i - 1]))
            return kc_err_set(err, KC_EARG,
                              "histogram %s: bucket bounds must increase strictly, but bound %zu "
                              "(%g) follows %g",
                              name, i, b[i], b[i - 1]);
    }
    return KC_OK;
}

static kc_code do_register(kc_registry *r, kc_metric_type type, const char *name, const char *help,
                           const char *const *labels, const double *bounds, size_t nbounds,
                           kc_metric **out, kc_err *err)
{
    if (!r || !out)
        return kc_err_set(err, KC_EARG, "metrics: registry and output must not be NULL");
    if (!valid_metric_name(name))
        return kc_err_set(err, KC_EARG,
                          "metric name \"%s\" is invalid: expected [a-zA-Z_:][a-zA-Z0-9_:]*",
                          name ? name : "(null)");
    size_t nlabels = 0;
    kc_code rc = check_labels(name, labels, type, &nlabels, err);
    if (rc != KC_OK)
        return rc;
    if (type == KC_HISTOGRAM) {
        if (!bounds || nbounds == 0) {
            bounds = default_bounds;
            nbounds = sizeof(default_bounds) / sizeof(default_bounds[0]);
        }
        /* A trailing +Inf is implied; accept it when the caller spelt it out. */
        if (isinf(bounds[nbounds - 1]) && bounds[nbounds - 1] > 0)
            nbounds--;
        if ((rc = check_bounds(name, bounds, nbounds, err)) != KC_OK)
            return rc;
    }

    kc_metric *m = calloc(1, sizeof(*m));
    if (!m)
        return kc_err_set(err, KC_ENOMEM, "out of memory registering metric %s", name);
    pthread_mutex_init(&m->lock, NULL);
    m->type = type;
    m->table_size = 8;
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    m->table = calloc(m->table_size, sizeof(*m->table));
    if (!m->name || !m->help || !m->table)
        goto oom;
    if (nlabels) {
        if (!(m->labels = calloc(nlabels, sizeof(char *))))
            goto oom;
        m->nlabels = nlabels;
        for (size_t i = 0; i < nlabels; i++)
            if (!(m->labels[i] = strdup(labels[i])))
                goto oom;
    }
    if (type == KC_HISTOGRAM && nbounds) {
        if (!(m->bounds = malloc(nbounds * sizeof(double))))
            goto oom;
        memcpy(m->bounds, bounds, nbounds * sizeof(double));
        m->nbounds = nbounds;
    }
    if (nlabels == 0 && !series_get(m, NULL, true))
        goto oom;

    pthread_mutex_lock(&r->lock);
    size_t pos = 0;
    for (; pos < r->nfams; pos++) {
        int c = strcmp(r->fams[pos]->name, name);
        if (c == 0) {
            pthread_mutex_unlock(&r->lock);
            family_free(m);
            return kc_err_set(err, KC_EARG, "metric %s is already registered", name);
        }
        if (c > 0)
            break;
    }
    if (r->nfams == r->capfams) {
        size_t ncap = r->capfams ? r->capfams * 2 : 16;
        kc_metric **nf = realloc(r->fams, ncap * sizeof(*nf));
        if (!nf) {
            pthread_mutex_unlock(&r->lock);
            goto oom;
        }
        r->fams = nf;
        r->capfams = ncap;
    }
    memmove(&r->fams[pos + 1], &r->fams[pos], (r->nfams - pos) * sizeof(*r->fams));
    r->fams[pos] = m;
    r->nfams++;
    pthread_mutex_unlock(&r->lock);
    *out = m;
    return KC_OK;
oom:
    family_free(m);
    return kc_err_set(err, KC_ENOMEM, "out of memory registering metric %s", name);
}

kc_code kc_metrics_counter(kc_registry *r, const char *name, const char *help,
                           const char *const *labels, kc_metric **out, kc_err *err)
{
    return do_register(r, KC_COUNTER, name, help, labels, NULL, 0, out, err);
}

kc_code kc_metrics_gauge(kc_registry *r, const char *name, const char *help,
                         const char *const *labels, kc_metric **out, kc_err *err)
{
    return do_register(r, KC_GAUGE, name, help, labels, NULL, 0, out, err);
}

kc_code kc_metrics_histogram(kc_registry *r, const char *name, const char *help,
                             const char *const *labels, const double *bounds, size_t nbounds,
                             kc_metric **out, kc_err *err)
{
    return do_register(r, KC_HISTOGRAM, name, help, labels, bounds, nbounds, out, err);
}

kc_code kc_metrics_exp_buckets(double start, double factor, size_t count, double *out, kc_err *err)
{
    if (!out || count == 0)
        return kc_err_set(err, KC_EARG, "exponential buckets: need an output array of count > 0");
    if (!(start > 0) || isinf(start))
        return kc_err_set(err, KC_EARG, "exponential buckets: start must be > 0, got %g", start);
    if (!(factor > 1) || isinf(factor))
        return kc_err_set(err, KC_EARG, "exponential buckets: factor must be > 1, got %g", factor);
    double v = start;
    for (size_t i = 0; i < count; i++, v *= factor)
        out[i] = v;
    return KC_OK;
}

/* Checks that values is a NULL-terminated array of exactly m->nlabels strings. */
static kc_code check_values(const kc_metric *m, const char *const *values, kc_err *err)
{
    size_t n = 0;
    while (values && values[n] && n <= m->nlabels)
        n++;
    if (n != m->nlabels)
        return kc_err_set(err, KC_EARG, "metric %s: expected %zu label values, got %s%zu", m->name,
                          m->nlabels, n > m->nlabels ? "more than " : "",
                          n > m->nlabels ? m->nlabels : n);
    return KC_OK;
}

kc_code kc_metric_series(kc_metric *m, const char *const *values, kc_series **out, kc_err *err)
{
    if (!m || !out)
        return kc_err_set(err, KC_EARG, "metrics: metric and output must not be NULL");
    kc_code rc = check_values(m, values, err);
    if (rc != KC_OK)
        return rc;
    pthread_mutex_lock(&m->lock);
    kc_series *s = series_get(m, values, true);
    pthread_mutex_unlock(&m->lock);
    if (!s)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating a series of %s", m->name);
    *out = s;
    return KC_OK;
}

kc_series *kc_metric_with(kc_metric *m, const char *const *values)
{
    kc_series *s = NULL;
    return kc_metric_series(m, values, &s, NULL) == KC_OK ? s : NULL;
}

kc_code kc_metric_delete(kc_metric *m, const char *const *values, kc_err *err)
{
    if (!m)
        return kc_err_set(err, KC_EARG, "metrics: metric must not be NULL");
    if (m->nlabels == 0)
        return kc_err_set(err, KC_EARG, "metric %s has no labels; its series cannot be deleted",
                          m->name);
    kc_code rc = check_values(m, values, err);
    if (rc != KC_OK)
        return rc;
    uint64_t h = hash_values(values, m->nlabels);
    pthread_mutex_lock(&m->lock);
    kc_series **pp = &m->table[h & (m->table_size - 1)];
    for (; *pp; pp = &(*pp)->next) {
        kc_series *s = *pp;
        if (s->hash == h && values_equal(s, values, m->nlabels)) {
            *pp = s->next;
            m->nseries--;
            pthread_mutex_unlock(&m->lock);
            series_free(s, m->nlabels);
            return KC_OK;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return kc_err_set(err, KC_ENOTFOUND, "metric %s has no series with those label values",
                      m->name);
}

void kc_metric_reset(kc_metric *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (m->nlabels == 0) {
        kc_series *s = m->table[hash_values(NULL, 0) & (m->table_size - 1)];
        if (s) {
            s->value = 0;
            s->count = 0;
            if (s->per_bucket)
                memset(s->per_bucket, 0, (m->nbounds + 1) * sizeof(uint64_t));
        }
    } else {
        for (size_t i = 0; i < m->table_size; i++) {
            kc_series *s = m->table[i];
            while (s) {
                kc_series *next = s->next;
                series_free(s, m->nlabels);
                s = next;
            }
            m->table[i] = NULL;
        }
        m->nseries = 0;
    }
    pthread_mutex_unlock(&m->lock);
}

kc_metric_type kc_metric_get_type(const kc_metric *m)
{
    return m->type;
}

const char *kc_metric_name(const kc_metric *m)
{
    return m->name;
}

static void add_value(kc_series *s, kc_metric_type type, double v, bool set)
{
    if (!s || s->fam->type != type)
        return;
    pthread_mutex_lock(&s->fam->lock);
    s->value = set ? v : s->value + v;
    pthread_mutex_unlock(&s->fam->lock);
}

void kc_counter_inc(kc_series *s)
{
    add_value(s, KC_COUNTER, 1, false);
}

void kc_counter_add(kc_series *s, double v)
{
    if (!(v >= 0) || isinf(v))
        return;
    add_value(s, KC_COUNTER, v, false);
}

void kc_counter_set(kc_series *s, double v)
{
    if (!s || s->fam->type != KC_COUNTER || isnan(v) || isinf(v))
        return;
    pthread_mutex_lock(&s->fam->lock);
    if (v > s->value)
        s->value = v;
    pthread_mutex_unlock(&s->fam->lock);
}

void kc_gauge_set(kc_series *s, double v)
{
    add_value(s, KC_GAUGE, v, true);
}

void kc_gauge_inc(kc_series *s)
{
    add_value(s, KC_GAUGE, 1, false);
}

void kc_gauge_dec(kc_series *s)
{
    add_value(s, KC_GAUGE, -1, false);
}

void kc_gauge_add(kc_series *s, double v)
{
    add_value(s, KC_GAUGE, v, false);
}

void kc_gauge_set_to_now(kc_series *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    kc_gauge_set(s, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

void kc_histogram_observe(kc_series *s, double v)
{
    if (!s || s->fam->type != KC_HISTOGRAM)
        return;
    kc_metric *m = s->fam;
    /* The first bound >= v; NaN lands in +Inf, as in client_golang. */
    size_t lo = 0, hi = m->nbounds;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v <= m->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    pthread_mutex_lock(&m->lock);
    s->per_bucket[lo]++;
    s->count++;
    s->value += v;
    pthread_mutex_unlock(&m->lock);
}

double kc_series_value(kc_series *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->fam->lock);
    double v = s->value;
    pthread_mutex_unlock(&s->fam->lock);
    return v;
}

unsigned long long kc_series_count(kc_series *s)
{
    if (!s || s->fam->type != KC_HISTOGRAM)
        return 0;
    pthread_mutex_lock(&s->fam->lock);
    unsigned long long c = s->count;
    pthread_mutex_unlock(&s->fam->lock);
    return c;
}

kc_code kc_metrics_add_hook(kc_registry *r, kc_metrics_hook fn, void *ud, void (*ud_free)(void *ud),
                            kc_err *err)
{
    if (!r || !fn)
        return kc_err_set(err, KC_EARG, "metrics hook: registry and function must not be NULL");
    pthread_mutex_lock(&r->lock);
    hook *nh = realloc(r->hooks, (r->nhooks + 1) * sizeof(*nh));
    if (!nh) {
        pthread_mutex_unlock(&r->lock);
        return kc_err_set(err, KC_ENOMEM, "out of memory adding a metrics hook");
    }
    r->hooks = nh;
    r->hooks[r->nhooks++] = (hook){fn, ud, ud_free};
    pthread_mutex_unlock(&r->lock);
    return KC_OK;
}

void kc_metrics_remove_hook(kc_registry *r, kc_metrics_hook fn, void *ud)
{
    if (!r || !fn)
        return;
    pthread_mutex_lock(&r->render_lock); /* no render is running hooks */
    pthread_mutex_lock(&r->lock);
    size_t kept = 0;
    for (size_t i = 0; i < r->nhooks; i++) {
        hook h = r->hooks[i];
        if (h.fn == fn && h.ud == ud) {
            if (h.ud_free)
                h.ud_free(h.ud);
            continue;
        }
        r->hooks[kept++] = h;
    }
    r->nhooks = kept;
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_unlock(&r->render_lock);
}

/* ---- rendering ---- */

/* Integers print exactly ("42"), everything else in the shortest form that reads back the same
 * double, the way Prometheus clients write floats. */
static const char *fmt_double(char buf[40], double v)
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    if (v == 0)
        return "0";
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, 40, "%.0f", v);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 40, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static void put_escaped(FILE *f, const char *s, bool quotes)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (quotes && *s == '"')
            fputs("\\\"", f);
        else
            fputc(*s, f);
    }
}

/* Writes {a="x",b="y"[,le="..."]}, or nothing when there are no labels at all. */
static void put_labels(FILE *f, const kc_metric *m, const kc_series *s, const char *le)
{
    if (m->nlabels == 0 && !le)
        return;
    fputc('{', f);
    for (size_t i = 0; i < m->nlabels; i++) {
        fprintf(f, "%s%s=\"", i ? "," : "", m->labels[i]);
        put_escaped(f, s->values[i], true);
        fputc('"', f);
    }
    if (le)
        fprintf(f, "%sle=\"%s\"", m->nlabels ? "," : "", le);
    fputc('}', f);
}

static int cmp_series(const void *a, const void *b)
{
    const kc_series *x = *(const kc_series *const *)a;
    const kc_series *y = *(const kc_series *const *)b;
    for (size_t i = 0; i < x->fam->nlabels; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

static bool render_family(FILE *f, kc_metric *m)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    bool ok = true;
    char num[40];
    pthread_mutex_lock(&m->lock);
    if (m->nseries == 0)
        goto unlock;
    kc_series **list = malloc(m->nseries * sizeof(*list));
    if (!list) {
        ok = false;
        goto unlock;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->table_size; i++)
        for (kc_series *s = m->table[i]; s; s = s->next)
            list[n++] = s;
    qsort(list, n, sizeof(*list), cmp_series);

    fprintf(f, "# HELP %s ", m->name);
    put_escaped(f, m->help, false);
    fprintf(f, "\n# TYPE %s %s\n", m->name, type_names[m->type]);
    for (size_t i = 0; i < n; i++) {
        kc_series *s = list[i];
        if (m->type != KC_HISTOGRAM) {
            fputs(m->name, f);
            put_labels(f, m, s, NULL);
            fprintf(f, " %s\n", fmt_double(num, s->value));
            continue;
        }
        uint64_t cum = 0;
        for (size_t b = 0; b <= m->nbounds; b++) {
            cum += s->per_bucket[b];
            char le[40];
            const char *les = b < m->nbounds ? fmt_double(le, m->bounds[b]) : "+Inf";
            fprintf(f, "%s_bucket", m->name);
            put_labels(f, m, s, les);
            fprintf(f, " %llu\n", (unsigned long long)cum);
        }
        fprintf(f, "%s_sum", m->name);
        put_labels(f, m, s, NULL);
        fprintf(f, " %s\n%s_count", fmt_double(num, s->value), m->name);
        put_labels(f, m, s, NULL);
        fprintf(f, " %llu\n", (unsigned long long)s->count);
    }
    free(list);
unlock:
    pthread_mutex_unlock(&m->lock);
    return ok;
}

char *kc_metrics_render(kc_registry *r)
{
    if (!r)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    pthread_mutex_lock(&r->render_lock);
    pthread_mutex_lock(&r->lock);
    size_t nhooks = r->nhooks;
    hook *hooks = nhooks ? malloc(nhooks * sizeof(*hooks)) : NULL;
    if (nhooks && !hooks) {
        pthread_mutex_unlock(&r->lock);
        goto unlock_render;
    }
    if (nhooks)
        memcpy(hooks, r->hooks, nhooks * sizeof(*hooks));
    pthread_mutex_unlock(&r->lock);
    /* Hooks set values through the family locks, so they run with no registry lock held. */
    for (size_t i = 0; i < nhooks; i++)
        hooks[i].fn(r, hooks[i].ud);
    free(hooks);

    FILE *f = open_memstream(&buf, &len);
    if (!f)
        goto unlock_render;
    bool ok = true;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->nfams && ok; i++)
        ok = render_family(f, r->fams[i]);
    pthread_mutex_unlock(&r->lock);
    if (ferror(f))
        ok = false;
    if (fclose(f) != 0)
        ok = false;
    if (!ok) {
        free(buf);
        buf = NULL;
    }
unlock_render:
    pthread_mutex_unlock(&r->render_lock);
    return buf;
}
