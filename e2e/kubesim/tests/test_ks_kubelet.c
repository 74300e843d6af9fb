/* Tests for kubesim's kubelet: node registration and heartbeats, the pod lifecycle (Pending →
 * Running → Ready, init containers, extended-resource admission, node readiness), mapped images
 * run as real processes (exit codes, logs, env and downward API, restarts, probes, deletion),
 * never overwriting an outcome another writer decided, and image pulls (registries, back-off,
 * the pull-time model with serialized or parallel pulls, a pod's pulls in container order). */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#include <time.h>
#include <unistd.h>

#include "kc_base64.h"
#include "ks_auth.h"
#include "ks_kubelet.h"
#include "ks_pki.h"
#include "ks_sim.h"
#include "testsrv.h"

/* Generous: under valgrind every mapped /bin/sh runs under valgrind too. */
#define WAIT_MS 30000

static char tdir[64];
static char mapfile[128];
static ks_sim *S;
static const ks_rtype *T_PODS, *T_NODES;

static void setup(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/kskubelet.XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
    snprintf(mapfile, sizeof(mapfile), "%s/images.yaml", tdir);
    /* An image whose files live under tdir (0700, as mkdtemp makes it): its program (a copy of
     * /bin/sh) and a data file named by its env. */
    char img[300], prog[320], data[320], map[2048];
    snprintf(img, sizeof(img), "%s/img", tdir);
    snprintf(prog, sizeof(prog), "%s/sh", img);
    snprintf(data, sizeof(data), "%s/data.txt", img);
    cr_assert_eq(mkdir(img, 0755), 0);
    FILE *in = fopen("/bin/sh", "rb"), *out = fopen(prog, "wb");
    cr_assert(in && out);
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), in)) > 0)
        cr_assert_eq(fwrite(chunk, 1, got, out), got);
    fclose(in);
    fclose(out);
    cr_assert_eq(chmod(prog, 0755), 0);
    cr_assert_eq(ks_pki_write_file(data, "in the image\n", 13, 0644, NULL), KC_OK);
    snprintf(map, sizeof(map),
             "images:\n"
             "- image: \"local/sh*\"\n"
             "  program: /bin/sh\n"
             "- image: \"local/echo-prefix:*\"\n"
             "  program: /bin/echo\n"
             "  args_prefix: [\"--from-map\"]\n"
             "- image: \"local/nonroot*\"\n"
             "  program: /bin/sh\n"
             "  user: \"1000:1000\"\n"
             "- image: \"local/hidden*\"\n"
             "  program: %s\n"
             "  env: {DATA: %s}\n",
             prog, data);
    cr_assert_eq(ks_pki_write_file(mapfile, map, strlen(map), 0644, NULL), KC_OK);
    S = calloc(1, sizeof(*S));
    S->opts.dir = tdir;
    S->opts.node_heartbeat_s = 1;
    S->opts.image_map = mapfile;
    S->opts.any_image = true; /* the suite "pull" checks the registries */
    S->store = ks_store_new(0);
    kc_err e = {0};
    cr_assert_eq(ks_types_register_builtin(S->store, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(ks_auth_new(S, &e), KC_OK, "%s", e.msg);
    S->ca_pem = strdup("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n");
    S->server_url = strdup("https://127.0.0.1:6443");
    T_PODS = ks_store_type(S->store, "", "v1", "pods");
    T_NODES = ks_store_type(S->store, "", "v1", "nodes");
}

static void start(int start_ms, int ready_ms)
{
    S->opts.pod_start_ms = start_ms;
    S->opts.pod_ready_ms = ready_ms;
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_start(S, &e), KC_OK, "%s", e.msg);
    ks_kubelet_tuning t = {.grace_cap_ms = 300, .backoff_ms = 100, .backoff_max_ms = 400};
    ks_kubelet_tune(S, &t);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void teardown(void)
{
    ks_kubelet_stop(S);
    ks_auth_free(S);
    ks_store_free(S->store);
    free(S->ca_pem);
    free(S->server_url);
    free(S);
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(kubelet, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(proc);

/* ---- helpers ---- */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    cr_assert_not_null(o, "bad test JSON (%s): %s", je.text, text);
    return o;
}

static void add_node(const char *text)
{
    json_t *n = parse(text);
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_add_node(S, n, &e), KC_OK, "%s", e.msg);
    json_decref(n);
}

static void create(const char *resource, const char *text)
{
    const ks_rtype *t = ks_store_type(S->store, "", "v1", resource);
    kc_err e = {0};
    cr_assert_eq(ks_create(S->store, t, "default", parse(text), NULL, &e), KC_OK, "%s", e.msg);
}

static json_t *get_pod(const char *name)
{
    json_t *o = NULL;
    if (ks_get(S->store, T_PODS, "default", name, &o, NULL) != KC_OK)
        return NULL;
    return o;
}

/* A dotted path into obj; numeric segments index arrays. */
static const json_t *jpath(const json_t *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL;
    for (char *seg = strtok_r(buf, ".", &save); seg && o; seg = strtok_r(NULL, ".", &save)) {
        if (json_is_array(o))
            o = json_array_get(o, (size_t)atoi(seg));
        else
            o = json_object_get(o, seg);
    }
    return o;
}

static const char *jstr(const json_t *o, const char *path)
{
    return json_string_value(jpath(o, path));
}

static const char *cond(const json_t *pod, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(jpath(pod, "status.conditions"), i,
                       c) if (!strcmp(json_string_value(json_object_get(c, "type")),
                                      type)) return json_string_value(json_object_get(c, "status"));
    return NULL;
}

typedef bool (*pod_pred)(const json_t *pod, const void *arg);

static json_t *wait_pod(const char *name, pod_pred pred, const void *arg, const char *what)
{
    long long end = now_ms() + WAIT_MS;
    json_t *last = NULL;
    while (now_ms() < end) {
        json_decref(last);
        last = get_pod(name);
        if (last && pred(last, arg))
            return last;
        usleep(20000);
    }
    char *dump = last ? json_dumps(last, JSON_INDENT(1)) : NULL;
    cr_assert_fail("pod %s never got %s; last state: %s", name, what, dump ? dump : "(gone)");
    return NULL;
}

static bool phase_is(const json_t *pod, const void *arg)
{
    const char *p = jstr(pod, "status.phase");
    return p && !strcmp(p, arg);
}

static bool is_ready(const json_t *pod, const void *arg)
{
    const char *s = cond(pod, "Ready");
    return s && !strcmp(s, arg);
}

static bool restarted(const json_t *pod, const void *arg)
{
    return json_integer_value(jpath(pod, "status.containerStatuses.0.restartCount")) >=
           *(const int *)arg;
}

static char *logs_of(const char *pod)
{
    char *out = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_logs(S, "default", pod, NULL, -1, &out, NULL, &e), KC_OK, "%s", e.msg);
    return out;
}

static char *wait_log(const char *pod, const char *needle)
{
    long long end = now_ms() + WAIT_MS;
    while (now_ms() < end) {
        char *out = NULL;
        if (ks_kubelet_logs(S, "default", pod, NULL, -1, &out, NULL, NULL) == KC_OK &&
            strstr(out, needle))
            return out;
        free(out);
        usleep(20000);
    }
    cr_assert_fail("log of %s never showed %s", pod, needle);
    return NULL;
}

#define NODE_N1 "{\"metadata\":{\"name\":\"n1\"}}"

/* ---- nodes ---- */

Test(kubelet, add_node_registers_a_full_node_and_a_renewed_lease)
{
    start(0, 0);
    add_node("{\"metadata\":{\"name\":\"g1\",\"labels\":{\"pool\":\"a\"}},\"status\":"
             "{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"nvidia.com/gpu\":\"2\"}}}");
    json_t *n = NULL;
    cr_assert_eq(ks_get(S->store, T_NODES, NULL, "g1", &n, NULL), KC_OK);
    cr_assert_str_eq(jstr(n, "metadata.labels.pool"), "a");
    cr_assert_str_eq(
        json_string_value(json_object_get(jpath(n, "metadata.labels"), "kubernetes.io/hostname")),
        "g1");
    cr_assert_str_eq(jstr(n, "status.capacity.cpu"), "4");
    cr_assert_str_eq(jstr(n, "status.capacity.pods"), "110");
    cr_assert_str_eq(
        json_string_value(json_object_get(jpath(n, "status.allocatable"), "nvidia.com/gpu")), "2");
    cr_assert_str_eq(jstr(n, "status.nodeInfo.kubeletVersion"), "v1.32.0");
    cr_assert_str_eq(jstr(n, "status.nodeInfo.containerRuntimeVersion"), "containerd://1.7.0");
    cr_assert_str_eq(jstr(n, "status.nodeInfo.architecture"), "amd64");
    cr_assert_str_eq(jstr(n, "status.nodeInfo.operatingSystem"), "linux");
    cr_assert_str_eq(jstr(n, "status.addresses.0.type"), "InternalIP");
    cr_assert(!strncmp(jstr(n, "status.addresses.0.address"), "10.0.", 5));
    cr_assert_str_eq(jstr(n, "status.addresses.1.type"), "Hostname");
    cr_assert_str_eq(cond(n, "Ready"), "True");
    size_t i;
    json_t *c;
    json_array_foreach(jpath(n, "status.conditions"), i,
                       c) if (!strcmp(json_string_value(json_object_get(c, "type")), "Ready"))
        cr_assert_str_eq(json_string_value(json_object_get(c, "reason")), "KubeletReady");
    json_decref(n);
    const ks_rtype *lt = ks_store_type(S->store, "coordination.k8s.io", "v1", "leases");
    json_t *lease = NULL;
    cr_assert_eq(ks_get(S->store, lt, "kube-node-lease", "g1", &lease, NULL), KC_OK);
    cr_assert_str_eq(jstr(lease, "spec.holderIdentity"), "g1");
    char *first = strdup(jstr(lease, "spec.renewTime"));
    json_decref(lease);
    long long end = now_ms() + WAIT_MS;
    bool renewed = false;
    while (!renewed && now_ms() < end) {
        usleep(100000);
        cr_assert_eq(ks_get(S->store, lt, "kube-node-lease", "g1", &lease, NULL), KC_OK);
        renewed = strcmp(jstr(lease, "spec.renewTime"), first) != 0;
        json_decref(lease);
    }
    cr_assert(renewed, "the lease was never renewed");
    free(first);
    kc_err e = {0};
    json_t *dup = parse("{\"metadata\":{\"name\":\"g1\"}}");
    cr_assert_eq(ks_kubelet_add_node(S, dup, &e), KC_EALREADYEXISTS);
    json_decref(dup);
    json_t *noname = parse("{\"metadata\":{}}");
    cr_assert_eq(ks_kubelet_add_node(S, noname, &e), KC_EINVALID);
    cr_assert_not_null(strstr(e.msg, "metadata.name"));
    json_decref(noname);
}

/* ---- pod lifecycle ---- */

