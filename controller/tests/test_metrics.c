/* Tests for kc_metrics: exact text exposition output, validation, concurrency, process metrics. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_metrics.h"

static kc_registry *reg;

static void setup(void)
{
    cr_assert_eq(kc_registry_new(&reg, NULL), KC_OK);
}

static void teardown(void)
{
    kc_registry_free(reg);
    reg = NULL;
}

TestSuite(metrics, .init = setup, .fini = teardown);

static void assert_render(const char *expected)
{
    char *text = kc_metrics_render(reg);
    cr_assert_not_null(text);
    cr_expect_str_eq(text, expected);
    free(text);
}

Test(metrics, empty_registry_renders_empty_text)
{
    assert_render("");
}

Test(metrics, counter_without_labels)
{
    kc_metric *m;
    kc_series *s;
    cr_assert_eq(kc_metrics_counter(reg, "kc_requests_total", "Requests sent.", NULL, &m, NULL),
                 KC_OK);
    assert_render("# HELP kc_requests_total Requests sent.\n"
                  "# TYPE kc_requests_total counter\n"
                  "kc_requests_total 0\n");
    cr_assert_eq(kc_metric_series(m, NULL, &s, NULL), KC_OK);
    kc_counter_inc(s);
    kc_counter_inc(s);
    kc_counter_add(s, 2.5);
    kc_counter_add(s, -1);       /* counters never go down */
    kc_counter_add(s, NAN);      /* nor become NaN */
    kc_counter_add(s, INFINITY); /* nor infinite */
    cr_assert_eq(kc_series_value(s), 4.5);
    assert_render("# HELP kc_requests_total Requests sent.\n"
                  "# TYPE kc_requests_total counter\n"
                  "kc_requests_total 4.5\n");
    kc_counter_set(s, 3); /* lower than the current total: ignored */
    cr_assert_eq(kc_series_value(s), 4.5);
    kc_counter_set(s, 10);
    cr_assert_eq(kc_series_value(s), 10);
}

Test(metrics, labelled_counter_sorted_and_escaped)
{
    kc_metric *m;
    cr_assert_eq(kc_metrics_counter(reg, "api_calls_total", "API calls by verb.",
                                    KC_LABELS("resource", "verb"), &m, NULL),
                 KC_OK);
    /* A labelled family with no series renders nothing at all. */
    assert_render("");
    kc_counter_add(kc_metric_with(m, KC_LABELS("pods", "GET")), 3);
    kc_counter_inc(kc_metric_with(m, KC_LABELS("nodes", "PATCH")));
    kc_counter_inc(kc_metric_with(m, KC_LABELS("pods", "DELETE")));
    kc_counter_inc(kc_metric_with(m, KC_LABELS("a\\b \"q\"\nx", "GET")));
    kc_counter_inc(kc_metric_with(m, KC_LABELS("pods", "GET")));
    assert_render("# HELP api_calls_total API calls by verb.\n"
                  "# TYPE api_calls_total counter\n"
                  "api_calls_total{resource=\"a\\\\b \\\"q\\\"\\nx\",verb=\"GET\"} 1\n"
                  "api_calls_total{resource=\"nodes\",verb=\"PATCH\"} 1\n"
                  "api_calls_total{resource=\"pods\",verb=\"DELETE\"} 1\n"
                  "api_calls_total{resource=\"pods\",verb=\"GET\"} 4\n");
}

Test(metrics, same_labels_give_the_same_series)
{
    kc_metric *m;
    cr_assert_eq(kc_metrics_gauge(reg, "g", "", KC_LABELS("a", "b"), &m, NULL), KC_OK);
    kc_series *x = kc_metric_with(m, KC_LABELS("ab", "c"));
    kc_series *y = kc_metric_with(m, KC_LABELS("a", "bc"));
    cr_assert_not_null(x);
    cr_assert_neq(x, y);
    cr_assert_eq(kc_metric_with(m, KC_LABELS("ab", "c")), x);
    /* Enough series to make the table grow; every one is still found afterwards. */
    kc_series *all[200];
    char buf[16];
    for (int i = 0; i < 200; i++) {
        snprintf(buf, sizeof(buf), "v%d", i);
        all[i] = kc_metric_with(m, KC_LABELS(buf, "z"));
        kc_gauge_set(all[i], i);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(buf, sizeof(buf), "v%d", i);
        cr_assert_eq(kc_metric_with(m, KC_LABELS(buf, "z")), all[i]);
        cr_assert_eq(kc_series_value(all[i]), i);
    }
}

