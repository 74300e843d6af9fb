/* Torture tests of the reconcilers: each allocation and each API call of a reconcile is made to
 * fail in turn against an in-process kubesim with nodesim's nodes; no crash, no leak, and the next
 * reconcile brings the cluster to the state a clean run reaches. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_log.h"
#include "kc_rest.h"
#include "kc_yaml.h"
#include "ks_crd.h"
#include "ks_fault.h"
#include "ks_sim.h"
#include "ks_store.h"
#include "ns_fleet.h"
#include "ns_node.h"
#include "op_controller_int.h"
#include "op_policy.h"
#include "op_render.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#define NS "gpu-operator"

/* ---- allocation failure: malloc, calloc and realloc interposed for the whole process --------
 * Only the thread that armed the counter sees failures: the informers' loop and kubesim's server
 * threads allocate as usual. Everything reaches these (jansson, libcurl, OpenSSL, libyaml, libc's
 * strdup/asprintf), except what a sanitizer intercepts itself (ASan's own strdup). */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
/* dlsym may allocate before the real allocator is known. */
static _Alignas(16) char boot[16384];
static size_t boot_used;

/* The interposer runs before AddressSanitizer is initialised: it must not be instrumented. */
#define NO_ASAN __attribute__((no_sanitize_address))

#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer's allocator, under the names it also exports (dlsym would run before it is
 * initialised). */
void *__interceptor_malloc(size_t n);
void *__interceptor_calloc(size_t n, size_t size);
void *__interceptor_realloc(void *p, size_t n);
void __interceptor_free(void *p);

NO_ASAN static void resolve(void)
{
    real_malloc = __interceptor_malloc;
    real_calloc = __interceptor_calloc;
    real_realloc = __interceptor_realloc;
    real_free = __interceptor_free;
}
#else
static int resolving;

NO_ASAN static void resolve(void)
{
    if (resolving)
        return;
    resolving = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    resolving = 0;
}
#endif

NO_ASAN static void *boot_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof(boot))
        return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

NO_ASAN static bool is_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof(boot);
}

typedef struct fault_state {
    bool armed;
    long count;   /* allocations (or API calls) seen while armed */
    long fail_at; /* the one to fail (1-based); 0: none */
    bool fired;
    void *where[12]; /* the failed allocation's call stack */
    int depth;
    char call[300]; /* the failed API call */
} fault_state;

static _Thread_local fault_state fa, fh;
static _Thread_local int in_backtrace;

/* The dynamic loader's text: its allocations are not failed (a dlopen that fails half-way leaks
 * in glibc, which is no concern of the operator's). */
static uintptr_t ldso_lo, ldso_hi;

static int find_ldso(struct dl_phdr_info *info, size_t size, void *ud)
{
    (void)size;
    (void)ud;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "ld-linux"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            uintptr_t hi = lo + info->dlpi_phdr[i].p_memsz;
            if (!ldso_lo || lo < ldso_lo)
                ldso_lo = lo;
            if (hi > ldso_hi)
                ldso_hi = hi;
        }
    return 1;
}

/* Whether the allocation being made is jansson's parser's. Its lexer ignores a failure to grow
 * the text it saves (lex_save drops strbuffer_append_byte's result in jansson 2.14), then decodes
 * a string from that text past its end: a failed allocation there corrupts the heap inside
 * jansson, whatever its caller does. */
NO_ASAN static bool in_json_parser(void)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    for (int i = 0; i < n; i++) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_sname && !strncmp(info.dli_sname, "json_load", 9))
            return true;
    }
    return false;
}

NO_ASAN static bool alloc_fails(const void *caller)
{
    if (!fa.armed || in_backtrace || ((uintptr_t)caller >= ldso_lo && (uintptr_t)caller < ldso_hi))
        return false;
    if (++fa.count != fa.fail_at)
        return false;
    in_backtrace = 1;
    bool parser = in_json_parser();
    if (parser)
        fa.fail_at++; /* the next allocation fails instead */
    else
        fa.depth = backtrace(fa.where, 12);
    in_backtrace = 0;
    if (parser)
        return false;
    fa.fired = true;
    return true;
}

NO_ASAN void *malloc(size_t n)
{
    if (!real_malloc) {
        resolve();
        if (!real_malloc)
            return boot_alloc(n);
    }
    return alloc_fails(__builtin_return_address(0)) ? NULL : real_malloc(n);
}

NO_ASAN void *calloc(size_t n, size_t size)
{
    if (!real_calloc) {
        resolve();
        if (!real_calloc)
            return size && n > SIZE_MAX / size ? NULL : boot_alloc(n * size);
    }
    return alloc_fails(__builtin_return_address(0)) ? NULL : real_calloc(n, size);
}

NO_ASAN void *realloc(void *p, size_t n)
{
    if (!real_realloc)
        resolve();
    if (is_boot(p)) {
        void *q = malloc(n);
        if (q) {
            size_t avail = (size_t)(boot + sizeof(boot) - (char *)p);
            memcpy(q, p, n < avail ? n : avail);
        }
        return q;
    }
    if (n && alloc_fails(__builtin_return_address(0)))
        return NULL;
    return real_realloc(p, n);
}

NO_ASAN void free(void *p)
{
    if (!p || is_boot(p))
        return;
    if (!real_free)
        resolve();
    real_free(p);
}

/* ---- API call failure (libkube's fault hook) ---- */

static kc_code http_fault(const kc_request *req, void *ud)
{
    (void)ud;
    if (!fh.armed || ++fh.count != fh.fail_at)
        return KC_OK;
    fh.fired = true;
    snprintf(fh.call, sizeof(fh.call), "%s %s", req->method, req->path);
    return KC_EIO;
}

/* ---- the cluster: kubesim in-process, the CRD, nodesim's nodes, a ClusterPolicy ---- */

static op_states *g_states;
static char g_pki_dir[512];
/* Whether the cluster serves HTTPS (the default) or plain HTTP. The tortures make hundreds of
 * clusters, each with a score of connections: over TLS they spent most of their time in
 * handshakes. The API-call torture injects its failures in the client, above the transport, and
 * runs over plain HTTP; the allocation torture keeps TLS for its first scenario, where every
 * allocation fails in turn, so the client's TLS paths meet failed allocations too. */