Test(kubelet, bound_pod_goes_pending_then_running_and_ready)
{
    start(300, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.25\"}]}}");
    json_t *p = wait_pod("p", phase_is, "Pending", "phase Pending");
    cr_assert_str_eq(cond(p, "PodScheduled"), "True");
    cr_assert_null(jpath(p, "status.podIP"));
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.reason"),
                     "ContainerCreating");
    json_decref(p);
    p = wait_pod("p", phase_is, "Running", "phase Running");
    json_t *node = NULL;
    cr_assert_eq(ks_get(S->store, T_NODES, NULL, "n1", &node, NULL), KC_OK);
    cr_assert_str_eq(jstr(p, "status.hostIP"), jstr(node, "status.addresses.0.address"));
    json_decref(node);
    cr_assert(!strncmp(jstr(p, "status.podIP"), "10.244.", 7), "%s", jstr(p, "status.podIP"));
    cr_assert_not_null(jstr(p, "status.startTime"));
    const json_t *cs = jpath(p, "status.containerStatuses.0");
    cr_assert_str_eq(jstr(cs, "name"), "c");
    cr_assert_str_eq(jstr(cs, "image"), "nginx:1.25");
    cr_assert_not_null(strstr(jstr(cs, "imageID"), "nginx@sha256:"));
    cr_assert(!strncmp(jstr(cs, "containerID"), "containerd://", 13));
    cr_assert(json_is_true(jpath(cs, "ready")));
    cr_assert(json_is_true(jpath(cs, "started")));
    cr_assert_eq(json_integer_value(jpath(cs, "restartCount")), 0);
    cr_assert_not_null(jstr(cs, "state.running.startedAt"));
    cr_assert_str_eq(cond(p, "Ready"), "True");
    cr_assert_str_eq(cond(p, "ContainersReady"), "True");
    cr_assert_str_eq(cond(p, "Initialized"), "True");
    json_decref(p);
    /* The kubelet's events for kubectl describe. */
    const ks_rtype *et = ks_store_type(S->store, "", "v1", "events");
    json_t *items = NULL;
    cr_assert_eq(ks_list(S->store, et, "default", NULL, &items, NULL, NULL, NULL), KC_OK);
    bool started = false;
    size_t i;
    json_t *ev;
    json_array_foreach(items, i, ev) started =
        started ||
        (!strcmp(jstr(ev, "reason"), "Started") && !strcmp(jstr(ev, "involvedObject.name"), "p"));
    json_decref(items);
    cr_assert(started, "no Started event");
}

Test(kubelet, init_containers_complete_and_ready_waits_for_the_delay)
{
    start(0, 500);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox\"}],"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}");
    json_t *p = wait_pod("p", phase_is, "Running", "phase Running");
    long long seen = now_ms();
    cr_assert_str_eq(jstr(p, "status.initContainerStatuses.0.state.terminated.reason"),
                     "Completed");
    cr_assert_eq(json_integer_value(jpath(p, "status.initContainerStatuses.0.state.terminated."
                                             "exitCode")),
                 0);
    cr_assert_str_eq(cond(p, "Initialized"), "True");
    cr_assert_str_eq(cond(p, "Ready"), "False");
    json_decref(p);
    p = wait_pod("p", is_ready, "True", "Ready");
    cr_assert(now_ms() - seen > 200, "ready after %lld ms only", now_ms() - seen);
    json_decref(p);
}

Test(kubelet, unbound_external_and_unknown_node_pods)
{
    start(0, 0);
    add_node("{\"metadata\":{\"name\":\"ext\",\"labels\":{\"kubesim.io/external\":\"true\"}}}");
    create("pods", "{\"metadata\":{\"name\":\"free\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"x\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"onext\"},\"spec\":{\"nodeName\":\"ext\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"later\"},\"spec\":{\"nodeName\":\"late\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    usleep(400000);
    const char *names[] = {"free", "onext", "later"};
    for (int i = 0; i < 3; i++) {
        json_t *p = get_pod(names[i]);
        cr_assert_null(jpath(p, "status.phase"), "%s got a phase", names[i]);
        json_decref(p);
    }
    add_node("{\"metadata\":{\"name\":\"late\"}}");
    json_decref(wait_pod("later", phase_is, "Running", "Running once its node exists"));
}

Test(kubelet, extended_resources_beyond_the_node_fail_the_pod)
{
    start(0, 0);
    add_node("{\"metadata\":{\"name\":\"g1\"},\"status\":{\"capacity\":{\"nvidia.com/gpu\":"
             "\"1\"}}}");
    add_node(NODE_N1);
    const char *fmt = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"%s\","
                      "\"containers\":[{\"name\":\"c\",\"image\":\"cuda\",\"resources\":"
                      "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}";
    char buf[512];
    snprintf(buf, sizeof(buf), fmt, "a", "g1");
    create("pods", buf);
    json_decref(wait_pod("a", phase_is, "Running", "Running"));
    snprintf(buf, sizeof(buf), fmt, "b", "g1");
    create("pods", buf);
    json_t *p = wait_pod("b", phase_is, "Failed", "Failed");
    cr_assert_str_eq(jstr(p, "status.reason"), "OutOfnvidia.com/gpu");
    cr_assert_not_null(strstr(jstr(p, "status.message"), "requested: 1, used: 1, capacity: 1"),
                       "%s", jstr(p, "status.message"));
    json_decref(p);
    snprintf(buf, sizeof(buf), fmt, "c", "n1");
    create("pods", buf);
    p = wait_pod("c", phase_is, "Failed", "Failed");
    cr_assert_not_null(strstr(jstr(p, "status.message"), "capacity: 0"));
    json_decref(p);
}

Test(kubelet, a_pod_bound_by_node_name_with_a_taken_host_port_is_rejected)
{
    start(0, 0);
    add_node(NODE_N1);
    const char *fmt = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"n1\","
                      "\"containers\":[{\"name\":\"c\",\"image\":\"cuda\",\"ports\":"
                      "[{\"containerPort\":80,\"hostPort\":%d}]}]}}";
    char buf[512];
    snprintf(buf, sizeof(buf), fmt, "a", 9000);
    create("pods", buf);
    json_decref(wait_pod("a", phase_is, "Running", "Running"));
    snprintf(buf, sizeof(buf), fmt, "b", 9000);
    create("pods", buf);
    json_t *p = wait_pod("b", phase_is, "Failed", "Failed");
    cr_assert_str_eq(jstr(p, "status.reason"), "NodePorts");
    cr_assert_str_eq(jstr(p, "status.message"),
                     "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports "
                     "for the requested pod ports");
    json_decref(p);
    snprintf(buf, sizeof(buf), fmt, "c", 9001);
    create("pods", buf);
    json_decref(wait_pod("c", phase_is, "Running", "Running"));
}

static kc_code set_gpus(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    char n[16];
    snprintf(n, sizeof(n), "%d", *(const int *)ud);
    json_t *st = json_object_get(obj, "status");
    json_object_set_new(json_object_get(st, "capacity"), "nvidia.com/gpu", json_string(n));
    json_object_set_new(json_object_get(st, "allocatable"), "nvidia.com/gpu", json_string(n));
    return KC_OK;
}

/* A device plugin's new devices count for a pod created right after they were published: the
 * kubelet never admits against an older view of the node than the API server shows. */
Test(kubelet, a_pod_created_right_after_new_devices_is_admitted)
{
    start(0, 0);
    add_node("{\"metadata\":{\"name\":\"g2\"}}");
    const ks_rtype *tn = ks_store_type(S->store, "", "v1", "nodes");
    const char *fmt = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"g2\","
                      "\"containers\":[{\"name\":\"c\",\"image\":\"cuda\",\"resources\":"
                      "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}";
    enum { N = 40 };
    for (int i = 1; i <= N; i++) {
        kc_err e = {0};
        cr_assert_eq(ks_mutate(S->store, tn, NULL, "g2", KS_WRITE_STATUS, set_gpus, &i, NULL, &e),
                     KC_OK, "%s", e.msg);
        char name[16], buf[512];
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(buf, sizeof(buf), fmt, name);
        create("pods", buf);
    }
    for (int i = 1; i <= N; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%d", i);
        json_decref(wait_pod(name, phase_is, "Running", "Running"));
    }
}

static kc_code set_node_ready(void *ud, json_t *obj, kc_err *err)
{
    size_t i;
    json_t *c;
    json_array_foreach(jpath(obj, "status.conditions"), i,
                       c) if (!strcmp(json_string_value(json_object_get(c, "type")), "Ready"))
        json_object_set_new(c, "status", json_string(ud));
    return KC_OK;
}

Test(kubelet, node_not_ready_makes_its_pods_unready)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    json_decref(wait_pod("p", is_ready, "True", "Ready"));
    cr_assert_eq(ks_mutate(S->store, T_NODES, NULL, "n1", KS_WRITE_STATUS, set_node_ready, "False",
                           NULL, NULL),
                 KC_OK);
    json_t *p = wait_pod("p", is_ready, "False", "Ready=False");
    cr_assert_str_eq(cond(p, "ContainersReady"), "True");
    cr_assert_str_eq(jstr(p, "status.phase"), "Running");
    json_decref(p);
    cr_assert_eq(ks_mutate(S->store, T_NODES, NULL, "n1", KS_WRITE_STATUS, set_node_ready, "True",
                           NULL, NULL),
                 KC_OK);
    json_decref(wait_pod("p", is_ready, "True", "Ready again"));
}

static kc_code finish_pod(void *ud, json_t *obj, kc_err *err)
{
    json_t *st = json_object_get(obj, "status");
    json_object_set_new(st, "phase", json_string("Succeeded"));
    json_object_set_new(st, "reason", json_string("DecidedByTest"));
    return KC_OK;
}

Test(kubelet, a_phase_set_by_another_writer_is_not_overwritten)
{
    start(0, 600);
    add_node(NODE_N1);
    create("pods",
           "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
           "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    json_decref(wait_pod("p", phase_is, "Running", "Running"));
    cr_assert_eq(
        ks_mutate(S->store, T_PODS, "default", "p", KS_WRITE_STATUS, finish_pod, NULL, NULL, NULL),
        KC_OK);
    /* The ready delay fires meanwhile: the kubelet must not write over the outcome. */
    usleep(1000000);
    json_t *p = get_pod("p");
    cr_assert_str_eq(jstr(p, "status.phase"), "Succeeded");
    cr_assert_str_eq(jstr(p, "status.reason"), "DecidedByTest");
    cr_assert_str_neq(cond(p, "Ready"), "True");
    json_decref(p);
}

/* ---- mapped images: real processes ---- */

Test(kubelet, mapped_image_exit_code_fails_the_pod_with_its_logs)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":"
                   "\"local/sh:1\",\"command\":[\"sh\",\"-c\",\"echo hello; echo oops >&2; exit "
                   "3\"]}]}}");
    json_t *p = wait_pod("p", phase_is, "Failed", "Failed");
    const json_t *t = jpath(p, "status.containerStatuses.0.state.terminated");
    cr_assert_eq(json_integer_value(json_object_get(t, "exitCode")), 3);
    cr_assert_str_eq(jstr(t, "reason"), "Error");
    cr_assert_not_null(jstr(t, "finishedAt"));
    cr_assert_str_eq(cond(p, "Ready"), "False");
    json_decref(p);
    char *log = logs_of("p");
    cr_assert_not_null(strstr(log, "hello\n"), "%s", log);
    cr_assert_not_null(strstr(log, "oops\n"), "%s", log);
    free(log);
    char path[256], *file = NULL;
    snprintf(path, sizeof(path), "%s/logs/default_p_c.log", tdir);
    cr_assert_eq(ks_pki_read_file(path, &file, NULL, NULL), KC_OK);
    cr_assert_not_null(strstr(file, "hello"));
    free(file);
}

