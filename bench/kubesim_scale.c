/* kubesim_scale: loads an API server with nodes and pods and reports list and watch latencies. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "kc_client.h"
#include "kc_config.h"
#include "kc_informer.h"
#include "kc_log.h"
#include "kc_rest.h"

typedef struct bench {
    kc_client *client;
    int nodes, pods, threads;
    atomic_int next;
    atomic_int failures;
    const char *ns;
} bench;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p-th percentile of n sorted samples (nearest rank). */
static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)n + 0.5);
    if (i >= n)
        i = n - 1;
    return v[i];
}

static json_t *summary(const char *what, double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:f, s:f}", "what", what, "samples", (json_int_t)n,
                          "p50_ms", pct(v, n, 50), "p99_ms", pct(v, n, 99), "max_ms",
                          n ? v[n - 1] : 0.0, "mean_ms", n ? sum / (double)n : 0.0);
    printf("  %-44s n=%-5zu p50=%8.2f ms  p99=%8.2f ms  max=%8.2f ms\n", what, n, pct(v, n, 50),
           pct(v, n, 99), n ? v[n - 1] : 0.0);
    return j;
}

static void *create_nodes(void *arg)
{
    bench *b = arg;
    for (int i; (i = atomic_fetch_add(&b->next, 1)) < b->nodes;) {
        char name[64];
        snprintf(name, sizeof(name), "bench-node-%05d", i);
        json_t *n = json_pack(
            "{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s}}}",
            "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
            "feature.node.kubernetes.io/pci-10de.present", "true", "bench", "yes", "status",
            "capacity", "cpu", "8", "memory", "32Gi", "pods", "110", "nvidia.com/gpu", "8",
            "allocatable", "cpu", "8", "memory", "32Gi", "pods", "110", "nvidia.com/gpu", "8");
        kc_err err;
        if (kc_create(b->client, &KC_RES_NODES, NULL, n, NULL, &err) != KC_OK) {
            fprintf(stderr, "create node %s: %s\n", name, err.msg);
            atomic_fetch_add(&b->failures, 1);
        }
        json_decref(n);
    }
    return NULL;
}

static void *create_pods(void *arg)
{
    bench *b = arg;
    for (int i; (i = atomic_fetch_add(&b->next, 1)) < b->pods;) {
        char name[64], node[64];
        snprintf(name, sizeof(name), "bench-pod-%05d", i);
        snprintf(node, sizeof(node), "bench-node-%05d", i % b->nodes);
        json_t *p = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}]}}", "apiVersion",
                              "v1", "kind", "Pod", "metadata", "name", name, "labels", "app",
                              (i % 10) ? "filler" : "tenth", "spec", "nodeName", node, "containers",
                              "name", "c", "image", "registry.example/x:1");
        kc_err err;
        if (kc_create(b->client, &KC_RES_PODS, b->ns, p, NULL, &err) != KC_OK) {
            fprintf(stderr, "create pod %s: %s\n", name, err.msg);
            atomic_fetch_add(&b->failures, 1);
        }
        json_decref(p);
    }
    return NULL;
}

static double run_parallel(bench *b, void *(*fn)(void *))
{
    pthread_t th[32];
    int n = b->threads > 32 ? 32 : b->threads;
    atomic_store(&b->next, 0);
    double t0 = now_ms();
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, fn, b);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return now_ms() - t0;
}

/* ---- watch latency: an informer on a loop thread timestamps each update it sees ---- */

typedef struct watcher {
    uv_loop_t loop;
    uv_async_t stop;
    kc_informer *inf;
    pthread_mutex_t mu;
    double *lat;
    size_t nlat, cap;
} watcher;

static void on_update(kc_informer *inf, const json_t *old_obj, const json_t *new_obj, void *ud)
{
    watcher *w = ud;
    const char *t = json_string_value(json_object_get(
        json_object_get(json_object_get(new_obj, "metadata"), "annotations"), "bench/sent-ms"));
    const char *o = json_string_value(json_object_get(
        json_object_get(json_object_get(old_obj, "metadata"), "annotations"), "bench/sent-ms"));
    if (!t || (o && strcmp(o, t) == 0))
        return;
    double d = now_ms() - strtod(t, NULL);
    pthread_mutex_lock(&w->mu);
    if (w->nlat < w->cap)
        w->lat[w->nlat++] = d;
    pthread_mutex_unlock(&w->mu);
}