static bool g_tls = true;

typedef struct env {
    ks_sim sim;
    char *cert, *key;
    kc_client *admin;
    op_controller *c;
    pthread_t loop;
    kc_code loop_rc;
} env;

static json_t *load_yaml(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(m);
    fclose(f);
    json_t *doc = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(buf, len, path, &doc, &err), KC_OK, "%s", err.msg);
    free(buf);
    return doc;
}

static void create(env *e, const kc_resource *res, const char *ns, const json_t *obj, json_t **out)
{
    kc_err err;
    kc_code rc = kc_create(e->admin, res, ns, obj, out, &err);
    cr_assert_eq(rc, KC_OK, "create %s: %s", res->resource, err.msg);
}

static void *run_loop(void *arg)
{
    env *e = arg;
    kc_err err;
    e->loop_rc = op_controller_run(e->c, &err);
    if (e->loop_rc != KC_OK)
        fprintf(stderr, "op_controller_run: %s\n", err.msg);
    return NULL;
}

static void env_up(env *e)
{
    memset(e, 0, sizeof(*e));
    kc_err err;
    e->sim.opts.listen_host = "127.0.0.1";
    e->sim.opts.http_port = g_tls ? -1 : 0;
    e->sim.opts.https_port = g_tls ? 0 : -1;
    e->sim.opts.no_controllers = true;
    e->sim.opts.dir = g_pki_dir; /* the CA and serving certificate are made once */
    e->sim.store = ks_store_new(0);
    cr_assert_not_null(e->sim.store);
    cr_assert_eq(ks_types_register_builtin(e->sim.store, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(ks_auth_new(&e->sim, &err), KC_OK, "%s", err.msg);
    if (g_tls)
        cr_assert_eq(ks_pki_init(&e->sim, &e->cert, &e->key, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(ks_server_start(&e->sim, e->cert, e->key, &err), KC_OK, "%s", err.msg);

    kc_config cfg = {0};
    cfg.server = e->sim.server_url;
    cfg.ca_pem = e->sim.ca_pem;
    cfg.ca_pem_len = e->sim.ca_pem ? strlen(e->sim.ca_pem) : 0;
    cfg.token = (char *)ks_auth_admin_token(&e->sim);
    kc_client_opts co = {.qps = -1, .max_retries = -1, .user_agent = "torture-admin/1.0"};
    cr_assert_eq(kc_client_new(&cfg, &co, &e->admin, &err), KC_OK, "%s", err.msg);

    json_t *ns = json_pack("{s:{s:s}}", "metadata", "name", NS);
    create(e, &KC_RES_NAMESPACES, NULL, ns, NULL);
    json_decref(ns);

    /* The operator's CRD, served as the API server would once it is Established. */
    json_t *crd = load_yaml(KC_SOURCE_DIR "/crds/nvidia.com_clusterpolicies.yaml"), *live = NULL;
    create(e, &KC_RES_CRDS, NULL, crd, &live);
    cr_assert_eq(ks_crd_sync(&e->sim, live, false, &err), KC_OK, "%s", err.msg);
    json_decref(crd);
    json_decref(live);

    /* Two GPU nodes and a CPU node as nodesim registers them. */
    static const char fleet_yaml[] = "nodes:\n- name: gpu\n  count: 2\n  gpu: A100-SXM4-40GB\n"
                                     "  gpus: 2\n- name: cpu\n";
    ns_fleet *fleet = NULL;
    cr_assert_eq(ns_fleet_parse(fleet_yaml, strlen(fleet_yaml), "fleet", &fleet, &err), KC_OK, "%s",
                 err.msg);
    unsigned idx = 0;
    for (size_t g = 0; g < fleet->n_groups; g++)
        for (int k = 0; k < fleet->groups[g].count; k++) {
            char name[64];
            ns_fleet_node_name(&fleet->groups[g], k, name, sizeof(name));
            json_t *node = ns_node_object(&fleet->groups[g], name, idx++);
            cr_assert_not_null(node);
            create(e, &KC_RES_NODES, NULL, node, NULL);
            json_decref(node);
        }
    ns_fleet_free(fleet);

    json_t *policy = load_yaml(KC_SOURCE_DIR "/e2e/testdata/clusterpolicy-mixed.yaml");
    create(e, &KC_RES_CLUSTERPOLICIES, NULL, policy, NULL);
    json_decref(policy);

    /* The controller as main.c builds it, with its caches running but no workers: the test
     * thread is the only one reconciling. */
    op_controller_opts oo = {.config = &cfg,
                             .ns = NS,
                             .states = g_states,
                             .operator_image = "nvcr.io/nvidia/gpu-operator:v24.9.0",
                             .workers = 1,
                             .identity = "torture"};
    cr_assert_eq(op_controller_new(&oo, &e->c, &err), KC_OK, "%s", err.msg);
    e->c->n_workers = 0;
    cr_assert_eq(pthread_create(&e->loop, NULL, run_loop, e), 0);
    for (int i = 0; i < 2000 && !op_controller_synced(e->c); i++)
        usleep(5000);
    cr_assert(op_controller_synced(e->c), "the caches did not sync");
}

/* Stops the cluster (the controller is gone already). */
static void env_down(env *e)
{
    kc_client_free(e->admin);
    ks_server_stop(&e->sim);
    ks_auth_free(&e->sim);
    ks_store_free(e->sim.store);
    free(e->sim.ca_pem);
    free(e->cert);
    free(e->key);
}

/* ---- waiting for the caches, and what a user would see of the cluster ---- */

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

/* namespace/name → resourceVersion of a list of objects. */
static json_t *versions(const json_t *items)
{
    json_t *out = json_object();
    size_t i;
    const json_t *o;
    json_array_foreach(items, i, o)
    {
        char key[400];
        snprintf(key, sizeof(key), "%s/%s", str_at(o, "metadata", "namespace") ?: "",
                 str_at(o, "metadata", "name") ?: "");
        json_object_set_new(out, key, json_string(str_at(o, "metadata", "resourceVersion") ?: ""));
    }
    return out;
}

static json_t *server_list(env *e, const kc_resource *res, const char *ns, const char *selector)
{
    kc_list_opts lo = {.label_selector = selector};
    json_t *list = NULL;
    kc_err err;
    cr_assert_eq(kc_list_all(e->admin, res, ns, &lo, &list, &err), KC_OK, "list %s: %s",
                 res->resource, err.msg);
    return list;
}

static bool cache_current(env *e, kc_informer *inf, const kc_resource *res, const char *ns,
                          const char *selector)
{
    if (!inf)
        return true;
    json_t *list = server_list(e, res, ns, selector);
    json_t *cached = kc_informer_list(inf);
    json_t *a = versions(json_object_get(list, "items")), *b = versions(cached);
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    json_decref(cached);
    json_decref(list);
    return same;
}

/* Waits until every cache of the controller shows what the server holds. */
static void settle(env *e)
{
    op_controller *c = e->c;
    const char *owned = OP_MANAGED_LABEL "=" OP_MANAGED_VALUE;
    for (int i = 0; i < 2000; i++) {
        bool ok = cache_current(e, c->policies, &KC_RES_CLUSTERPOLICIES, NULL, NULL) &&
                  cache_current(e, c->nodes, &KC_RES_NODES, NULL, NULL) &&
                  cache_current(e, c->pods, &KC_RES_PODS, NS, NULL);
        for (size_t k = 0; ok && k < c->n_kinds; k++)
            ok = cache_current(e, c->kinds[k].inf, &c->kinds[k].res,
                               c->kinds[k].res.namespaced ? NS : NULL, owned);
        if (ok)
            return;
        usleep(RUNNING_ON_VALGRIND ? 20000 : 2000);
    }
    cr_assert_fail("the caches did not catch up with the server");
}

static json_t *prefixed(const json_t *obj, const char *prefix)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) if (!strncmp(k, prefix, strlen(prefix)))
        json_object_set(out, k, v);
    return out;
}

/* FNV-1a of a string, as 16 hex digits. */
static json_t *digest(const char *text)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)h);
    return json_string(hex);
}