Test(kubelet, args_prefix_and_args_reach_the_program)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"restartPolicy\":\"OnFailure\",\"containers\":[{\"name\":\"c\",\"image\":"
                   "\"local/echo-prefix:v1\",\"args\":[\"a1\",\"$(MSG)\"],\"env\":[{\"name\":"
                   "\"MSG\",\"value\":\"hi\"}]}]}}");
    json_decref(wait_pod("p", phase_is, "Succeeded", "Succeeded"));
    char *log = logs_of("p");
    cr_assert_str_eq(log, "--from-map a1 hi\n");
    free(log);
}

Test(kubelet, env_downward_api_secrets_configmaps_and_token)
{
    start(0, 0);
    add_node(NODE_N1);
    char *b64 = kc_base64_encode((const unsigned char *)"sekret", 6);
    char buf[256];
    snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"s\"},\"data\":{\"k\":\"%s\"}}", b64);
    free(b64);
    create("secrets", buf);
    create("configmaps", "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"k\":\"cmval\"}}");
    create("pods",
           "{\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":\"demo\"}},\"spec\":{"
           "\"nodeName\":\"n1\",\"serviceAccountName\":\"op\",\"restartPolicy\":\"Never\","
           "\"containers\":[{\"name\":\"c\",\"image\":\"local/sh\",\"command\":[\"/bin/sh\","
           "\"-c\"],\"args\":[\"echo NAME=$POD_NAME NS=$POD_NAMESPACE NODE=$NODE_NAME "
           "IP=$POD_IP LBL=$LBL EXP=$EXP SEC=$SEC CM=$CM CMK=$CM_k "
           "HOST=$KUBERNETES_SERVICE_HOST PORT=$KUBERNETES_SERVICE_PORT; cat "
           "$KC_INCLUSTER_ROOT/namespace; echo; echo TOKEN=$(cat $KC_INCLUSTER_ROOT/token)\"],"
           "\"envFrom\":[{\"prefix\":\"CM_\",\"configMapRef\":{\"name\":\"cm\"}}],"
           "\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
           "\"metadata.name\"}}},{\"name\":\"POD_NAMESPACE\",\"valueFrom\":{\"fieldRef\":"
           "{\"fieldPath\":\"metadata.namespace\"}}},{\"name\":\"NODE_NAME\",\"valueFrom\":"
           "{\"fieldRef\":{\"fieldPath\":\"spec.nodeName\"}}},{\"name\":\"POD_IP\","
           "\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"status.podIP\"}}},{\"name\":\"LBL\","
           "\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.labels['app']\"}}},"
           "{\"name\":\"PLAIN\",\"value\":\"v1\"},{\"name\":\"EXP\",\"value\":\"$(PLAIN)-x\"},"
           "{\"name\":\"SEC\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}},"
           "{\"name\":\"CM\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"cm\",\"key\":"
           "\"k\"}}}]}]}}");
    json_t *p = wait_pod("p", phase_is, "Succeeded", "Succeeded");
    char want[256];
    snprintf(want, sizeof(want),
             "NAME=p NS=default NODE=n1 IP=%s LBL=demo EXP=v1-x SEC=sekret CM=cmval CMK=cmval "
             "HOST=127.0.0.1 PORT=6443\ndefault\n",
             jstr(p, "status.podIP"));
    json_decref(p);
    char *log = logs_of("p");
    cr_assert_not_null(strstr(log, want), "got:\n%s\nwant:\n%s", log, want);
    char *tok = strstr(log, "TOKEN=");
    cr_assert_not_null(tok);
    tok += 6;
    tok[strcspn(tok, "\n")] = '\0';
    char hdr[200];
    snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
    ks_user u;
    cr_assert_eq(ks_auth_authenticate(S, hdr, &u, NULL), KC_OK, "token %s", tok);
    cr_assert_str_eq(u.name, "system:serviceaccount:default:op");
    free(log);
}

static bool waiting_reason_is(const json_t *pod, const void *arg)
{
    const char *r = jstr(pod, "status.containerStatuses.0.state.waiting.reason");
    return r && !strcmp(r, arg);
}

Test(kubelet, a_missing_secret_is_a_config_error)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods",
           "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
           "[{\"name\":\"c\",\"image\":\"local/sh\",\"command\":[\"sh\"],\"env\":[{\"name\":"
           "\"X\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"nope\",\"key\":\"k\"}}}]}]}}");
    json_t *p = wait_pod("p", waiting_reason_is, "CreateContainerConfigError", "config error");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"),
                     "secret \"nope\" not found");
    cr_assert_str_eq(jstr(p, "status.phase"), "Pending");
    json_decref(p);
}

Test(kubelet, crashing_container_restarts_with_backoff)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
                   "[{\"name\":\"c\",\"image\":\"local/sh\",\"command\":[\"sh\",\"-c\","
                   "\"echo run; exit 2\"]}]}}");
    int two = 2;
    json_t *p = wait_pod("p", restarted, &two, "two restarts");
    cr_assert_str_eq(jstr(p, "status.phase"), "Running");
    cr_assert_eq(
        json_integer_value(jpath(p, "status.containerStatuses.0.lastState.terminated.exitCode")),
        2);
    json_decref(p);
    char *log = wait_log("p", "run\nrun\n");
    free(log);
}

Test(kubelet, failing_init_container_fails_a_never_pod)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"restartPolicy\":\"Never\",\"initContainers\":[{\"name\":\"i\",\"image\":"
                   "\"local/sh\",\"command\":[\"sh\",\"-c\",\"exit 1\"]}],\"containers\":[{"
                   "\"name\":\"c\",\"image\":\"x\"}]}}");
    json_t *p = wait_pod("p", phase_is, "Failed", "Failed");
    cr_assert_eq(
        json_integer_value(jpath(p, "status.initContainerStatuses.0.state.terminated.exitCode")),
        1);
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.reason"), "PodInitializing");
    cr_assert_str_eq(cond(p, "Initialized"), "False");
    json_decref(p);
}

static int pid_from_log(const char *pod)
{
    char *log = wait_log(pod, "pid=");
    int pid = atoi(strstr(log, "pid=") + 4);
    free(log);
    cr_assert(pid > 1);
    return pid;
}

static bool wait_gone(int pid)
{
    long long end = now_ms() + WAIT_MS;
    while (now_ms() < end) {
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return true;
        usleep(20000);
    }
    return false;
}

/* "$$$$": the kubelet turns "$$" into "$", so the shell sees "$$" (its pid). */
#define SLEEPER                                                                                    \
    "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":"     \
    "\"c\",\"image\":\"local/sh\",\"command\":[\"sh\",\"-c\",\"echo pid=$$$$; exec sleep "         \
    "60\"]}]}}"

Test(kubelet, deleting_a_pod_kills_its_process_and_removes_it)
{
    start(0, 0);
    add_node(NODE_N1);
    char buf[512];
    snprintf(buf, sizeof(buf), SLEEPER, "p");
    create("pods", buf);
    json_decref(wait_pod("p", phase_is, "Running", "Running"));
    int pid = pid_from_log("p");
    cr_assert_eq(kill(pid, 0), 0);
    json_t *out = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_delete(S->store, T_PODS, "default", "p", NULL, &out, &e), KC_OK, "%s", e.msg);
    cr_assert_not_null(jpath(out, "metadata.deletionTimestamp"), "bound pods delete gracefully");
    json_decref(out);
    long long end = now_ms() + WAIT_MS;
    json_t *p;
    while ((p = get_pod("p")) && now_ms() < end) {
        json_decref(p);
        usleep(20000);
    }
    cr_assert_null(p, "the kubelet never removed the pod");
    cr_assert(wait_gone(pid), "process %d survived its pod", pid);
}

Test(kubelet, stopping_the_kubelet_kills_its_processes)
{
    start(0, 0);
    add_node(NODE_N1);
    char buf[512];
    snprintf(buf, sizeof(buf), SLEEPER, "p");
    create("pods", buf);
    int pid = pid_from_log("p");
    ks_kubelet_stop(S);
    cr_assert(wait_gone(pid), "process %d survived the kubelet", pid);
}

static atomic_int health = 200;

static void health_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    int code = atomic_load(&health);
    ts_respond(conn, strcmp(req->path, "/healthz") == 0 ? code : 404, "text/plain", "ok", NULL);
}

/* Creates pod p on n1: a local process sleeping a minute, with `fields` (more container fields,
 * a printf format given the health server's port). */
static void create_sleeper(const char *fields, int port)
{
    char more[512], buf[1024];
    snprintf(more, sizeof(more), fields, port);
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{"
             "\"name\":\"c\",\"image\":\"local/sh\",\"command\":[\"sh\",\"-c\",\"exec sleep "
             "60\"],%s}]}}",
             more);
    create("pods", buf);
}

Test(kubelet, readiness_probe_drives_ready)
{
    ts_server *srv = ts_start(health_handler, NULL, NULL);
    cr_assert_not_null(srv);
    start(0, 0);
    add_node(NODE_N1);
    create_sleeper("\"ports\":[{\"name\":\"health\",\"containerPort\":%d}],\"readinessProbe\":{"
                   "\"httpGet\":{\"path\":\"/healthz\",\"port\":\"health\"},\"periodSeconds\":1,"
                   "\"failureThreshold\":1}",
                   ts_port(srv));
    json_decref(wait_pod("p", is_ready, "True", "Ready from the probe"));
    atomic_store(&health, 503);
    json_t *p = wait_pod("p", is_ready, "False", "unready after the probe fails");
    cr_assert_str_eq(jstr(p, "status.phase"), "Running");
    json_decref(p);
    ks_kubelet_stop(S);
    ts_stop(srv);
}

Test(kubelet, liveness_failures_restart_the_container)
{
    ts_server *srv = ts_start(health_handler, NULL, NULL);
    cr_assert_not_null(srv);
    start(0, 0);
    add_node(NODE_N1);
    create_sleeper("\"livenessProbe\":{\"httpGet\":{\"path\":\"/dead\",\"port\":%d},"
                   "\"periodSeconds\":1,\"failureThreshold\":2}",
                   ts_port(srv));
    int one = 1;
    json_t *p = wait_pod("p", restarted, &one, "a restart after failed liveness probes");
    /* SIGTERM from the kubelet: 128 + 15 (137 would mean the grace period ran out and the
     * process was killed). */
    char last[512] = "(none)";
    size_t n = json_dumpb(jpath(p, "status.containerStatuses.0.lastState"), last, sizeof(last) - 1,
                          JSON_COMPACT);
    if (n > 0 && n < sizeof(last))
        last[n] = '\0';
    json_int_t code =
        json_integer_value(jpath(p, "status.containerStatuses.0.lastState.terminated.exitCode"));
    cr_assert_eq(code, 143, "exit code %lld, expected 143 (SIGTERM); lastState %s", (long long)code,
                 last);
    json_decref(p);
    ks_kubelet_stop(S);
    ts_stop(srv);
}