Test(metrics, gauge_operations_and_number_formats)
{
    kc_metric *m;
    cr_assert_eq(kc_metrics_gauge(reg, "temp", "Help with \\ and\nnewline \"kept\".",
                                  KC_LABELS("k"), &m, NULL),
                 KC_OK);
    kc_series *a = kc_metric_with(m, KC_LABELS("a"));
    kc_gauge_set(a, 10);
    kc_gauge_inc(a);
    kc_gauge_dec(a);
    kc_gauge_dec(a);
    kc_gauge_add(a, -0.5);
    cr_assert_eq(kc_series_value(a), 8.5);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("b")), -2.25);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("c")), 1e-05);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("d")), 1e20);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("e")), NAN);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("f")), INFINITY);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("g")), -INFINITY);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("h")), 0.1);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("i")), 123456789);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("j")), -0.0);
    assert_render("# HELP temp Help with \\\\ and\\nnewline \"kept\".\n"
                  "# TYPE temp gauge\n"
                  "temp{k=\"a\"} 8.5\n"
                  "temp{k=\"b\"} -2.25\n"
                  "temp{k=\"c\"} 1e-05\n"
                  "temp{k=\"d\"} 1e+20\n"
                  "temp{k=\"e\"} NaN\n"
                  "temp{k=\"f\"} +Inf\n"
                  "temp{k=\"g\"} -Inf\n"
                  "temp{k=\"h\"} 0.1\n"
                  "temp{k=\"i\"} 123456789\n"
                  "temp{k=\"j\"} 0\n");
}