/* An owned object's content without what differs from one cluster to the next (identity,
 * versions, times, the owner's uid and the hash that covers it, allocated cluster IPs, status),
 * as a digest. */
static json_t *content(const json_t *obj)
{
    json_t *o = json_deep_copy(obj);
    json_t *m = json_object_get(o, "metadata");
    static const char *const volatile_meta[] = {
        "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", NULL};
    for (int i = 0; volatile_meta[i]; i++)
        json_object_del(m, volatile_meta[i]);
    json_object_del(json_object_get(m, "annotations"), OP_HASH_ANNOTATION);
    size_t i;
    json_t *ref;
    json_array_foreach(json_object_get(m, "ownerReferences"), i, ref) json_object_del(ref, "uid");
    json_object_del(json_object_get(o, "spec"), "clusterIP");
    json_object_del(json_object_get(o, "spec"), "clusterIPs");
    json_object_del(o, "status");
    char *text = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
    json_t *d = digest(text ? text : "");
    free(text);
    json_decref(o);
    return d;
}

/* What the operator wrote, as a user would compare it: each owned object's content, the
 * nodes' nvidia.com labels, annotations and cordon, the operator's pods, the ClusterPolicy's
 * finalizers and status (without timestamps). Events are left out. */
static json_t *snapshot(env *e)
{
    json_t *s = json_object();
    op_controller *c = e->c;
    for (size_t k = 0; k < c->n_kinds; k++) {
        if (!c->kinds[k].inf)
            continue;
        json_t *l = server_list(e, &c->kinds[k].res, c->kinds[k].res.namespaced ? NS : NULL,
                                OP_MANAGED_LABEL "=" OP_MANAGED_VALUE);
        size_t i;
        const json_t *o;
        json_array_foreach(json_object_get(l, "items"), i, o)
        {
            char key[400];
            snprintf(key, sizeof(key), "%s/%s", c->kinds[k].kind, str_at(o, "metadata", "name"));
            json_object_set_new(s, key, content(o));
        }
        json_decref(l);
    }
    json_t *l = server_list(e, &KC_RES_NODES, NULL, NULL);
    size_t i;
    const json_t *o;
    json_array_foreach(json_object_get(l, "items"), i, o)
    {
        char key[400];
        const json_t *m = json_object_get(o, "metadata");
        snprintf(key, sizeof(key), "Node/%s", str_at(o, "metadata", "name"));
        json_object_set_new(
            s, key,
            json_pack("{s:o, s:o, s:O*}", "labels",
                      prefixed(json_object_get(m, "labels"), "nvidia.com/"), "annotations",
                      prefixed(json_object_get(m, "annotations"), "nvidia.com/"), "unschedulable",
                      json_object_get(json_object_get(o, "spec"), "unschedulable")));
    }
    json_decref(l);
    l = server_list(e, &KC_RES_PODS, NS, NULL);
    json_array_foreach(json_object_get(l, "items"), i, o)
    {
        char key[400];
        snprintf(key, sizeof(key), "Pod/%s", str_at(o, "metadata", "name"));
        json_object_set(s, key, json_object_get(json_object_get(o, "metadata"), "labels"));
    }
    json_decref(l);
    l = server_list(e, &KC_RES_CLUSTERPOLICIES, NULL, NULL);
    json_array_foreach(json_object_get(l, "items"), i, o)
    {
        char key[400];
        snprintf(key, sizeof(key), "ClusterPolicy/%s", str_at(o, "metadata", "name"));
        json_t *st = json_deep_copy(json_object_get(o, "status"));
        size_t j;
        json_t *cond;
        json_array_foreach(json_object_get(st, "conditions"), j, cond)
            json_object_del(cond, "lastTransitionTime");
        json_object_set_new(s, key,
                            json_pack("{s:O*, s:o*}", "finalizers",
                                      json_object_get(json_object_get(o, "metadata"), "finalizers"),
                                      "status", st));
    }
    json_decref(l);
    return s;
}