static kc_code set_probe_answer(void *ud, json_t *obj, kc_err *err)
{
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "nodesim.io/probes", ud);
    json_object_update_recursive(obj, patch);
    json_decref(patch);
    return KC_OK;
}

static void answer_probes(const char *pod, const char *answer)
{
    kc_err e = {0};
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", pod, KS_WRITE_MAIN, set_probe_answer,
                           (void *)answer, NULL, &e),
                 KC_OK, "%s", e.msg);
}

/* The Warning events of pod, "reason: message" joined by newlines (caller frees). */
static char *warnings_of(const char *pod)
{
    const ks_rtype *et = ks_store_type(S->store, "", "v1", "events");
    json_t *items = NULL;
    cr_assert_eq(ks_list(S->store, et, "default", NULL, &items, NULL, NULL, NULL), KC_OK);
    size_t cap = 1, len = 0, i;
    char *out = calloc(1, cap);
    json_t *ev;
    json_array_foreach(items, i, ev)
    {
        if (strcmp(jstr(ev, "involvedObject.name"), pod) || strcmp(jstr(ev, "type"), "Warning"))
            continue;
        char line[1024];
        int n = snprintf(line, sizeof(line), "%s: %s\n", jstr(ev, "reason"), jstr(ev, "message"));
        out = realloc(out, cap += (size_t)n);
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    json_decref(items);
    return out;
}

#define NODE_NODESIM                                                                               \
    "{\"metadata\":{\"name\":\"g1\",\"annotations\":{\"kubesim.io/managed-by\":\"nodesim\"}},"     \
    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"

Test(kubelet, startup_probe_of_a_simulated_container_waits_for_nodesims_answer)
{
    S->opts.probe_scale = 0.01; /* 60 s → 0.6 s, 10 s → 0.1 s */
    start(0, 0);
    add_node(NODE_NODESIM);
    create("pods",
           "{\"metadata\":{\"name\":\"drv\"},\"spec\":{\"nodeName\":\"g1\",\"containers\":[{"
           "\"name\":\"nvidia-driver-ctr\",\"image\":\"nvcr.io/nvidia/driver:1\","
           "\"startupProbe\":{\"exec\":{\"command\":[\"nvidia-smi\"]},"
           "\"initialDelaySeconds\":60,\"periodSeconds\":10,\"failureThreshold\":120}}]}}");
    json_decref(wait_pod("drv", phase_is, "Running", "phase Running"));
    usleep(1000 * 1000);
    json_t *p = get_pod("drv");
    cr_assert_str_eq(cond(p, "Ready"), "False");
    cr_assert(json_is_false(jpath(p, "status.containerStatuses.0.started")));
    json_decref(p);
    char *w = warnings_of("drv");
    cr_assert_not_null(strstr(w, "Unhealthy: Startup probe failed: no answer from the container"),
                       "%s", w);
    free(w);
    answer_probes("drv", "{\"nvidia-driver-ctr\":\"NVIDIA kernel module not loaded\"}");
    usleep(300 * 1000);
    w = warnings_of("drv");
    cr_assert_not_null(strstr(w, "Startup probe failed: NVIDIA kernel module not loaded"), "%s", w);
    free(w);
    cr_assert_str_eq(cond(p = get_pod("drv"), "Ready"), "False");
    json_decref(p);
    answer_probes("drv", "{\"nvidia-driver-ctr\":\"ok\"}");
    p = wait_pod("drv", is_ready, "True", "Ready once nodesim answers ok");
    cr_assert(json_is_true(jpath(p, "status.containerStatuses.0.started")));
    cr_assert_eq(json_integer_value(jpath(p, "status.containerStatuses.0.restartCount")), 0);
    json_decref(p);
}

Test(kubelet, simulated_liveness_and_readiness_follow_nodesims_answer)
{
    S->opts.probe_scale = 0.01;
    start(0, 0);
    add_node(NODE_NODESIM);
    create("pods", "{\"metadata\":{\"name\":\"d\",\"annotations\":{\"nodesim.io/probes\":"
                   "\"{\\\"c\\\":\\\"ok\\\"}\"}},\"spec\":{\"nodeName\":\"g1\",\"containers\":[{"
                   "\"name\":\"c\",\"image\":\"nvcr.io/nvidia/cloud-native/dcgm:4\","
                   "\"readinessProbe\":{\"tcpSocket\":{\"port\":5555},\"periodSeconds\":10},"
                   "\"livenessProbe\":{\"tcpSocket\":{\"port\":5555},\"periodSeconds\":10,"
                   "\"failureThreshold\":3}}]}}");
    json_decref(wait_pod("d", is_ready, "True", "Ready from the readiness probe"));
    answer_probes("d", "{\"c\":\"connection refused\"}");
    json_decref(wait_pod("d", is_ready, "False", "unready after 3 failed readiness probes"));
    int one = 1;
    json_t *p = wait_pod("d", restarted, &one, "a restart after 3 failed liveness probes");
    cr_assert_eq(
        json_integer_value(jpath(p, "status.containerStatuses.0.lastState.terminated.exitCode")),
        137);
    json_decref(p);
    char *w = warnings_of("d");
    cr_assert_not_null(strstr(w, "Liveness probe failed: connection refused"), "%s", w);
    cr_assert_not_null(strstr(w, "Readiness probe failed: connection refused"), "%s", w);
    /* Killed by its liveness probe, it waited out the back-off like any container that ended. */
    cr_assert_not_null(
        strstr(w, "BackOff: Back-off restarting failed container c in pod d_default"), "%s", w);
    free(w);
}

Test(kubelet, simulated_probes_pass_on_a_plain_node_after_the_initial_delay)
{
    S->opts.probe_scale = 0.01;
    start(0, 0);
    add_node(NODE_N1);
    /* Before the creation: under valgrind the container may start before create() returns. */
    long long t0 = now_ms();
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{"
                   "\"name\":\"c\",\"image\":\"nginx:1\",\"startupProbe\":{\"exec\":{\"command\":"
                   "[\"true\"]},\"initialDelaySeconds\":50,\"periodSeconds\":10}}]}}");
    json_decref(wait_pod("p", is_ready, "True", "Ready after the startup probe"));
    cr_assert_geq(now_ms() - t0, 450, "Ready before the startup probe's initial delay");
    char *w = warnings_of("p");
    cr_assert_str_eq(w, "");
    free(w);
}

static kc_code set_init_answer(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "nodesim.io/init", ud);
    json_object_update_recursive(obj, patch);
    json_decref(patch);
    return KC_OK;
}

static bool init_running(const json_t *pod, const void *arg)
{
    (void)arg;
    return jpath(pod, "status.initContainerStatuses.0.state.running") != NULL;
}

/* On nodesim's nodes nodesim plays the runtime for simulated init containers: NVIDIA's wait for
 * toolkit-ready keeps running (Init:0/1) until nodesim answers that it exited; then the pod
 * runs. */
Test(kubelet, simulated_init_container_on_a_nodesim_node_runs_until_nodesim_answers)
{
    start(0, 0);
    add_node(NODE_NODESIM);
    create("pods",
           "{\"metadata\":{\"name\":\"dp\"},\"spec\":{\"nodeName\":\"g1\",\"initContainers\":[{"
           "\"name\":\"toolkit-validation\",\"image\":\"nvcr.io/nvidia/gpu-operator:v25.3.0\","
           "\"command\":[\"sh\",\"-c\"],\"args\":[\"until [ -f /run/nvidia/validations/"
           "toolkit-ready ]; do echo waiting; sleep 5; done\"]}],\"containers\":[{\"name\":\"c\","
           "\"image\":\"nvcr.io/nvidia/k8s-device-plugin:v0.17.0\"}]}}");
    json_decref(wait_pod("dp", init_running, NULL, "its init container Running"));
    kc_err e = {0};
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", "dp", KS_WRITE_MAIN, set_init_answer,
                           "{\"toolkit-validation\":\"waiting for toolkit-ready\"}", NULL, &e),
                 KC_OK, "%s", e.msg);
    usleep(500 * 1000);
    json_t *p = get_pod("dp");
    cr_assert_str_eq(jstr(p, "status.phase"), "Pending");
    cr_assert_not_null(jpath(p, "status.initContainerStatuses.0.state.running"));
    cr_assert(json_is_false(jpath(p, "status.initContainerStatuses.0.ready")));
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.reason"), "PodInitializing");
    json_decref(p);
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", "dp", KS_WRITE_MAIN, set_init_answer,
                           "{\"toolkit-validation\":\"ok\"}", NULL, &e),
                 KC_OK, "%s", e.msg);
    p = wait_pod("dp", phase_is, "Running", "Running once nodesim answers ok");
    cr_assert_str_eq(jstr(p, "status.initContainerStatuses.0.state.terminated.reason"),
                     "Completed");
    cr_assert_eq(
        json_integer_value(jpath(p, "status.initContainerStatuses.0.state.terminated.exitCode")),
        0);
    json_decref(p);
}

static bool init_restarted_twice(const json_t *pod, const void *arg)
{
    (void)arg;
    return json_integer_value(jpath(pod, "status.initContainerStatuses.0.restartCount")) >= 2;
}

/* nodesim answers that a simulated init container exited with a failure ("exit N: TEXT"): it
 * terminates with that code, and the kubelet restarts it with its back-off until nodesim answers
 * otherwise. TEXT is what it printed: its terminated state's message only with
 * terminationMessagePolicy FallbackToLogsOnError, as a real kubelet does. */