Test(metrics, set_to_now_is_wall_clock)
{
    kc_metric *m;
    kc_series *s;
    cr_assert_eq(kc_metrics_gauge(reg, "last_success", "", NULL, &m, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(m, NULL, &s, NULL), KC_OK);
    kc_gauge_set_to_now(s);
    double now = (double)time(NULL);
    cr_assert(fabs(kc_series_value(s) - now) < 2.0);
}

Test(metrics, operations_of_another_type_are_ignored)
{
    kc_metric *c, *g, *h;
    kc_series *cs, *gs, *hs;
    cr_assert_eq(kc_metrics_counter(reg, "c_total", "", NULL, &c, NULL), KC_OK);
    cr_assert_eq(kc_metrics_gauge(reg, "g", "", NULL, &g, NULL), KC_OK);
    cr_assert_eq(kc_metrics_histogram(reg, "h", "", NULL, NULL, 0, &h, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(c, NULL, &cs, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(g, NULL, &gs, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(h, NULL, &hs, NULL), KC_OK);
    kc_gauge_set(cs, 7);
    kc_gauge_dec(cs);
    kc_counter_inc(gs);
    kc_counter_set(gs, 4);
    kc_histogram_observe(cs, 1);
    kc_counter_inc(hs);
    kc_gauge_set(hs, 3);
    cr_assert_eq(kc_series_value(cs), 0);
    cr_assert_eq(kc_series_value(gs), 0);
    cr_assert_eq(kc_series_value(hs), 0);
    cr_assert_eq(kc_series_count(hs), 0);
    cr_assert_eq(kc_series_count(cs), 0);
    /* NULL series are accepted everywhere. */
    kc_counter_inc(NULL);
    kc_gauge_set(NULL, 1);
    kc_histogram_observe(NULL, 1);
    cr_assert_eq(kc_series_value(NULL), 0);
    cr_assert_eq(kc_metric_get_type(h), KC_HISTOGRAM);
    cr_assert_str_eq(kc_metric_name(c), "c_total");
}

Test(metrics, histogram_exact_text)
{
    kc_metric *m;
    kc_series *s;
    double bounds[] = {0.1, 1, 5};
    cr_assert_eq(kc_metrics_histogram(reg, "reconcile_seconds", "Reconcile duration.", NULL, bounds,
                                      3, &m, NULL),
                 KC_OK);
    cr_assert_eq(kc_metric_series(m, NULL, &s, NULL), KC_OK);
    kc_histogram_observe(s, 0.25);
    kc_histogram_observe(s, 0.1); /* bounds are inclusive */
    kc_histogram_observe(s, 0.5);
    kc_histogram_observe(s, 3);
    kc_histogram_observe(s, 100);
    cr_assert_eq(kc_series_count(s), 5);
    assert_render("# HELP reconcile_seconds Reconcile duration.\n"
                  "# TYPE reconcile_seconds histogram\n"
                  "reconcile_seconds_bucket{le=\"0.1\"} 1\n"
                  "reconcile_seconds_bucket{le=\"1\"} 3\n"
                  "reconcile_seconds_bucket{le=\"5\"} 4\n"
                  "reconcile_seconds_bucket{le=\"+Inf\"} 5\n"
                  "reconcile_seconds_sum 103.85\n"
                  "reconcile_seconds_count 5\n");
}

Test(metrics, labelled_histogram_default_buckets)
{
    kc_metric *m;
    cr_assert_eq(
        kc_metrics_histogram(reg, "req_seconds", "Latency.", KC_LABELS("verb"), NULL, 0, &m, NULL),
        KC_OK);
    kc_histogram_observe(kc_metric_with(m, KC_LABELS("GET")), 0.02);
    assert_render("# HELP req_seconds Latency.\n"
                  "# TYPE req_seconds histogram\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.005\"} 0\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.01\"} 0\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.025\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.05\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.1\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.25\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"0.5\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"1\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"2.5\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"5\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"10\"} 1\n"
                  "req_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 1\n"
                  "req_seconds_sum{verb=\"GET\"} 0.02\n"
                  "req_seconds_count{verb=\"GET\"} 1\n");
}

Test(metrics, histogram_explicit_inf_bound_and_exp_buckets)
{
    kc_metric *m;
    double b[4];
    cr_assert_eq(kc_metrics_exp_buckets(0.5, 2, 3, b, NULL), KC_OK);
    cr_assert_eq(b[0], 0.5);
    cr_assert_eq(b[1], 1);
    cr_assert_eq(b[2], 2);
    b[3] = INFINITY;
    cr_assert_eq(kc_metrics_histogram(reg, "h", "", NULL, b, 4, &m, NULL), KC_OK);
    assert_render("# HELP h \n# TYPE h histogram\n"
                  "h_bucket{le=\"0.5\"} 0\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"2\"} 0\n"
                  "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
    kc_err e = {0};
    cr_assert_eq(kc_metrics_exp_buckets(0, 2, 3, b, &e), KC_EARG);
    cr_assert(strstr(e.msg, "start") != NULL);
    cr_assert_eq(kc_metrics_exp_buckets(1, 1, 3, b, &e), KC_EARG);
    cr_assert(strstr(e.msg, "factor") != NULL);
    cr_assert_eq(kc_metrics_exp_buckets(1, 2, 0, b, &e), KC_EARG);
}

Test(metrics, families_render_sorted_by_name)
{
    kc_metric *m;
    cr_assert_eq(kc_metrics_gauge(reg, "zeta", "z", NULL, &m, NULL), KC_OK);
    cr_assert_eq(kc_metrics_gauge(reg, "alpha", "a", NULL, &m, NULL), KC_OK);
    cr_assert_eq(kc_metrics_counter(reg, "mid:total", "m", NULL, &m, NULL), KC_OK);
    assert_render("# HELP alpha a\n# TYPE alpha gauge\nalpha 0\n"
                  "# HELP mid:total m\n# TYPE mid:total counter\nmid:total 0\n"
                  "# HELP zeta z\n# TYPE zeta gauge\nzeta 0\n");
}

Test(metrics, invalid_names_and_labels)
{
    kc_metric *m = NULL;
    kc_err e = {0};
    const char *bad_names[] = {"", "1abc", "a-b", "a b", "é", "x.y"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        kc_err_clear(&e);
        cr_assert_eq(kc_metrics_counter(reg, bad_names[i], "", NULL, &m, &e), KC_EARG,
                     "name \"%s\" accepted", bad_names[i]);
        cr_assert(strstr(e.msg, "invalid") != NULL, "%s", e.msg);
    }
    cr_assert_eq(kc_metrics_gauge(reg, NULL, "", NULL, &m, &e), KC_EARG);
    cr_assert_eq(kc_metrics_gauge(reg, "ok_name", "", KC_LABELS("a:b"), &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "\"a:b\"") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_gauge(reg, "ok_name", "", KC_LABELS("9a"), &m, &e), KC_EARG);
    cr_assert_eq(kc_metrics_gauge(reg, "ok_name", "", KC_LABELS("__name"), &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "reserved") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_gauge(reg, "ok_name", "", KC_LABELS("a", "b", "a"), &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "twice") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_histogram(reg, "ok_name", "", KC_LABELS("le"), NULL, 0, &m, &e),
                 KC_EARG);
    cr_assert(strstr(e.msg, "\"le\"") != NULL, "%s", e.msg);
    /* "le" is only reserved for histograms. */
    cr_assert_eq(kc_metrics_gauge(reg, "ok_gauge", "", KC_LABELS("le", "_x1"), &m, &e), KC_OK);

    double dec[] = {1, 0.5};
    cr_assert_eq(kc_metrics_histogram(reg, "h1", "", NULL, dec, 2, &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "increase") != NULL, "%s", e.msg);
    double same[] = {1, 1};
    cr_assert_eq(kc_metrics_histogram(reg, "h1", "", NULL, same, 2, &m, &e), KC_EARG);
    double nan[] = {NAN};
    cr_assert_eq(kc_metrics_histogram(reg, "h1", "", NULL, nan, 1, &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "finite") != NULL, "%s", e.msg);

    cr_assert_eq(kc_metrics_counter(reg, "dup_total", "", NULL, &m, &e), KC_OK);
    cr_assert_eq(kc_metrics_gauge(reg, "dup_total", "", NULL, &m, &e), KC_EARG);
    cr_assert(strstr(e.msg, "already registered") != NULL, "%s", e.msg);
    /* Nothing half-registered by the failures. */
    assert_render("# HELP dup_total \n# TYPE dup_total counter\ndup_total 0\n");
}

Test(metrics, wrong_number_of_label_values)
{
    kc_metric *m;
    kc_series *s = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_metrics_counter(reg, "x_total", "", KC_LABELS("a", "b"), &m, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(m, KC_LABELS("1"), &s, &e), KC_EARG);
    cr_assert(strstr(e.msg, "expected 2 label values, got 1") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metric_series(m, KC_LABELS("1", "2", "3"), &s, &e), KC_EARG);
    cr_assert(strstr(e.msg, "got more than 2") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metric_series(m, NULL, &s, &e), KC_EARG);
    cr_assert_null(kc_metric_with(m, KC_LABELS("only")));
    kc_metric *plain;
    cr_assert_eq(kc_metrics_counter(reg, "y_total", "", NULL, &plain, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(plain, KC_LABELS("extra"), &s, &e), KC_EARG);
    assert_render("# HELP y_total \n# TYPE y_total counter\ny_total 0\n");
}

Test(metrics, delete_and_reset)
{
    kc_metric *m;
    kc_err e = {0};
    cr_assert_eq(kc_metrics_gauge(reg, "gpus", "GPUs per node.", KC_LABELS("node"), &m, NULL),
                 KC_OK);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("n1")), 8);
    kc_gauge_set(kc_metric_with(m, KC_LABELS("n2")), 4);
    cr_assert_eq(kc_metric_delete(m, KC_LABELS("n1"), &e), KC_OK);
    cr_assert_eq(kc_metric_delete(m, KC_LABELS("n1"), &e), KC_ENOTFOUND);
    cr_assert_eq(kc_metric_delete(m, NULL, &e), KC_EARG);
    assert_render("# HELP gpus GPUs per node.\n# TYPE gpus gauge\ngpus{node=\"n2\"} 4\n");
    kc_metric_reset(m);
    assert_render("");
    kc_gauge_set(kc_metric_with(m, KC_LABELS("n3")), 1);
    assert_render("# HELP gpus GPUs per node.\n# TYPE gpus gauge\ngpus{node=\"n3\"} 1\n");

    kc_metric *h;
    kc_series *hs;
    cr_assert_eq(kc_metrics_histogram(reg, "lat", "", NULL, (double[]){1}, 1, &h, NULL), KC_OK);
    cr_assert_eq(kc_metric_series(h, NULL, &hs, NULL), KC_OK);
    kc_histogram_observe(hs, 0.5);
    cr_assert_eq(kc_metric_delete(h, NULL, &e), KC_EARG);
    kc_metric_reset(h);
    cr_assert_eq(kc_series_count(hs), 0);
    cr_assert_eq(kc_series_value(hs), 0);
}

typedef struct worker_arg {
    kc_series *c, *h;
    kc_metric *lab;
    int id;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    char v[8];
    snprintf(v, sizeof(v), "w%d", a->id % 2);
    for (int i = 0; i < 5000; i++) {
        kc_counter_inc(a->c);
        kc_histogram_observe(a->h, (i % 2) ? 0.5 : 2);
        kc_counter_inc(kc_metric_with(a->lab, KC_LABELS(v)));
        if (i % 500 == 0)
            free(kc_metrics_render(reg));
    }
    return NULL;
}

Test(metrics, concurrent_updates_are_not_lost)
{
    kc_metric *c, *h, *lab;
    worker_arg args[4];
    pthread_t th[4];
    cr_assert_eq(kc_metrics_counter(reg, "ops_total", "", NULL, &c, NULL), KC_OK);
    cr_assert_eq(kc_metrics_histogram(reg, "ops_seconds", "", NULL, (double[]){1}, 1, &h, NULL),
                 KC_OK);
    cr_assert_eq(kc_metrics_counter(reg, "lab_total", "", KC_LABELS("w"), &lab, NULL), KC_OK);
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){kc_metric_with(c, NULL), kc_metric_with(h, NULL), lab, i};
        cr_assert_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(kc_series_value(args[0].c), 20000);
    cr_assert_eq(kc_series_count(args[0].h), 20000);
    cr_assert_eq(kc_series_value(args[0].h), 10000 * 0.5 + 10000 * 2);
    cr_assert_eq(kc_series_value(kc_metric_with(lab, KC_LABELS("w0"))), 10000);
    cr_assert_eq(kc_series_value(kc_metric_with(lab, KC_LABELS("w1"))), 10000);
    char *text = kc_metrics_render(reg);
    cr_assert(strstr(text, "ops_seconds_bucket{le=\"1\"} 10000\n") != NULL, "%s", text);
    cr_assert(strstr(text, "ops_seconds_bucket{le=\"+Inf\"} 20000\n") != NULL, "%s", text);
    free(text);
}

static int hook_calls;
static int hook_freed;

static void depth_hook(kc_registry *r, void *ud)
{
    hook_calls++;
    kc_gauge_set(kc_metric_with(ud, NULL), 40 + hook_calls);
}

static void hook_free(void *ud)
{
    hook_freed++;
}

Test(metrics, hooks_run_before_each_render)
{
    kc_metric *m;
    kc_err e = {0};
    cr_assert_eq(kc_metrics_gauge(reg, "queue_depth", "Items queued.", NULL, &m, NULL), KC_OK);
    cr_assert_eq(kc_metrics_add_hook(reg, depth_hook, m, hook_free, NULL), KC_OK);
    cr_assert_eq(kc_metrics_add_hook(reg, NULL, m, NULL, &e), KC_EARG);
    assert_render("# HELP queue_depth Items queued.\n# TYPE queue_depth gauge\nqueue_depth 41\n");
    assert_render("# HELP queue_depth Items queued.\n# TYPE queue_depth gauge\nqueue_depth 42\n");
    cr_assert_eq(hook_calls, 2);
    kc_registry_free(reg);
    reg = NULL;
    cr_assert_eq(hook_freed, 1);
}

Test(metrics, a_removed_hook_no_longer_runs)
{
    kc_metric *m;
    int other = 0;
    hook_calls = hook_freed = 0;
    cr_assert_eq(kc_metrics_gauge(reg, "queue_depth", "Items queued.", NULL, &m, NULL), KC_OK);
    cr_assert_eq(kc_metrics_add_hook(reg, depth_hook, m, hook_free, NULL), KC_OK);
    cr_assert_eq(kc_metrics_add_hook(reg, depth_hook, &other, NULL, NULL), KC_OK);
    kc_metrics_remove_hook(reg, depth_hook, &other); /* another ud: the first hook stays */
    assert_render("# HELP queue_depth Items queued.\n# TYPE queue_depth gauge\nqueue_depth 41\n");
    cr_assert_eq(hook_freed, 0);
    kc_metrics_remove_hook(reg, depth_hook, m);
    cr_assert_eq(hook_freed, 1, "removing a hook frees its ud");
    assert_render("# HELP queue_depth Items queued.\n# TYPE queue_depth gauge\nqueue_depth 41\n");
    cr_assert_eq(hook_calls, 1, "a removed hook does not run");
    kc_metrics_remove_hook(reg, depth_hook, m); /* nothing left to remove */
    kc_metrics_remove_hook(NULL, depth_hook, m);
    kc_registry_free(reg);
    reg = NULL;
    cr_assert_eq(hook_freed, 1, "freed once");
}

static double value_of(const char *text, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(text, key);
    cr_assert_not_null(p, "%s missing from:\n%s", name, text);
    return strtod(p + strlen(key), NULL);
}

Test(metrics, process_collector)
{
    kc_err e = {0};
    cr_assert_eq(kc_metrics_register_process(reg, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(kc_metrics_register_process(reg, &e), KC_EARG);
    cr_assert(strstr(e.msg, "already registered") != NULL, "%s", e.msg);
    volatile double spin = 0;
    for (int i = 0; i < 2000000; i++)
        spin += i;
    cr_assert_gt(spin, 0);
    char *text = kc_metrics_render(reg);
    cr_assert_not_null(text);
    cr_assert(strstr(text, "# TYPE process_cpu_seconds_total counter\n") != NULL, "%s", text);
    cr_assert(strstr(text, "# TYPE process_resident_memory_bytes gauge\n") != NULL, "%s", text);
    double now = (double)time(NULL);
    double start = value_of(text, "process_start_time_seconds");
    cr_assert(start > now - 3600 && start <= now + 1, "start %f now %f", start, now);
    cr_assert_gt(value_of(text, "process_resident_memory_bytes"), 1 << 20);
    cr_assert_gt(value_of(text, "process_virtual_memory_bytes"),
                 value_of(text, "process_resident_memory_bytes"));
    cr_assert_geq(value_of(text, "process_cpu_seconds_total"), 0);
    cr_assert_geq(value_of(text, "process_open_fds"), 3);
    cr_assert_gt(value_of(text, "process_max_fds"), 0);
    free(text);
}

Test(metrics, parse_proc_stat)
{
    /* A command name holding ") (" and spaces must not shift the fields. */
    const char *stat = "4242 (my) (proc x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 150 0 0 20 0 "
                       "3 0 500 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 "
                       "0 0 0 0 0 0\n";
    kc_proc_stat ps;
    kc_err e = {0};
    cr_assert_eq(kc_metrics_parse_proc_stat(stat, 1700000000, 100, 4096, &ps, &e), KC_OK, "%s",
                 e.msg);
    cr_assert_eq(ps.cpu_seconds, 4.0);
    cr_assert_eq(ps.start_time_seconds, 1700000005.0);
    cr_assert_eq(ps.virtual_bytes, 104857600.0);
    cr_assert_eq(ps.resident_bytes, 2560.0 * 4096);

    cr_assert_eq(kc_metrics_parse_proc_stat("4242 S 1 2 3", 0, 100, 4096, &ps, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "comm") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_parse_proc_stat("1 (x) S 1 2 3\n", 0, 100, 4096, &ps, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "field 7") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_parse_proc_stat("1 (x) S 1 2 3 4 5 6 7 8 9 10 abc 0 0 0 0 0 0 0 0 0 "
                                            "0 0",
                                            0, 100, 4096, &ps, &e),
                 KC_EPARSE);
    cr_assert(strstr(e.msg, "field 14 (\"abc\")") != NULL, "%s", e.msg);
    cr_assert_eq(kc_metrics_parse_proc_stat(stat, 0, 0, 4096, &ps, &e), KC_EARG);
}