/* ---- the reconciles under test ---- */

typedef enum step {
    STEP_POLICY, /* op_reconcile_policy */
    STEP_NODES,  /* op_reconcile_node for every node */
    STEP_STATUS, /* op_reconcile_status */
    STEP_DELETE, /* the user deletes the ClusterPolicy (not a reconcile) */
} step;

static const char *const node_names[] = {"gpu-0", "gpu-1", "cpu"};

/* A reconciler that requeued its key itself after a failure (backoff) asked to be run again too:
 * the delay is the queue's. */
static long requeued(env *e, long again, const char *key)
{
    if (again != OP_REQUEUED)
        return again;
    long ms = kc_workqueue_delayed_ms(e->c->q, key);
    /* A short backoff can be over before this looks (a loaded machine, ASan): the key is then
     * queued already, due now. */
    if (ms < 0 && kc_workqueue_dirty(e->c->q, key))
        return 0;
    if (ms < 0 && atomic_load(&e->c->lost_keys))
        return 10000; /* the queue could not take it: the next resync queues everything */
    cr_assert_geq(ms, 0, "%s returned OP_REQUEUED but is neither waiting nor queued", key);
    return ms;
}

/* One reconcile (or the user's delete); returns the requeue delay (the least of the nodes'). */
static long run_step(env *e, step s)
{
    long again = -1;
    switch (s) {
    case STEP_POLICY:
        again = requeued(e, op_reconcile_policy(e->c), OP_KEY_POLICY);
        break;
    case STEP_NODES:
        for (size_t i = 0; i < sizeof(node_names) / sizeof(node_names[0]); i++) {
            long a = op_reconcile_node(e->c, node_names[i], 0, 0);
            if (a >= 0 && (again < 0 || a < again))
                again = a;
        }
        /* The writes are answered on the pipe's thread; one that failed queues its node again
         * after a delay (the watch handlers' adds are immediate: they do not count). */
        kc_pipe_drain(e->c->pipe);
        for (size_t i = 0; i < sizeof(node_names) / sizeof(node_names[0]); i++) {
            char key[64];
            snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", node_names[i]);
            long a = kc_workqueue_delayed_ms(e->c->q, key);
            if (a >= 0 && (again < 0 || a < again))
                again = a;
        }
        break;
    case STEP_STATUS:
        again = requeued(e, op_reconcile_status(e->c), OP_KEY_STATUS);
        break;
    case STEP_DELETE: {
        kc_err err;
        cr_assert_eq(kc_delete(e->admin, &KC_RES_CLUSTERPOLICIES, NULL, "cluster-policy",
                               KC_PROPAGATE_BACKGROUND, NULL, &err),
                     KC_OK, "%s", err.msg);
        break;
    }
    }
    return again;
}

typedef struct scenario {
    const char *name;
    const step *setup; /* clean steps to the starting state */
    size_t n_setup;
    step torture; /* the reconcile whose allocations / calls fail in turn */
    int passes;   /* how many of it a clean run needs to finish */
    bool writes;  /* it writes many objects: under valgrind only its API calls fail */
} scenario;

static const step S_NONE[] = {STEP_POLICY};
static const step S_APPLIED[] = {STEP_POLICY, STEP_POLICY};
static const step S_LABELED[] = {STEP_POLICY, STEP_POLICY, STEP_NODES};
static const step S_DELETED[] = {STEP_POLICY, STEP_POLICY, STEP_NODES, STEP_STATUS, STEP_DELETE};

static const scenario scenarios[] = {
    /* The first reconcile only adds the finalizer. */
    {"add finalizer", NULL, 0, STEP_POLICY, 1, false},
    {"render and apply", S_NONE, 1, STEP_POLICY, 1, true},
    {"label nodes", S_APPLIED, 2, STEP_NODES, 1, false},
    {"write status", S_LABELED, 3, STEP_STATUS, 1, false},
    /* Removing operands and labels takes two passes (then the finalizer goes). */
    {"clean up on delete", S_DELETED, 5, STEP_POLICY, 2, true},
};
#define N_SCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

typedef enum mode { MODE_CLEAN, MODE_ALLOC, MODE_HTTP } mode;

typedef struct outcome {
    bool fired;         /* the N-th allocation / call happened (and failed) */
    long again;         /* what the reconcile under test asked for */
    json_t *after;      /* the cluster after the reconcile under test */
    json_t *recovered;  /* after one more (clean) reconcile; NULL for the reference run */
    json_t *final;      /* after the scenario's remaining reconciles */
    json_t *seq[4];     /* reference run: the cluster after 1, 2, ... passes + 1 reconciles */
    char what[400];     /* the failed call or allocation site */
    long allocs, calls; /* allocations and API calls the reconcile made */
    uint64_t site;      /* the failed allocation's call stack (or call), hashed */
} outcome;

static void describe_site(char *out, size_t size)
{
    /* The first two frames are the interposer; name the next ones. */
    char **sym = backtrace_symbols(fa.where, fa.depth);
    size_t l = 0;
    out[0] = '\0';
    for (int i = 2; sym && i < fa.depth && i < 7 && l < size; i++)
        l += (size_t)snprintf(out + l, size - l, "%s%s", i > 2 ? " < " : "", sym[i]);
    free(sym);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* kubesim's stop waits for its watch streams to notice their clients left (up to half a
 * second, asleep): clusters are torn down on threads of their own, a few at a time. */
#define MAX_DYING 8
static pthread_t dying[MAX_DYING];
static int n_dying;

static void *env_free_thread(void *arg)
{
    env *e = arg;
    env_down(e);
    free(e);
    return NULL;
}

static void reap_all(void)
{
    for (int i = 0; i < n_dying; i++)
        pthread_join(dying[i], NULL);
    n_dying = 0;
}