Test(kubelet, simulated_init_container_that_nodesim_fails_crash_loops)
{
    start(0, 0);
    add_node(NODE_NODESIM);
    create("pods",
           "{\"metadata\":{\"name\":\"tk\"},\"spec\":{\"nodeName\":\"g1\",\"initContainers\":[{"
           "\"name\":\"driver-validation\",\"image\":\"ghcr.io/gpu-operator/gpu-operator-validator:"
           "0.1.0\",\"command\":[\"gpu-validator\"],\"args\":[\"--mode\",\"driver\"],"
           "\"terminationMessagePolicy\":\"FallbackToLogsOnError\"}],"
           "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s/container-toolkit:"
           "v1.17.0-ubuntu20.04\"}]}}");
    json_decref(wait_pod("tk", init_running, NULL, "its init container Running"));
    kc_err e = {0};
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", "tk", KS_WRITE_MAIN, set_init_answer,
                           "{\"driver-validation\":\"exit 2: gpu-validator: no NVIDIA driver: "
                           "libcuda.so.1: cannot open shared object file\"}",
                           NULL, &e),
                 KC_OK, "%s", e.msg);
    json_t *p = wait_pod("tk", init_restarted_twice, NULL, "restarted with the back-off");
    cr_assert_str_eq(jstr(p, "status.phase"), "Pending");
    cr_assert_eq(json_integer_value(
                     jpath(p, "status.initContainerStatuses.0.lastState.terminated.exitCode")),
                 2);
    cr_assert_str_eq(jstr(p, "status.initContainerStatuses.0.lastState.terminated.reason"),
                     "Error");
    cr_assert_str_eq(jstr(p, "status.initContainerStatuses.0.lastState.terminated.message"),
                     "gpu-validator: no NVIDIA driver: libcuda.so.1: cannot open shared object "
                     "file");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.reason"), "PodInitializing");
    json_decref(p);
    char *w = warnings_of("tk");
    cr_assert(strstr(w, "BackOff: Back-off restarting failed container driver-validation"), "%s",
              w);
    free(w);
    /* The default policy (File), with nothing written to the termination log: no message. */
    create("pods",
           "{\"metadata\":{\"name\":\"tk2\"},\"spec\":{\"nodeName\":\"g1\",\"initContainers\":[{"
           "\"name\":\"driver-validation\",\"image\":\"ghcr.io/gpu-operator/gpu-operator-validator:"
           "0.1.0\",\"command\":[\"gpu-validator\"],\"args\":[\"--mode\",\"driver\"]}],"
           "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s/container-toolkit:"
           "v1.17.0-ubuntu20.04\"}]}}");
    json_decref(wait_pod("tk2", init_running, NULL, "its init container Running"));
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", "tk2", KS_WRITE_MAIN, set_init_answer,
                           "{\"driver-validation\":\"exit 2: gpu-validator: no NVIDIA driver\"}",
                           NULL, &e),
                 KC_OK, "%s", e.msg);
    p = wait_pod("tk2", init_restarted_twice, NULL, "restarted with the back-off");
    cr_assert_eq(json_integer_value(
                     jpath(p, "status.initContainerStatuses.0.lastState.terminated.exitCode")),
                 2);
    cr_assert_null(jpath(p, "status.initContainerStatuses.0.lastState.terminated.message"));
    json_decref(p);
    /* What it printed is in its log either way. */
    char *out = NULL;
    cr_assert_eq(ks_kubelet_logs(S, "default", "tk2", "driver-validation", 1, &out, NULL, &e),
                 KC_OK, "%s", e.msg);
    cr_assert_str_eq(out, "gpu-validator: no NVIDIA driver\n");
    free(out);
    /* Fixed: the next run passes and the pod runs. */
    cr_assert_eq(ks_mutate(S->store, T_PODS, "default", "tk", KS_WRITE_MAIN, set_init_answer,
                           "{\"driver-validation\":\"ok\"}", NULL, &e),
                 KC_OK, "%s", e.msg);
    json_decref(wait_pod("tk", phase_is, "Running", "Running once nodesim answers ok"));
}

Test(kubelet, startup_probe_gates_a_local_process)
{
    ts_server *srv = ts_start(health_handler, NULL, NULL);
    cr_assert_not_null(srv);
    atomic_store(&health, 503);
    start(0, 0);
    add_node(NODE_N1);
    create_sleeper("\"startupProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":%d},"
                   "\"periodSeconds\":1,\"failureThreshold\":30}",
                   ts_port(srv));
    json_decref(wait_pod("p", phase_is, "Running", "phase Running"));
    usleep(1500 * 1000);
    json_t *p = get_pod("p");
    cr_assert_str_eq(cond(p, "Ready"), "False");
    json_decref(p);
    atomic_store(&health, 200);
    json_decref(wait_pod("p", is_ready, "True", "Ready once the startup probe passes"));
    ks_kubelet_stop(S);
    ts_stop(srv);
}

/* ---- logs ---- */

Test(kubelet, logs_errors_tail_and_cap)
{
    start(5000, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
                   "[{\"name\":\"c\",\"image\":\"x\"},{\"name\":\"d\",\"image\":\"x\"}]}}");
    json_decref(wait_pod("p", phase_is, "Pending", "Pending"));
    char *out = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_logs(S, "default", "nope", NULL, -1, &out, NULL, &e), KC_ENOTFOUND);
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "zz", -1, &out, NULL, &e), KC_EBADREQUEST);
    cr_assert_str_eq(e.msg, "container zz is not valid for pod p");
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "d", -1, &out, NULL, &e), KC_EBADREQUEST);
    cr_assert_str_eq(e.msg, "container \"d\" in pod \"p\" is waiting to start: ContainerCreating");
    ks_kubelet_append_log(S, "default", "p", "d", "a\nb\nc\n", 6);
    size_t len = 0;
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "d", 2, &out, &len, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(out, "b\nc\n");
    cr_assert_eq(len, 4);
    free(out);
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "d", 0, &out, NULL, &e), KC_OK);
    cr_assert_str_eq(out, "");
    free(out);
    /* Container omitted: the first one, which has no log and is waiting. */
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", NULL, -1, &out, NULL, &e), KC_EBADREQUEST);
    ks_kubelet_tuning t = {.log_cap = 64};
    ks_kubelet_tune(S, &t);
    for (int i = 0; i < 20; i++) {
        char line[16];
        snprintf(line, sizeof(line), "line %02d\n", i);
        ks_kubelet_append_log(S, "default", "p", "c", line, strlen(line));
    }
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "c", -1, &out, &len, &e), KC_OK);
    cr_assert(len <= 64 && len > 0, "%zu bytes kept", len);
    cr_assert_eq(strncmp(out, "line ", 5), 0, "%s", out);
    cr_assert_not_null(strstr(out, "line 19\n"));
    free(out);
}

/* ---- ks_proc units ---- */

Test(proc, expand_follows_kubernetes_rules)
{
    char *env[] = {"A=1", "LONG_NAME=two", NULL};
    struct {
        const char *in, *out;
    } cases[] = {{"$(A)", "1"},    {"x$(LONG_NAME)y", "xtwoy"},
                 {"$(B)", "$(B)"}, {"$$(A)", "$(A)"},
                 {"$A", "$A"},     {"$(A", "$(A"},
                 {"a$$b", "a$b"},  {"", ""}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *r = ks_proc_expand(cases[i].in, env);
        cr_assert_str_eq(r, cases[i].out, "expand(%s)", cases[i].in);
        free(r);
    }
}

Test(proc, argv_replaces_the_command_entrypoint)
{
    char *prefix[] = {"--p", NULL};
    char *noenv[] = {NULL};
    ks_image_map_entry m = {
        .pattern = "*", .program = "/bin/prog", .args_prefix = prefix, .env = noenv};
    json_t *c = parse("{\"command\":[\"/manager\",\"--x\"],\"args\":[\"--y=$(V)\"]}");
    char *env[] = {"V=7", NULL};
    char **argv = ks_proc_build_argv(c, &m, env);
    const char *want[] = {"/bin/prog", "--p", "--x", "--y=7", NULL};
    for (int i = 0; want[i]; i++)
        cr_assert_str_eq(argv[i], want[i]);
    cr_assert_null(argv[4]);
    ks_proc_strv_free(argv);
    json_decref(c);
    c = parse("{\"args\":[\"a\"]}");
    argv = ks_proc_build_argv(c, &m, env);
    cr_assert_str_eq(argv[2], "a");
    cr_assert_null(argv[3]);
    ks_proc_strv_free(argv);
    json_decref(c);
}

Test(proc, quantities)
{
    double v;
    cr_assert(ks_quantity_parse("500m", &v) && v == 0.5);
    cr_assert(ks_quantity_parse("2", &v) && v == 2);
    cr_assert(ks_quantity_parse("1Gi", &v) && v == 1073741824.0);
    cr_assert(ks_quantity_parse("3k", &v) && v == 3000);
    cr_assert_not(ks_quantity_parse("1X", &v));
    cr_assert_not(ks_quantity_parse("", &v));
    cr_assert_not(ks_quantity_parse("abc", &v));
}

Test(proc, image_map_load_match_and_errors)
{
    char dir[] = "/tmp/ksmap.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/m.yaml", dir);
    const char *ok = "images:\n- image: \"ghcr.io/x/op*\"\n  program: /bin/true\n  env: {A: 1}\n";
    cr_assert_eq(ks_pki_write_file(path, ok, strlen(ok), 0644, NULL), KC_OK);
    ks_image_map m;
    kc_err e = {0};
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(m.n, 1);
    cr_assert_not_null(ks_image_map_match(&m, "ghcr.io/x/operator:v1"));
    cr_assert_null(ks_image_map_match(&m, "ghcr.io/y/operator:v1"));
    cr_assert_str_eq(m.entries[0].env[0], "A=1");
    ks_image_map_free(&m);
    const char *rel = "images:\n- image: x\n  program: bin/true\n";
    cr_assert_eq(ks_pki_write_file(path, rel, strlen(rel), 0644, NULL), KC_OK);
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_EINVALID);
    cr_assert_not_null(strstr(e.msg, "images[0].program: expected an absolute path"), "%s", e.msg);
    const char *missing = "images:\n- image: x\n  program: /nonexistent/prog\n";
    cr_assert_eq(ks_pki_write_file(path, missing, strlen(missing), 0644, NULL), KC_OK);
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_EINVALID);
    cr_assert_not_null(strstr(e.msg, "/nonexistent/prog"), "%s", e.msg);
    const char *none = "pictures: []\n";
    cr_assert_eq(ks_pki_write_file(path, none, strlen(none), 0644, NULL), KC_OK);
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_EINVALID);
    cr_assert_not_null(strstr(e.msg, path));
    unlink(path);
    rmdir(dir);
}

/* ---- securityContext: credentials of mapped containers' processes ---- */

/* Changing credentials needs root, as kubesim has. */
#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (geteuid() != 0)                                                                        \
            cr_skip_test("kubesim applies a securityContext only when it runs as root");           \
    } while (0)

/* What the process's /proc/self/status says about its credentials. */
#define CREDS_CMD                                                                                  \
    "grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs)' /proc/self/status"

/* Runs pod p (restartPolicy Never) with the given pod and container securityContext and the
 * container's shell command; returns its log once it succeeded. */
static char *run_sc(const char *image, const char *pod_sc, const char *ctr_sc, const char *cmd)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"restartPolicy\":"
             "\"Never\",\"securityContext\":%s,\"containers\":[{\"name\":\"c\",\"image\":\"%s\","
             "\"command\":[\"sh\",\"-c\"],\"args\":[\"%s\"],\"securityContext\":%s}]}}",
             pod_sc, image, cmd, ctr_sc);
    create("pods", buf);
    json_decref(wait_pod("p", phase_is, "Succeeded", "Succeeded"));
    return logs_of("p");
}