static void on_stop(uv_async_t *a)
{
    watcher *w = a->data;
    kc_informer_stop(w->inf);
    uv_close((uv_handle_t *)&w->stop, NULL);
}

static void *loop_main(void *arg)
{
    watcher *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_kubesim --kubeconfig FILE [--nodes N] [--pods N] [--threads N] "
                    "[--updates N] [--json FILE]\n");
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *json_out = NULL;
    bench b = {.nodes = 5000, .pods = 20000, .threads = 4, .ns = "default"};
    int updates = 500;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--kubeconfig"))
            kubeconfig = v;
        else if (!strcmp(a, "--nodes"))
            b.nodes = atoi(v);
        else if (!strcmp(a, "--pods"))
            b.pods = atoi(v);
        else if (!strcmp(a, "--threads"))
            b.threads = atoi(v);
        else if (!strcmp(a, "--updates"))
            updates = atoi(v);
        else if (!strcmp(a, "--json"))
            json_out = v;
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (!kubeconfig || b.nodes <= 0 || b.pods < 0 || b.threads <= 0) {
        usage();
        return 2;
    }
    kc_err err;
    kc_config *cfg = NULL;
    if (kc_config_load_kubeconfig(kubeconfig, NULL, &cfg, &err) != KC_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    kc_client_opts co = {.qps = -1, .timeout_ms = 120000};
    if (kc_client_new(cfg, &co, &b.client, &err) != KC_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        kc_config_free(cfg);
        return 1;
    }
    json_t *report = json_object();
    json_t *lat = json_array();
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("kubesim scale: %d nodes, %d pods, %d client threads\n", b.nodes, b.pods, b.threads);

    double t = run_parallel(&b, create_nodes);
    printf("  created %d nodes in %.1f s (%.0f/s)\n", b.nodes, t / 1e3, b.nodes / (t / 1e3));
    json_object_set_new(report, "create_nodes_per_s", json_real(b.nodes / (t / 1e3)));
    t = run_parallel(&b, create_pods);
    printf("  created %d pods in %.1f s (%.0f/s)\n", b.pods, t / 1e3, b.pods / (t / 1e3));
    json_object_set_new(report, "create_pods_per_s", json_real(b.pods ? b.pods / (t / 1e3) : 0));

    /* Let the kubelet finish starting the pods, so lists below measure a settled cluster. */
    double t_settle = now_ms();
    for (;;) {
        json_t *pending = NULL;
        kc_list_opts po = {.field_selector = "status.phase=Pending", .limit = 1};
        if (kc_list(b.client, &KC_RES_PODS, b.ns, &po, &pending, &err) != KC_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            break;
        }
        size_t left = json_array_size(json_object_get(pending, "items"));
        json_decref(pending);
        if (!left || now_ms() - t_settle > 300000)
            break;
        uv_sleep(100);
    }
    printf("  all pods Running %.1f s after the last create\n", (now_ms() - t_settle) / 1e3);
    json_object_set_new(report, "pods_running_after_s", json_real((now_ms() - t_settle) / 1e3));

    /* An informer over all pods: its initial sync is a paged list of everything. */
    watcher w = {.cap = (size_t)updates * 2};
    w.lat = calloc(w.cap, sizeof(double));
    pthread_mutex_init(&w.mu, NULL);
    uv_loop_init(&w.loop);
    uv_async_init(&w.loop, &w.stop, on_stop);
    w.stop.data = &w;
    kc_client_attach_loop(b.client, &w.loop, &err);
    kc_informer_handlers hd = {.on_update = on_update, .ud = &w};
    double t_sync0 = now_ms();
    if (kc_informer_new(b.client, &w.loop, &KC_RES_PODS, b.ns, &hd, NULL, &w.inf, &err) != KC_OK ||
        kc_informer_start(w.inf, &err) != KC_OK) {
        fprintf(stderr, "bench: informer: %s\n", err.msg);
        return 1;
    }
    pthread_t lt;
    pthread_create(&lt, NULL, loop_main, &w);
    while (!kc_informer_synced(w.inf))
        uv_sleep(5);
    double sync_ms = now_ms() - t_sync0;
    printf("  informer synced %zu pods in %.0f ms\n", kc_informer_count(w.inf), sync_ms);
    json_object_set_new(report, "informer_sync_ms", json_real(sync_ms));

    /* List latencies. */
    struct {
        const char *what;
        const kc_resource *res;
        kc_list_opts o;
        int reps;
        bool all;
    } lists[] = {
        {"list all nodes (pages of 500)", &KC_RES_NODES, {.limit = 500}, 5, true},
        {"list all pods (pages of 500)", &KC_RES_PODS, {.limit = 500}, 5, true},
        {"list pods on one node (fieldSelector)",
         &KC_RES_PODS,
         {.field_selector = "spec.nodeName=bench-node-00042"},
         50,
         false},
        {"list pods by label (app=tenth, limit 500)",
         &KC_RES_PODS,
         {.label_selector = "app=tenth", .limit = 500},
         10,
         false},
        {"get one node", &KC_RES_NODES, {0}, 200, false},
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        double *v = calloc((size_t)lists[i].reps, sizeof(double));
        for (int r = 0; r < lists[i].reps; r++) {
            json_t *out = NULL;
            double t0 = now_ms();
            kc_code rc;
            if (lists[i].res == &KC_RES_NODES && lists[i].reps == 200)
                rc = kc_get(b.client, &KC_RES_NODES, NULL, "bench-node-00007", &out, &err);
            else if (lists[i].all)
                rc = kc_list_all(b.client, lists[i].res, lists[i].res->namespaced ? b.ns : NULL,
                                 &lists[i].o, &out, &err);
            else
                rc = kc_list(b.client, lists[i].res, b.ns, &lists[i].o, &out, &err);
            v[r] = now_ms() - t0;
            if (rc != KC_OK) {
                fprintf(stderr, "bench: %s: %s\n", lists[i].what, err.msg);
                atomic_fetch_add(&b.failures, 1);
            }
            json_decref(out);
        }
        json_array_append_new(lat, summary(lists[i].what, v, (size_t)lists[i].reps));
        free(v);
    }

    /* Watch latency: annotate pods with the send time; the informer measures arrival. */
    for (int i = 0; i < updates && b.pods > 0; i++) {
        char name[64], ms[64];
        snprintf(name, sizeof(name), "bench-pod-%05d", (i * 37) % b.pods);
        snprintf(ms, sizeof(ms), "%.3f", now_ms());
        json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "bench/sent-ms", ms);
        if (kc_patch(b.client, &KC_RES_PODS, b.ns, name, KC_PATCH_MERGE, p, NULL, NULL, &err) !=
            KC_OK)
            atomic_fetch_add(&b.failures, 1);
        json_decref(p);
    }
    double deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        pthread_mutex_lock(&w.mu);
        size_t got = w.nlat;
        pthread_mutex_unlock(&w.mu);
        if (got >= (size_t)updates)
            break;
        uv_sleep(10);
    }
    pthread_mutex_lock(&w.mu);
    json_array_append_new(lat, summary("watch delivery (write → informer update)", w.lat, w.nlat));
    if (w.nlat < (size_t)updates) {
        printf("  watch: only %zu of %d updates arrived\n", w.nlat, updates);
        atomic_fetch_add(&b.failures, 1);
    }
    pthread_mutex_unlock(&w.mu);
    uv_async_send(&w.stop);
    pthread_join(lt, NULL);
    kc_informer_free(w.inf);
    kc_client_detach_loop(b.client);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    uv_loop_close(&w.loop);
    free(w.lat);
    pthread_mutex_destroy(&w.mu);

    json_object_set_new(report, "nodes", json_integer(b.nodes));
    json_object_set_new(report, "pods", json_integer(b.pods));
    json_object_set_new(report, "latencies", lat);
    json_object_set_new(report, "failures", json_integer(atomic_load(&b.failures)));
    if (json_out)
        json_dump_file(report, json_out, JSON_INDENT(2));
    int failures = atomic_load(&b.failures);
    printf("  failures: %d\n", failures);
    json_decref(report);
    kc_client_free(b.client);
    kc_config_free(cfg);
    return failures ? 1 : 0;
}