static void env_release(env *e)
{
    /* The controller goes here (its loop thread is this test's); the server asynchronously. */
    op_controller_stop(e->c);
    pthread_join(e->loop, NULL);
    cr_assert_eq(e->loop_rc, KC_OK);
    op_controller_free(e->c);
    e->c = NULL;
    if (n_dying == MAX_DYING)
        reap_all();
    if (pthread_create(&dying[n_dying], NULL, env_free_thread, e) == 0)
        n_dying++;
    else
        env_free_thread(e);
}

/* Brings up a cluster, runs the setup, then the reconcile under test (with the given failure in
 * it), then one clean reconcile, then the scenario's remaining ones; fills *o. The reference run
 * (MODE_CLEAN) skips the extra reconcile. */
static void run_scenario(const scenario *sc, mode m, long n, outcome *o)
{
    env *e = calloc(1, sizeof(*e));
    cr_assert_not_null(e);
    memset(o, 0, sizeof(*o));
    double t0 = now_s();
    env_up(e);
    double t1 = now_s();
    for (size_t i = 0; i < sc->n_setup; i++) {
        run_step(e, sc->setup[i]);
        settle(e);
    }
    memset(&fa, 0, sizeof(fa));
    memset(&fh, 0, sizeof(fh));
    /* A clean run counts both (failing none). */
    if (m == MODE_ALLOC)
        fa.fail_at = n;
    else if (m == MODE_HTTP)
        fh.fail_at = n;
    fa.armed = fh.armed = true;
    o->again = run_step(e, sc->torture);
    fa.armed = fh.armed = false;
    o->allocs = fa.count;
    o->calls = fh.count;
    o->fired = fa.fired || fh.fired;
    if (fa.fired)
        describe_site(o->what, sizeof(o->what));
    else if (fh.fired)
        snprintf(o->what, sizeof(o->what), "%s", fh.call);
    o->site = 1469598103934665603ull;
    for (int i = 2; fa.fired && i < fa.depth; i++)
        o->site = (o->site ^ (uint64_t)(uintptr_t)fa.where[i]) * 1099511628211ull;
    for (const char *p = fh.fired ? fh.call : ""; *p; p++)
        o->site = (o->site ^ (unsigned char)*p) * 1099511628211ull;
    settle(e);
    o->after = snapshot(e);
    if (m == MODE_CLEAN) {
        o->seq[0] = json_incref(o->after);
        for (int i = 1; i <= sc->passes; i++) {
            run_step(e, sc->torture);
            settle(e);
            o->seq[i] = snapshot(e);
        }
        o->final = json_incref(o->seq[sc->passes - 1]);
    } else {
        run_step(e, sc->torture);
        settle(e);
        o->recovered = snapshot(e);
        for (int i = 1; i < sc->passes; i++) {
            run_step(e, sc->torture);
            settle(e);
        }
        o->final = snapshot(e);
    }
    double t2 = now_s();
    env_release(e);
    if (getenv("KC_TORTURE_TIMES"))
        fprintf(stderr, "up %.3f run %.3f down %.3f\n", t1 - t0, t2 - t1, now_s() - t2);
}

static void outcome_clear(outcome *o)
{
    json_decref(o->after);
    json_decref(o->recovered);
    json_decref(o->final);
    for (int i = 0; i < 4; i++)
        json_decref(o->seq[i]);
}

/* The entries of a and b that differ, for a failure message (malloc'd). */
static char *diff(const json_t *got, const json_t *want)
{
    json_t *d = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)got, k, v) if (!json_equal(v, json_object_get(want, k)))
        json_object_set_new(d, k,
                            json_pack("{s:O, s:O*}", "got", v, "want", json_object_get(want, k)));
    json_object_foreach((json_t *)want, k, v) if (!json_object_get(got, k))
        json_object_set_new(d, k, json_pack("{s:n, s:O}", "got", "want", v));
    char *text = json_dumps(d, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(d);
    return text;
}

/* How many entries of a and b differ. */
static size_t n_diff(const json_t *a, const json_t *b)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v) n += !json_equal(v, json_object_get(b, k));
    json_object_foreach((json_t *)b, k, v) n += !json_object_get(a, k);
    return n;
}

/* Of the clean run's states x and y, the one closer to got. */
static const json_t *closer(const json_t *got, const json_t *x, const json_t *y)
{
    return n_diff(got, x) <= n_diff(got, y) ? x : y;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && atol(s) > 0 ? atol(s) : dflt;
}

static void setup_all(void)
{
    if (!getenv("KC_TORTURE_VERBOSE"))
        kc_log_set_level(KC_LOG_ERROR);
    const char *t = getenv("TMPDIR");
    snprintf(g_pki_dir, sizeof(g_pki_dir), "%s/kc-torture-XXXXXX", t && *t ? t : P_tmpdir);
    cr_assert_not_null(mkdtemp(g_pki_dir));
    kc_err err;
    cr_assert_eq(op_states_load(KC_SOURCE_DIR "/states", &g_states, &err), KC_OK, "%s", err.msg);
    kc_client_set_fault_hook(http_fault, NULL);
    dl_iterate_phdr(find_ldso, NULL);
    cr_assert_gt(ldso_hi, ldso_lo, "the dynamic loader was not found");
    /* backtrace() loads the unwinder on first use; that is the test's, not a leak to report. */
    void *frames[4];
#if defined(__SANITIZE_ADDRESS__)
    __lsan_disable();
#endif
    backtrace(frames, 4);
#if defined(__SANITIZE_ADDRESS__)
    __lsan_enable();
#endif
}

static void teardown_all(void)
{
    reap_all();
    kc_client_set_fault_hook(NULL, NULL);
    op_states_free(g_states);
    g_states = NULL;
    char cmd[sizeof(g_pki_dir) + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_pki_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_pki_dir);
}

/* The torture loop of one mode over every scenario: the N-th allocation (API call) fails for
 * N = 1, 2, ... until a reconcile makes fewer. With more than `budget` of them in a scenario, every
 * stride-th N is failed instead (KC_TORTURE_RUNS raises the budget; KC_TORTURE_STRIDE=1 fails
 * every one); the offset KC_TORTURE_OFFSET picks another sample. */