static void assert_creds(const char *log, const char *ids, unsigned long long prm,
                         unsigned long long bnd, int nnp)
{
    char want[1024];
    snprintf(want, sizeof(want),
             "%sCapInh:\t0000000000000000\nCapPrm:\t%016llx\nCapEff:\t%016llx\n"
             "CapBnd:\t%016llx\nCapAmb:\t0000000000000000\nNoNewPrivs:\t%d\n",
             ids, prm, prm, bnd, nnp);
    cr_assert_str_eq(log, want);
}

Test(kubelet, process_without_security_context_runs_as_root_with_containerds_default_caps)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/sh", "{}", "{}", CREDS_CMD);
    assert_creds(log, "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \n", 0xa80425fbULL,
                 0xa80425fbULL, 0);
    free(log);
}

Test(kubelet, run_as_user_group_and_groups_with_container_overrides)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    /* Container-level runAsUser wins; the groups are runAsGroup, supplementalGroups, fsGroup. A
     * non-root process keeps the bounding set but no permitted/effective capabilities. */
    char *log = run_sc("local/sh",
                       "{\"runAsUser\":1000,\"runAsGroup\":3000,\"supplementalGroups\":[4000],"
                       "\"fsGroup\":2000}",
                       "{\"runAsUser\":1001}", CREDS_CMD);
    assert_creds(log,
                 "Uid:\t1001\t1001\t1001\t1001\nGid:\t3000\t3000\t3000\t3000\n"
                 "Groups:\t2000 3000 4000 \n",
                 0, 0xa80425fbULL, 0);
    free(log);
}

Test(kubelet, run_as_user_without_group_has_group_0)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/sh", "{\"runAsUser\":1000}", "{}", CREDS_CMD);
    assert_creds(log, "Uid:\t1000\t1000\t1000\t1000\nGid:\t0\t0\t0\t0\nGroups:\t0 \n", 0,
                 0xa80425fbULL, 0);
    free(log);
}

Test(kubelet, drop_all_and_no_privilege_escalation)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/sh", "{\"runAsUser\":1000,\"runAsGroup\":1000}",
                       "{\"allowPrivilegeEscalation\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}",
                       CREDS_CMD);
    assert_creds(log,
                 "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1000 \n", 0,
                 0, 1);
    free(log);
}

Test(kubelet, root_with_drop_all_add_one_keeps_just_that_one)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    /* Add and drop of single capabilities apply after ALL; names are case-insensitive. */
    char *log = run_sc(
        "local/sh", "{}",
        "{\"capabilities\":{\"drop\":[\"ALL\",\"kill\"],\"add\":[\"NET_BIND_SERVICE\",\"KILL\"]}}",
        CREDS_CMD);
    assert_creds(log, "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \n", 1ULL << 10, 1ULL << 10,
                 0);
    free(log);
}

Test(kubelet, added_capability_of_non_root_is_only_in_the_bounding_set)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log =
        run_sc("local/sh", "{\"runAsUser\":1000,\"runAsGroup\":1000}",
               "{\"capabilities\":{\"add\":[\"NET_ADMIN\"],\"drop\":[\"CHOWN\"]}}", CREDS_CMD);
    assert_creds(log,
                 "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1000 \n", 0,
                 (0xa80425fbULL | 1ULL << 12) & ~1ULL, 0);
    free(log);
}

Test(kubelet, privileged_keeps_every_capability)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/sh", "{}",
                       "{\"privileged\":true,\"allowPrivilegeEscalation\":true,\"capabilities\":"
                       "{\"drop\":[\"ALL\"]}}",
                       CREDS_CMD);
    unsigned long long all = ks_runas_all_caps();
    cr_assert_neq(all & (1ULL << 21), 0, "CAP_SYS_ADMIN"); /* more than the default set */
    assert_creds(log, "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \n", all, all, 0);
    free(log);
}

static bool waiting_with(const json_t *pod, const void *arg)
{
    const char *m = jstr(pod, "status.containerStatuses.0.state.waiting.message");
    return m && strstr(m, arg);
}

Test(kubelet, run_as_non_root_refuses_an_image_running_as_root)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"securityContext\":{\"runAsNonRoot\":true},\"containers\":[{\"name\":\"c\","
                   "\"image\":\"local/sh\",\"command\":[\"sh\",\"-c\",\"true\"]}]}}");
    json_t *p = wait_pod("p", waiting_with, "runAsNonRoot", "a runAsNonRoot error");
    char want[512];
    snprintf(want, sizeof(want),
             "container has runAsNonRoot and image will run as root (pod: \"p_default(%s)\", "
             "container: c)",
             jstr(p, "metadata.uid"));
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.reason"),
                     "CreateContainerConfigError");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"), want);
    cr_assert_str_eq(jstr(p, "status.phase"), "Pending");
    json_decref(p);
    /* runAsUser 0 at the container level breaks the pod's policy too. */
    create("pods", "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":1000},"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"local/sh\",\"command\":[\"sh\","
                   "\"-c\",\"true\"],\"securityContext\":{\"runAsUser\":0}}]}}");
    p = wait_pod("q", waiting_with, "non-root", "a runAsUser error");
    snprintf(want, sizeof(want),
             "container's runAsUser breaks non-root policy (pod: \"q_default(%s)\", container: c)",
             jstr(p, "metadata.uid"));
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"), want);
    json_decref(p);
}

Test(kubelet, run_as_non_root_accepts_an_image_with_a_non_root_user)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/nonroot", "{\"runAsNonRoot\":true}", "{}", CREDS_CMD);
    assert_creds(log,
                 "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1000 \n", 0,
                 0xa80425fbULL, 0);
    free(log);
}

Test(kubelet, non_root_reads_the_token_but_cannot_write_the_volume)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log =
        run_sc("local/sh", "{\"runAsUser\":1000,\"runAsGroup\":1000}", "{}",
               "echo $KC_INCLUSTER_ROOT; test -s $KC_INCLUSTER_ROOT/token && echo read; touch "
               "$KC_INCLUSTER_ROOT/x 2>/dev/null || echo no-write; ls "
               "$KC_INCLUSTER_ROOT/../.. >/dev/null 2>&1 || echo no-list");
    /* The state directory (mkdtemp: 0700) is not searchable by uid 1000: the volume is reached
     * through the descriptor the helper opened, as through a mount point. */
    cr_assert_str_eq(log, "/proc/self/fd/3\nread\nno-write\nno-list\n");
    free(log);
}

Test(kubelet, fs_group_owns_the_projected_volume)
{
    NEED_ROOT();
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/sh", "{\"runAsUser\":1000,\"runAsGroup\":1000,\"fsGroup\":2000}",
                       "{}", "stat -c '%a %g' $KC_INCLUSTER_ROOT/. $KC_INCLUSTER_ROOT/token");
    cr_assert_str_eq(log, "2755 2000\n644 2000\n");
    free(log);
}

Test(proc, image_map_user_must_be_numeric)
{
    char path[] = "/tmp/ksmap.XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *bad = "images:\n- image: x\n  program: /bin/true\n  user: nobody\n";
    cr_assert_eq(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    ks_image_map m;
    kc_err e = {0};
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_EINVALID);
    cr_assert_not_null(
        strstr(e.msg, "images[0].user: expected a numeric uid[:gid], got \"nobody\""), "%s", e.msg);
    const char *good = "images:\n- image: x\n  program: /bin/true\n  user: 1001:7\n";
    cr_assert_eq(ks_pki_write_file(path, good, strlen(good), 0644, NULL), KC_OK);
    cr_assert_eq(ks_image_map_load(path, &m, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(m.entries[0].user_uid, 1001);
    cr_assert_eq(m.entries[0].user_gid, 7);
    ks_image_map_free(&m);
    unlink(path);
}

/* The image's files are readable by the container's user whatever the host directories above
 * them allow: its program and the paths its env names sit under tdir (0700) here. */
Test(kubelet, an_images_files_are_reachable_by_a_non_root_user)
{
    NEED_ROOT();
    /* valgrind traces children outside /usr and /bin: this image's shell, a copy under tdir,
     * would run under memcheck as uid 1000, which checks valgrind, not kubesim. The plain and
     * ASan runs of this test cover it. */
    if (RUNNING_ON_VALGRIND) {
        /* Here: the helper is asked to open the image's paths before changing credentials. */
        char *env[] = {"DATA=/img/data.txt", "MODE=fast", NULL};
        char *args[] = {"/img/sh", NULL};
        ks_image_map_entry m = {.program = "/img/sh", .env = env};
        ks_runas ra = {.uid = 1000, .gid = 1000};
        size_t prog = 0;
        char **w = ks_runas_wrap(&ra, "/h", NULL, &m, args, &prog);
        cr_assert_not_null(w);
        bool data = false, mode = false;
        for (size_t i = 0; i < prog; i++) {
            data = data || !strcmp(w[i], "--image-env=DATA");
            mode = mode || !strncmp(w[i], "--image-env=MODE", 16);
        }
        cr_assert(data && !mode, "an absolute path is opened, a plain value is not");
        cr_assert_str_eq(w[prog], "/img/sh");
        ks_proc_strv_free(w);
        return;
    }
    start(0, 0);
    add_node(NODE_N1);
    char *log = run_sc("local/hidden", "{\"runAsUser\":1000,\"runAsGroup\":1000}", "{}",
                       "id -u; cat \\\"$DATA\\\"");
    cr_assert_str_eq(log, "1000\nin the image\n");
    free(log);
}

/* ---- images: the registries, pulls and their back-off ---- */

static void setup_pull(void)
{
    setup();
    S->opts.any_image = false;
}

TestSuite(pull, .init = setup_pull, .fini = teardown, .timeout = 120);

static bool waiting_is(const json_t *pod, const void *arg)
{
    const char *r = jstr(pod, "status.containerStatuses.0.state.waiting.reason");
    return r && !strcmp(r, arg);
}

/* The events of pod with `reason`, messages joined by newlines (caller frees). */
static char *events_of(const char *pod, const char *reason)
{
    const ks_rtype *et = ks_store_type(S->store, "", "v1", "events");
    json_t *items = NULL;
    cr_assert_eq(ks_list(S->store, et, "default", NULL, &items, NULL, NULL, NULL), KC_OK);
    size_t cap = 1, len = 0, i;
    char *out = calloc(1, cap);
    json_t *ev;
    json_array_foreach(items, i, ev)
    {
        if (strcmp(jstr(ev, "involvedObject.name"), pod) || strcmp(jstr(ev, "reason"), reason))
            continue;
        char line[2048];
        int n = snprintf(line, sizeof(line), "%s\n", jstr(ev, "message"));
        out = realloc(out, cap += (size_t)n);
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    json_decref(items);
    return out;
}

/* Waits for pod's container to wait for `reason`, then checks the message of that state. */
static void expect_waiting(const char *pod, const char *reason, const char *msg)
{
    json_t *p = wait_pod(pod, waiting_is, reason, reason);
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"), msg, "%s", pod);
    json_decref(p);
}

#define NOT_FOUND_0_1_0                                                                            \
    "rpc error: code = NotFound desc = failed to pull and unpack image "                           \
    "\"nvcr.io/nvidia/gpu-operator:0.1.0\": failed to resolve reference "                          \
    "\"nvcr.io/nvidia/gpu-operator:0.1.0\": nvcr.io/nvidia/gpu-operator:0.1.0: not found"

Test(pull, an_image_the_registry_lacks_goes_errimagepull_then_imagepullbackoff)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/gpu-operator:0.1.0\""
                   "}]}}");
    json_t *p = wait_pod("p", waiting_is, "ErrImagePull", "ErrImagePull");
    cr_assert_str_eq(jstr(p, "status.phase"), "Pending");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"), NOT_FOUND_0_1_0);
    json_decref(p);
    p = wait_pod("p", waiting_is, "ImagePullBackOff", "ImagePullBackOff");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.state.waiting.message"),
                     "Back-off pulling image \"nvcr.io/nvidia/gpu-operator:0.1.0\": "
                     "ErrImagePull: " NOT_FOUND_0_1_0);
    json_decref(p);
    char *w = warnings_of("p");
    cr_assert_not_null(strstr(w, "Failed: Failed to pull image \"nvcr.io/nvidia/gpu-operator:0.1.0"
                                 "\": " NOT_FOUND_0_1_0 "\n"),
                       "%s", w);
    cr_assert_not_null(strstr(w, "Failed: Error: ErrImagePull\n"), "%s", w);
    cr_assert_not_null(strstr(w, "Failed: Error: ImagePullBackOff\n"), "%s", w);
    free(w);
    char *b = events_of("p", "BackOff");
    cr_assert_not_null(strstr(b, "Back-off pulling image \"nvcr.io/nvidia/gpu-operator:0.1.0\""),
                       "%s", b);
    free(b);
    /* It keeps trying: the back-off (100 ms doubling to 400 ms here) ends in another pull. */
    usleep(1200 * 1000);
    char *pulling = events_of("p", "Pulling");
    size_t tries = 0;
    for (const char *s = pulling; (s = strstr(s, "Pulling image")); s++)
        tries++;
    cr_assert_geq(tries, 3, "%s", pulling);
    free(pulling);
    char *out = NULL;
    size_t len = 0;
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_logs(S, "default", "p", "c", -1, &out, &len, &e), KC_EBADREQUEST);
    cr_assert(strstr(e.msg, "is waiting to start: trying and failing to pull image") ||
                  strstr(e.msg, "is waiting to start: image can't be pulled"),
              "%s", e.msg);
    free(out);
}