static void torture(mode m, long budget)
{
    const char *what = m == MODE_ALLOC ? "allocation" : "API call";
    long total = 0;
    for (size_t s = 0; s < N_SCENARIOS; s++) {
        const scenario *sc = &scenarios[s];
        g_tls = m == MODE_ALLOC && s == 0;
        const char *only = getenv("KC_TORTURE_ONLY"); /* a scenario, for debugging */
        if (only && !strstr(sc->name, only))
            continue;
        /* Under valgrind the two tests share the scenarios out: the API calls where there are
         * many, the allocations in the others. */
        if (!only && RUNNING_ON_VALGRIND && (m == MODE_HTTP) != sc->writes)
            continue;
        outcome ref;
        run_scenario(sc, MODE_CLEAN, 0, &ref);
        if (m == MODE_ALLOC && ref.allocs == 0 && RUNNING_ON_VALGRIND) {
            outcome_clear(&ref);
            reap_all();
            cr_skip_test("valgrind replaced this program's malloc, so no allocation can be made to "
                         "fail: run it with VALGRIND_OPTS=--soname-synonyms=somalloc="
                         "nouserintercepts (as ctest's valgrind lane does)");
        }
        long count = m == MODE_ALLOC ? ref.allocs : ref.calls;
        long step_n = env_long("KC_TORTURE_STRIDE", (count + budget - 1) / budget);
        if (step_n < 1)
            step_n = 1;
        long fired = 0;
        size_t n_sites = 0, cap = 0;
        uint64_t *sites = NULL; /* distinct call stacks (calls) failed */
        for (long n = 1 + env_long("KC_TORTURE_OFFSET", 0) % step_n;; n += step_n) {
            outcome o;
            run_scenario(sc, m, n, &o);
            if (!o.fired) {
                outcome_clear(&o);
                break;
            }
            fired++;
            size_t j = 0;
            while (j < n_sites && sites[j] != o.site)
                j++;
            if (j == n_sites) {
                if (n_sites == cap) {
                    cap = cap ? 2 * cap : 64;
                    sites = realloc(sites, cap * sizeof(*sites));
                    cr_assert_not_null(sites);
                }
                sites[n_sites++] = o.site;
            }
            /* A reconcile that could not finish must ask to be run again. (A failure after a
             * write was made, e.g. reading its response, leaves the cluster a step ahead: the
             * clean run's state after one more reconcile is as good.) */
            if (!json_equal(o.after, ref.seq[0]) && !json_equal(o.after, ref.seq[1]) &&
                o.again < 0) {
                char *d = diff(o.after, closer(o.after, ref.seq[0], ref.seq[1]));
                cr_expect_fail("%s: %s #%d (%s) failed: the reconcile left the cluster unfinished "
                               "and did not ask to be run again: %s",
                               sc->name, what, (int)n, o.what, d);
                free(d);
            }
            /* The next reconcile recovers: the cluster is as after one clean reconcile, and
             * the rest of the scenario ends where the clean run ends. */
            if (!json_equal(o.recovered, ref.seq[0]) && !json_equal(o.recovered, ref.seq[1])) {
                char *d = diff(o.recovered, closer(o.recovered, ref.seq[0], ref.seq[1]));
                cr_expect_fail("%s: %s #%d (%s) failed: the next reconcile did not recover: %s",
                               sc->name, what, (int)n, o.what, d);
                free(d);
            } else if (!json_equal(o.final, ref.seq[sc->passes - 1]) &&
                       !json_equal(o.final, ref.seq[sc->passes])) {
                char *d =
                    diff(o.final, closer(o.final, ref.seq[sc->passes - 1], ref.seq[sc->passes]));
                cr_expect_fail("%s: %s #%d (%s) failed: the cluster did not end as a clean run's: "
                               "%s",
                               sc->name, what, (int)n, o.what, d);
                free(d);
            }
            outcome_clear(&o);
        }
        fprintf(stderr,
                "torture: %s: %ld of %ld %ss failed in turn (every %ld), %zu distinct call "
                "stacks\n",
                sc->name, fired, count, what, step_n, n_sites);
        free(sites);
        total += fired;
        outcome_clear(&ref);
    }
    cr_assert_gt(total, 0);
}

TestSuite(op_torture, .init = setup_all, .fini = teardown_all, .timeout = 900);

Test(op_torture, every_api_call_fails_in_turn)
{
    torture(MODE_HTTP, env_long("KC_TORTURE_RUNS", RUNNING_ON_VALGRIND ? 1 : 1000));
}

Test(op_torture, allocations_fail_in_turn)
{
    torture(MODE_ALLOC, env_long("KC_TORTURE_RUNS", RUNNING_ON_VALGRIND ? 1 : 40));
}

/* The node's writes are remembered until the caches show them: a reconcile that runs before
 * the watch brings them (another pod of the node changed) must not send the same label patch
 * and pod creations again. kubesim cuts the operator's node watch and holds its next one for
 * 3 s, so the node cache stays as it was meanwhile; nothing runs the pods in this cluster, so
 * nothing else changes. */
/* The operator's watches of resource are cut and held back delay_ms each time they resume, as
 * under load. */
static void hold_watch(env *e, const char *resource, int delay_ms)
{
    json_t *rules =
        json_pack("{s:[{s:{s:s, s:[s]}, s:s, s:i}, {s:{s:s, s:[s], s:[s]}, s:s, s:i}]}", "rules",
                  "match", "userAgent", "gpu-operator@torture", "resources", resource, "action",
                  "cutWatch", "afterEvents", 0, "match", "userAgent", "gpu-operator@torture",
                  "verbs", "watch", "resources", resource, "action", "delay", "delayMs", delay_ms);
    kc_err err;
    cr_assert_eq(ks_faults_install(&e->sim, rules, &err), KC_OK, "%s", err.msg);
    json_decref(rules);
    usleep(1000 * 1000); /* open streams are cut within 0.5 s */
}

/* A cluster whose operands (DaemonSets) the operator has applied, every cache current. */
static env *env_with_daemonsets(void)
{
    env *e = calloc(1, sizeof(*e));
    cr_assert_not_null(e);
    env_up(e);
    for (int i = 0; i < 2; i++) {
        run_step(e, STEP_POLICY);
        settle(e);
    }
    return e;
}

/* The same with the ClusterPolicy status written. */
static env *env_with_status(void)
{
    env *e = env_with_daemonsets();
    run_step(e, STEP_STATUS);
    settle(e);
    return e;
}

/* A DaemonSet (nothing scheduled yet: ready), the first or the one named, now wants a pod it
 * does not have. */
static void ds_named_wants_a_pod(env *e, const char *name)
{
    json_t *list = NULL;
    kc_err err;
    cr_assert_eq(kc_list(e->admin, &KC_RES_DAEMONSETS, NS, NULL, &list, &err), KC_OK, "%s",
                 err.msg);
    json_t *items = json_object_get(list, "items"), *pick = json_array_get(items, 0), *d;
    size_t i;
    json_array_foreach(items, i,
                       d) if (name && !strcmp(str_at(json_object_get(d, "metadata"), "name", NULL),
                                              name)) pick = d;
    json_t *ds = json_deep_copy(pick);
    json_decref(list);
    cr_assert_not_null(ds);
    json_object_set_new(ds, "status",
                        json_pack("{s:i, s:i, s:i, s:i}", "desiredNumberScheduled", 1,
                                  "numberAvailable", 0, "numberUnavailable", 1,
                                  "updatedNumberScheduled", 0));
    cr_assert_eq(kc_update_status(e->admin, &KC_RES_DAEMONSETS, NS, ds, NULL, &err), KC_OK, "%s",
                 err.msg);
    json_decref(ds);
}

static void ds_wants_a_pod(env *e)
{
    ds_named_wants_a_pod(e, NULL);
}

Test(op_torture, no_duplicate_writes_before_the_caches_catch_up)
{
    env *e = env_with_daemonsets();
    hold_watch(e, "nodes", 3000);
    memset(&fh, 0, sizeof(fh));
    fh.armed = true;
    op_reconcile_node(e->c, "gpu-0", 0, 0);
    kc_pipe_drain(e->c->pipe);
    long calls = fh.count;
    cr_assert_geq(calls, 1, "the first reconcile labels the node: %ld requests", calls);
    op_reconcile_node(e->c, "gpu-0", 0, 0);
    kc_pipe_drain(e->c->pipe);
    fh.armed = false;
    cr_assert_eq(fh.count, calls,
                 "the reconcile before the caches caught up wrote again: %ld "
                 "more requests",
                 fh.count - calls);
    /* A node that is not reconciled again does not keep its expectation: the periodic sweep
     * drops it once the node cache has caught up with the label patch's resourceVersion (once
     * the faults go and the watch comes back), and not before. */
    cr_assert_eq(op_expect_sweep(e->c, 0), 0, "a current expectation was swept");
    json_t *want = op_expect_describe(e->c, "gpu-0");
    cr_assert_not_null(want);
    json_decref(want);
    ks_faults_clear(&e->sim);
    size_t swept = 0;
    for (int i = 0; i < 100 && !swept; i++) {
        usleep(100 * 1000);
        swept = op_expect_sweep(e->c, 0);
    }
    cr_assert_eq(swept, 1, "the expectation outlived the caches' catching up");
    pthread_mutex_lock(&e->c->mu);
    cr_assert_eq(kc_map_size(e->c->expect), 0);
    pthread_mutex_unlock(&e->c->mu);
    env_release(e);
    reap_all();
}

/* A reconcile that only creates a pod, while the label an earlier one wrote has not reached the
 * node cache, keeps that label expected: the next reconcile must not send it again (seen at
 * 1,000 nodes: about 6 % of the nodes got their toolkit label twice). */
Test(op_torture, later_writes_keep_what_earlier_ones_expect)
{
    env *e = calloc(1, sizeof(*e));
    cr_assert_not_null(e);
    env_up(e);
    json_t *l1 = json_pack("{s:s}", "nvidia.com/gpu.deploy.container-toolkit", "true");
    json_t *none = json_array();
    op_expect_record(e->c, "gpu-0", l1, NULL, none, none, 1);
    json_t *pod = json_pack("[{s:{s:s, s:{s:s}}}]", "metadata", "name", "toolkit-validator",
                            "labels", "app", "v");
    op_expect_record(e->c, "gpu-0", NULL, NULL, pod, none, 1);
    json_t *d = op_expect_describe(e->c, "gpu-0");
    cr_assert_not_null(d);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(d, "labels"),
                                                       "nvidia.com/gpu.deploy.container-toolkit")),
                     "true", "the earlier label was dropped: %s", json_dumps(d, 0));
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(d, "created"), 0)),
                     "toolkit-validator");
    json_decref(d);
    /* A later label and the deletion of that pod: both labels expected, the pod only as
     * deleted. */
    json_t *l2 = json_pack("{s:s, s:n}", "nvidia.com/gpu.deploy.device-plugin", "true",
                           "nvidia.com/gpu.deploy.container-toolkit");
    json_t *del = json_pack("[s]", "toolkit-validator");
    op_expect_record(e->c, "gpu-0", l2, NULL, none, del, 2);
    d = op_expect_describe(e->c, "gpu-0");
    json_t *labels = json_object_get(d, "labels");
    cr_assert_eq(json_object_size(labels), 2, "%s", json_dumps(d, 0));
    cr_assert(json_is_null(json_object_get(labels, "nvidia.com/gpu.deploy.container-toolkit")),
              "the later removal wins");
    cr_assert_eq(json_array_size(json_object_get(d, "created")), 0, "%s", json_dumps(d, 0));
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(d, "deleted"), 0)),
                     "toolkit-validator");
    json_decref(d);
    /* Writes never answered keep it until the limit (120 s); past it, nothing is folded: a new
     * record starts afresh. */
    cr_assert_eq(op_expect_sweep(e->c, 119000), 0);
    cr_assert_eq(op_expect_sweep(e->c, 120001), 1);
    op_expect_record(e->c, "gpu-0", NULL, NULL, pod, none, 1);
    d = op_expect_describe(e->c, "gpu-0");
    cr_assert_eq(json_object_size(json_object_get(d, "labels")), 0, "%s", json_dumps(d, 0));
    json_decref(d);
    json_decref(l1);
    json_decref(l2);
    json_decref(pod);
    json_decref(del);
    json_decref(none);
    env_release(e);
    reap_all();
}