Test(pull, a_retried_pull_keeps_the_last_error_in_the_status)
{
    /* Each retry takes 150 ms (the pull latency): the status shows the last error meanwhile, as
     * the kubelet's reason cache does, never ContainerCreating again. */
    S->opts.pull_latency_ms = 150;
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/gpu-operator:0.1.0\""
                   "}]}}");
    json_decref(wait_pod("p", waiting_is, "ErrImagePull", "ErrImagePull"));
    size_t seen_pull = 0, seen_backoff = 0;
    for (int i = 0; i < 150; i++) { /* 1.5 s: several back-offs and retries */
        json_t *p = get_pod("p");
        const char *r = jstr(p, "status.containerStatuses.0.state.waiting.reason");
        cr_assert(!strcmp(r, "ErrImagePull") || !strcmp(r, "ImagePullBackOff"), "%s", r);
        seen_pull += !strcmp(r, "ErrImagePull");
        seen_backoff += !strcmp(r, "ImagePullBackOff");
        json_decref(p);
        usleep(10 * 1000);
    }
    cr_assert_gt(seen_pull, 0);
    cr_assert_gt(seen_backoff, 0);
    char *pulling = events_of("p", "Pulling");
    size_t tries = 0;
    for (const char *s = pulling; (s = strstr(s, "Pulling image")); s++)
        tries++;
    cr_assert_geq(tries, 3, "%s", pulling);
    free(pulling);
}

Test(pull, containerds_errors_name_the_cause)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"host\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"mirror.invalid:5000/nvidia/"
                   "driver:1\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"hub\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"no-such-image\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"upper\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"Busybox:1\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"never\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.36\","
                   "\"imagePullPolicy\":\"Never\"}]}}");
    expect_waiting("host", "ErrImagePull",
                   "rpc error: code = Unknown desc = failed to pull and unpack image "
                   "\"mirror.invalid:5000/nvidia/driver:1\": failed to resolve reference "
                   "\"mirror.invalid:5000/nvidia/driver:1\": failed to do request: Head "
                   "\"https://mirror.invalid:5000/v2/nvidia/driver/manifests/1\": dial tcp: lookup "
                   "mirror.invalid: no such host");
    expect_waiting("hub", "ErrImagePull",
                   "rpc error: code = Unknown desc = failed to pull and unpack image "
                   "\"docker.io/library/no-such-image:latest\": failed to resolve reference "
                   "\"docker.io/library/no-such-image:latest\": pull access denied, repository "
                   "does not exist or may require authorization: server message: "
                   "insufficient_scope: authorization failed");
    expect_waiting("upper", "InvalidImageName",
                   "Failed to apply default image tag \"Busybox:1\": couldn't parse image name "
                   "\"Busybox:1\": invalid reference format: repository name (library/Busybox) "
                   "must be lowercase");
    expect_waiting("never", "ErrImageNeverPull",
                   "Container image \"busybox:1.36\" is not present with pull policy of Never");
}

static bool running_ctr(const json_t *pod, const void *arg)
{
    (void)arg;
    return jpath(pod, "status.containerStatuses.0.state.running") != NULL;
}

Test(pull, pulls_take_their_time_one_at_a_time_and_once_per_node)
{
    /* 150 MiB device plugin, 120 MiB toolkit at 100 MB/s plus 50 ms: 1,623 ms and 1,309 ms
     * (rounded up). Both clocks count whole milliseconds, so a wait may measure 1 ms short. */
    S->opts.pull_mbps = 100;
    S->opts.pull_latency_ms = 50;
    start(0, 0);
    add_node(NODE_N1);
    add_node("{\"metadata\":{\"name\":\"n2\"}}");
    long long t0 = now_ms();
    create("pods", "{\"metadata\":{\"name\":\"dp\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s-device-plugin:"
                   "v0.20.0\"}]}}");
    usleep(100 * 1000);
    create("pods", "{\"metadata\":{\"name\":\"tk\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s/"
                   "container-toolkit:v1.20.0\"}]}}");
    json_t *p = wait_pod("dp", running_ctr, NULL, "running");
    long long dp_ms = now_ms() - t0;
    json_decref(p);
    p = wait_pod("tk", running_ctr, NULL, "running");
    long long tk_ms = now_ms() - t0;
    json_decref(p);
    cr_assert_geq(dp_ms, 1623 - 1, "device plugin running after %lld ms", dp_ms);
    /* The toolkit waited for the device plugin's pull: serialized pulls. */
    cr_assert_geq(tk_ms, 1623 + 1309 - 1, "toolkit running after %lld ms", tk_ms);
    char *pulled = events_of("dp", "Pulled");
    cr_assert_not_null(strstr(pulled, "Successfully pulled image \"nvcr.io/nvidia/k8s-device-plugin"
                                      ":v0.20.0\" in 1.623s ("),
                       "%s", pulled);
    cr_assert_not_null(strstr(pulled, "including waiting). Image size: 157286400 bytes.\n"), "%s",
                       pulled);
    free(pulled);
    pulled = events_of("tk", "Pulled");
    cr_assert_not_null(strstr(pulled, "in 1.309s ("), "%s", pulled);
    free(pulled);
    /* Once on the node: a second pod starts without a pull. The other node pulls it again. */
    t0 = now_ms();
    create("pods", "{\"metadata\":{\"name\":\"dp2\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s-device-plugin:"
                   "v0.20.0\"}]}}");
    create("pods", "{\"metadata\":{\"name\":\"dp3\"},\"spec\":{\"nodeName\":\"n2\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nvcr.io/nvidia/k8s-device-plugin:"
                   "v0.20.0\"}]}}");
    p = wait_pod("dp2", running_ctr, NULL, "running");
    long long dp2_ms = now_ms() - t0;
    json_decref(p);
    cr_assert_lt(dp2_ms, 1000, "an image on the node was pulled again (%lld ms)", dp2_ms);
    pulled = events_of("dp2", "Pulled");
    cr_assert_str_eq(pulled,
                     "Container image \"nvcr.io/nvidia/k8s-device-plugin:v0.20.0\" already present "
                     "on machine\n");
    free(pulled);
    p = wait_pod("dp3", running_ctr, NULL, "running");
    cr_assert_geq(now_ms() - t0, 1623);
    json_decref(p);
}

Test(pull, mapped_images_are_the_projects_own_and_exist)
{
    start(0, 0);
    add_node(NODE_N1);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\","
                   "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":"
                   "\"local/sh:1\",\"command\":[\"sh\",\"-c\",\"exit 0\"]}]}}");
    json_t *p = wait_pod("p", phase_is, "Succeeded", "Succeeded");
    json_decref(p);
    char *pulled = events_of("p", "Pulled");
    cr_assert_not_null(strstr(pulled, "Successfully pulled image \"local/sh:1\" in 0s"), "%s",
                       pulled);
    free(pulled);
}

/* ---- pulls: parallel pulls sharing a node's link, a pod's pulls in container order ---- */

/* Test images of round sizes (SI megabytes: 100M is 1 s at 100 MB/s). */
static void pull_images(void)
{
    static char path[160];
    snprintf(path, sizeof(path), "%s/test-images.yaml", tdir);
    const char *text = "images:\n"
                       "- image: \"example.com/gate:*\"\n"
                       "  size: 50M\n"
                       "- image: \"example.com/big-*\"\n"
                       "  size: 100M\n"
                       "- image: \"example.com/half:*\"\n"
                       "  size: 50M\n";
    cr_assert_eq(ks_pki_write_file(path, text, strlen(text), 0644, NULL), KC_OK);
    S->opts.images_files[0] = path;
}

/* Starts the kubelet with the test images, one node n1 and the pull model at 100 MB/s plus
 * latency_ms per pull; parallel: --serialize-image-pulls=false, with at most max pulls at once
 * (0: no limit). */
static void pull_node(int latency_ms, bool parallel, int max)
{
    pull_images();
    S->opts.pull_mbps = 100;
    S->opts.pull_latency_ms = latency_ms;
    S->opts.parallel_pulls = parallel;
    S->opts.max_parallel_pulls = max;
    start(0, 0);
    add_node(NODE_N1);
}

/* A pod on n1 whose init container pulls example.com/gate:1, then its container `image`. Pods
 * created together join the same gate pull, so their containers' pulls start at the same loop
 * millisecond, when it ends. */
static void create_gated(const char *name, const char *image)
{
    char pod[1024];
    snprintf(pod, sizeof(pod),
             "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"n1\","
             "\"initContainers\":[{\"name\":\"gate\",\"image\":\"example.com/gate:1\"}],"
             "\"containers\":[{\"name\":\"c\",\"image\":\"%s\"}]}}",
             name, image);
    create("pods", pod);
}