/* The states' readiness in the ClusterPolicy's status, "name=ready" joined, from the server. */
static void states_seen(env *e, char *out, size_t size)
{
    json_t *cp = NULL;
    kc_err err;
    cr_assert_eq(kc_get(e->admin, &KC_RES_CLUSTERPOLICIES, NULL, "cluster-policy", &cp, &err),
                 KC_OK, "%s", err.msg);
    size_t i, l = 0;
    json_t *s;
    out[0] = '\0';
    json_array_foreach(json_object_get(json_object_get(cp, "status"), "states"), i, s)
    {
        if (l < size)
            l += (size_t)snprintf(out + l, size - l, "%s=%d ", str_at(s, "name", NULL),
                                  json_is_true(json_object_get(s, "ready")));
    }
    json_decref(cp);
}

/* In a rollout each operand state's DaemonSet turns ready and not ready again with every node its
 * pods reach (several times a second over a thousand nodes): a state's readiness is progress,
 * written at most once per progress interval, as the counts of nodes are; whether the whole
 * ClusterPolicy is ready is not (seen at 1,000 nodes: 270 status writes in a 38 s rollout, each
 * one a synchronous request of the reconciler, instead of 29). */
Test(op_torture, a_states_readiness_waits_for_the_progress_interval)
{
    env *e = env_with_status();
    char before[2048], after[2048];
    states_seen(e, before, sizeof(before));
    cr_assert(strstr(before, "=1 "), "no state is ready to turn not ready: %s", before);
    /* A ready state's DaemonSet (desired 0: nothing scheduled yet) now wants a pod. */
    ds_wants_a_pod(e);
    settle(e);
    /* Just written: the change waits (the interval is 200 ms for two GPU nodes). */
    e->c->status_written_ms = op_mono_ms();
    memset(&fh, 0, sizeof(fh));
    fh.armed = true;
    long again = run_step(e, STEP_STATUS);
    fh.armed = false;
    cr_assert_eq(fh.count, 0, "a state's readiness was written at once (%ld requests)", fh.count);
    cr_assert(again > 0 && again <= 200, "not asked again within the interval: %ld", again);
    states_seen(e, after, sizeof(after));
    cr_assert_str_eq(after, before);
    /* Once the interval is over, it is written. */
    e->c->status_written_ms = op_mono_ms() - 201;
    fh.armed = true;
    run_step(e, STEP_STATUS);
    fh.armed = false;
    cr_assert_geq(fh.count, 1, "the change was never written");
    states_seen(e, after, sizeof(after));
    cr_assert_str_neq(after, before);
    env_release(e);
    reap_all();
}

/* Under load the operator's watch of the ClusterPolicy lags its own status writes by seconds:
 * the next status is compared with, and written on top of, what the last write got back, not the
 * cached copy that would differ by that write and only conflict (seen at 1,000 nodes: 200 of 230
 * status writes were conflicts, retried every 100 ms until the watch caught up). */
Test(op_torture, status_writes_do_not_wait_for_the_policy_watch)
{
    env *e = env_with_status();
    hold_watch(e, "clusterpolicies", 5000);
    /* A DaemonSet now wants a pod: the status changes. */
    ds_wants_a_pod(e);
    char before[2048], after[2048];
    states_seen(e, before, sizeof(before));
    memset(&fh, 0, sizeof(fh));
    fh.armed = true;
    for (int i = 0; i < 500 && fh.count == 0; i++) {
        e->c->status_written_ms = 0;
        run_step(e, STEP_STATUS);
        if (fh.count == 0)
            usleep(10 * 1000);
    }
    fh.armed = false;
    cr_assert_eq(fh.count, 1, "the DaemonSet's change was not written once: %ld requests",
                 fh.count);
    states_seen(e, after, sizeof(after));
    cr_assert_str_neq(after, before, "the write did not land");
    /* The policy cache still holds the status before that write: nothing more to write. */
    e->c->status_written_ms = 0;
    fh.armed = true;
    long again = run_step(e, STEP_STATUS);
    fh.armed = false;
    cr_assert_eq(fh.count, 1, "a status write from the stale cache (%ld requests, again %ld)",
                 fh.count, again);
    ks_faults_clear(&e->sim);
    env_release(e);
    reap_all();
}

/* The image pre-pull's DaemonSet is reported with the states, but a node it has not reached
 * holds nothing back: the Ready condition's message names the driver's DaemonSet among the
 * states not ready, not the pre-pull's. */
Test(op_torture, the_image_prepull_is_shown_not_waited_for)
{
    env *e = env_with_status();
    run_step(e, STEP_NODES);
    settle(e);
    ds_named_wants_a_pod(e, "nvidia-image-prepull");
    ds_named_wants_a_pod(e, "nvidia-driver-daemonset");
    settle(e);
    e->c->status_written_ms = 0;
    run_step(e, STEP_STATUS);
    char seen[2048];
    states_seen(e, seen, sizeof(seen));
    cr_assert(strstr(seen, "state-image-prepull=0 "), "%s", seen);
    json_t *cp = NULL;
    kc_err err;
    cr_assert_eq(kc_get(e->admin, &KC_RES_CLUSTERPOLICIES, NULL, "cluster-policy", &cp, &err),
                 KC_OK, "%s", err.msg);
    const char *msg = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(cp, "status"), "conditions"), i, c)
    {
        const char *t = str_at(c, "type", NULL);
        if (t && !strcmp(t, "Ready"))
            msg = str_at(c, "message", NULL);
    }
    cr_assert_not_null(msg);
    cr_assert(strstr(msg, "states not ready: state-driver (0/1 nodes)"), "%s", msg);
    cr_assert_null(strstr(msg, "state-image-prepull"), "%s", msg);
    json_decref(cp);
    env_release(e);
    reap_all();
}