/* Go's time.Duration text ("850ms", "2.05s", "1m3.5s") in milliseconds; -1 when it is none. */
static long go_ms(const char *s)
{
    char *end;
    if (strstr(s, "ms") == s + strspn(s, "0123456789"))
        return strtol(s, NULL, 10);
    double min = 0, sec;
    const char *m = strchr(s, 'm');
    if (m && m[1] != 's') {
        min = strtod(s, NULL);
        s = m + 1;
    }
    sec = strtod(s, &end);
    if (end == s || *end != 's')
        return -1;
    return (long)(min * 60000 + sec * 1000 + 0.5);
}

/* The Pulled event of `image` in pod: its own pull time and the time including waiting (ms). */
static void pulled(const char *pod, const char *image, long *in_ms, long *total_ms)
{
    char *all = events_of(pod, "Pulled"), want[300];
    snprintf(want, sizeof(want), "Successfully pulled image \"%s\" in ", image);
    const char *at = strstr(all, want);
    cr_assert_not_null(at, "no pull of %s in %s's events:\n%s", image, pod, all);
    at += strlen(want);
    char took[32] = "", total[32] = "";
    cr_assert_eq(sscanf(at, "%31s (%31s including waiting)", took, total), 2, "%s", all);
    *in_ms = go_ms(took);
    *total_ms = go_ms(total);
    cr_assert(*in_ms >= 0 && *total_ms >= *in_ms, "%s", all);
    free(all);
}

static bool all_running(const json_t *pod, const void *arg)
{
    size_t n = (size_t)(uintptr_t)arg, i;
    json_t *cs;
    if (json_array_size(jpath(pod, "status.containerStatuses")) != n)
        return false;
    json_array_foreach(jpath(pod, "status.containerStatuses"), i,
                       cs) if (!jpath(cs, "state.running")) return false;
    return true;
}

Test(pull_opts, the_kubelets_refusals_of_parallel_pull_settings)
{
    char msg[256] = "";
    long zero = 0, neg = -2, one = 1, three = 3;
    cr_assert_not(ks_kubelet_check_pulls(false, &zero, msg, sizeof(msg)));
    cr_assert_str_eq(msg,
                     "invalid configuration: maxParallelImagePulls 0 must be a positive number");
    cr_assert_not(ks_kubelet_check_pulls(true, &neg, msg, sizeof(msg)));
    cr_assert_str_eq(msg,
                     "invalid configuration: maxParallelImagePulls -2 must be a positive number");
    cr_assert_not(ks_kubelet_check_pulls(true, &three, msg, sizeof(msg)));
    cr_assert_str_eq(msg, "invalid configuration: maxParallelImagePulls cannot be larger than 1 "
                          "unless SerializeImagePulls (--serialize-image-pulls) is set to false");
    cr_assert(ks_kubelet_check_pulls(true, NULL, msg, sizeof(msg)));
    cr_assert(ks_kubelet_check_pulls(true, &one, msg, sizeof(msg)));
    cr_assert(ks_kubelet_check_pulls(false, NULL, msg, sizeof(msg)));
    cr_assert(ks_kubelet_check_pulls(false, &three, msg, sizeof(msg)));
}

/* Runs the kubesim program built next to this test with args: its exit status, its stderr. */
static int run_kubesim(const char *args, char *err, size_t size)
{
    char self[4096], cmd[8192];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    cr_assert_gt(n, 0);
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(cmd, sizeof(cmd), "%s/kubesim", self);
    if (access(cmd, X_OK) != 0)
        cr_skip_test("no kubesim program next to %s (build the kubesim target)", self);
    snprintf(cmd, sizeof(cmd), "'%s/kubesim' --no-persist --dir '%s' %s 2>&1 >/dev/null", self,
             tdir, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(err, 1, size - 1, f);
    err[got] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(pull, kubesim_refuses_bad_pull_flags_as_the_kubelet_does)
{
    char err[1024];
    cr_assert_eq(
        run_kubesim("--serialize-image-pulls --max-parallel-image-pulls 2", err, sizeof(err)), 1);
    cr_assert_str_eq(err, "kubesim: invalid configuration: maxParallelImagePulls cannot be larger "
                          "than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to "
                          "false\n");
    cr_assert_eq(run_kubesim("--max-parallel-image-pulls 2", err, sizeof(err)), 1);
    cr_assert_not_null(strstr(err, "cannot be larger than 1"), "%s", err);
    cr_assert_eq(
        run_kubesim("--serialize-image-pulls=false --max-parallel-image-pulls 0", err, sizeof(err)),
        1);
    cr_assert_str_eq(
        err, "kubesim: invalid configuration: maxParallelImagePulls 0 must be a positive number\n");
    cr_assert_eq(run_kubesim("--serialize-image-pulls=no", err, sizeof(err)), 1);
    cr_assert_str_eq(err, "kubesim: --serialize-image-pulls expects true or false, got \"no\"\n");
    /* The library refuses them too. */
    S->opts.max_parallel_pulls = 2;
    kc_err e = {0};
    cr_assert_eq(ks_kubelet_start(S, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "invalid configuration: maxParallelImagePulls cannot be larger than 1 "
                            "unless SerializeImagePulls (--serialize-image-pulls) is set to false");
}

Test(pull, parallel_pulls_share_the_nodes_link)
{
    /* Two 100 MB images at 100 MB/s from the same millisecond: each gets 50 MB/s, both end
     * after 2 s (plus the 50 ms latency each pays on its own), not after 1 s and 2 s. */
    pull_node(50, true, 0);
    create_gated("a", "example.com/big-a:1");
    create_gated("b", "example.com/big-b:1");
    json_decref(wait_pod("a", all_running, (void *)1, "running"));
    json_decref(wait_pod("b", all_running, (void *)1, "running"));
    long in, total;
    pulled("a", "example.com/gate:1", &in, &total);
    cr_assert_eq(in, 550);
    pulled("b", "example.com/gate:1", &in, &total);
    cr_assert_eq(in, 550, "b did not join a's pull of the gate");
    pulled("a", "example.com/big-a:1", &in, &total);
    cr_assert_eq(in, 2050);
    pulled("b", "example.com/big-b:1", &in, &total);
    cr_assert_eq(in, 2050);
}

Test(pull, one_parallel_pull_at_most_is_serialized)
{
    pull_node(50, true, 1);
    create_gated("a", "example.com/big-a:1");
    create_gated("b", "example.com/big-b:1");
    json_decref(wait_pod("a", all_running, (void *)1, "running"));
    json_decref(wait_pod("b", all_running, (void *)1, "running"));
    long in_a, total_a, in_b, total_b;
    pulled("a", "example.com/big-a:1", &in_a, &total_a);
    pulled("b", "example.com/big-b:1", &in_b, &total_b);
    /* Each alone on the link; the second waited for the first (both asked at once). */
    cr_assert_eq(in_a, 1050);
    cr_assert_eq(in_b, 1050);
    long first = total_a < total_b ? total_a : total_b;
    long second = total_a < total_b ? total_b : total_a;
    cr_assert_lt(first, 2000, "%ld %ld", total_a, total_b);
    cr_assert_geq(second, 2 * 1050, "%ld %ld", total_a, total_b);
}

Test(pull, parallel_pulls_beyond_the_limit_wait_their_turn)
{
    pull_node(50, true, 2);
    create_gated("a", "example.com/big-a:1");
    create_gated("b", "example.com/big-b:1");
    create_gated("c", "example.com/big-c:1");
    const char *pods[] = {"a", "b", "c"},
               *imgs[] = {"example.com/big-a:1", "example.com/big-b:1", "example.com/big-c:1"};
    int shared = 0, alone = 0;
    for (int i = 0; i < 3; i++) {
        json_decref(wait_pod(pods[i], all_running, (void *)1, "running"));
        long in, total;
        pulled(pods[i], imgs[i], &in, &total);
        if (in == 2050) { /* with the other of the first two */
            shared++;
            cr_assert_lt(total, 3000, "%s: %ld", pods[i], total);
        } else {
            alone++; /* after both */
            cr_assert_eq(in, 1050, "%s", pods[i]);
            cr_assert_geq(total, 2050 + 1050, "%s", pods[i]);
        }
    }
    cr_assert_eq(shared, 2);
    cr_assert_eq(alone, 1);
}

#define TWO_CONTAINERS                                                                             \
    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":["                \
    "{\"name\":\"first\",\"image\":\"example.com/big-a:1\"},"                                      \
    "{\"name\":\"second\",\"image\":\"example.com/half:1\"}]}}"

Test(pull, a_pods_containers_pull_one_after_the_other)
{
    /* As SyncPod starts them: the second container's pull starts when the first's ends, even
     * though the node pulls in parallel (sharing, they would take 1.5 s and 1 s). */
    pull_node(0, true, 0);
    create("pods", TWO_CONTAINERS);
    json_decref(wait_pod("p", all_running, (void *)2, "both running"));
    long in, total;
    pulled("p", "example.com/big-a:1", &in, &total);
    cr_assert_eq(in, 1000);
    pulled("p", "example.com/half:1", &in, &total);
    cr_assert_eq(in, 500);
    cr_assert_lt(total, 1000, "the second pull waited for the first: %ld ms", total);
}

Test(pull, a_pods_second_pull_is_asked_for_when_the_first_ends)
{
    /* Serialized pulls (the default): the second container does not queue its pull behind the
     * first's; it asks once the first is pulled, so it waited for nothing (not 1.5 s). */
    pull_node(0, false, 0);
    create("pods", TWO_CONTAINERS);
    json_decref(wait_pod("p", all_running, (void *)2, "both running"));
    long in, total;
    pulled("p", "example.com/big-a:1", &in, &total);
    cr_assert_eq(in, 1000);
    pulled("p", "example.com/half:1", &in, &total);
    cr_assert_eq(in, 500);
    cr_assert_lt(total, 1000, "the second pull waited in the node's queue: %ld ms", total);
}

static bool first_fails_second_runs(const json_t *pod, const void *arg)
{
    (void)arg;
    const char *r = jstr(pod, "status.containerStatuses.0.state.waiting.reason");
    return r && (!strcmp(r, "ErrImagePull") || !strcmp(r, "ImagePullBackOff")) &&
           jpath(pod, "status.containerStatuses.1.state.running");
}

Test(pull, a_failed_pull_lets_the_pods_next_container_pull)
{
    pull_node(100, true, 0);
    create("pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":["
                   "{\"name\":\"first\",\"image\":\"nvcr.io/nvidia/gpu-operator:0.1.0\"},"
                   "{\"name\":\"second\",\"image\":\"example.com/half:1\"}]}}");
    /* The first's pull fails (ErrImagePull, then its retries with back-off); the pod does not
     * stay stuck on it: the second container pulls (100 ms + 500 ms) and runs. */
    json_t *p = wait_pod("p", first_fails_second_runs, NULL, "first failing, second running");
    cr_assert_str_eq(jstr(p, "status.containerStatuses.0.name"), "first");
    json_decref(p);
    long in, total;
    pulled("p", "example.com/half:1", &in, &total);
    cr_assert_eq(in, 600);
}
