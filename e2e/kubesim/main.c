/* kubesim: a simulated Kubernetes control plane (API server, controllers, kubelet) on 127.0.0.1
 * that the real kubectl and helm accept; runs until SIGTERM/SIGINT.
 *
 * Pods whose image matches the --image-map run as local processes. Each gets the in-cluster
 * setup a real pod has: KUBERNETES_SERVICE_HOST=127.0.0.1, KUBERNETES_SERVICE_PORT=<https port>
 * and a service-account token, CA and namespace under <dir>/pods/<ns>_<pod>/serviceaccount/.
 * Because that directory is not /var/run/secrets/kubernetes.io/serviceaccount, its path is
 * exported as KC_INCLUSTER_ROOT, which libkube's kc_config_load_incluster(NULL, ...) and
 * kc_config_load_default read in place of the standard path. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_log.h"
#include "kc_yaml.h"
#include "ks_admit.h"
#include "ks_auth.h"
#include "ks_fault.h"
#include "ks_kubelet.h"
#include "ks_pki.h"
#include "ks_sim.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: kubesim [options]\n"
        "  --dir DIR              state directory (certificates, kubeconfig, logs, pod files)\n"
        "                         default: ${TMPDIR:-/tmp}/kubesim-$USER\n"
        "  --kubeconfig PATH      where to write the admin kubeconfig (default DIR/kubeconfig)\n"
        "  --port N               HTTPS port (default 0: any free port)\n"
        "  --http-port N          also serve plain HTTP on N (0: any free port; default off)\n"
        "  --fleet FILE           YAML `nodes: [{name, count, cpu, memory, pods, labels,\n"
        "                         taints, runtime}]` of nodes to register at start\n"
        "  --image-map FILE       YAML `images: [{image, program, args_prefix, env}]`: pods\n"
        "                         with a matching image run the program locally\n"
        "  --rbac                 authorize ServiceAccount users with RBAC\n"
        "  --images FILE          YAML `images: [{image: GLOB, size: 150Mi}]`: images the\n"
        "                         registries hold besides the built-in ones (NVIDIA's\n"
        "                         operand images, this project's, busybox, nginx, pause);\n"
        "                         repeatable. Other images fail: ErrImagePull\n"
        "  --any-image            every image exists (no registry check)\n"
        "  --pull-mbps F          kubelet: a node's image download rate in MB/s (default 0:\n"
        "                         pulls take no time): one link, shared equally by the\n"
        "                         node's downloads under way\n"
        "  --pull-latency-ms N    kubelet: fixed time of every pull before its download\n"
        "                         (default 0; each pull's own, not shared)\n"
        "  --serialize-image-pulls[=true|false]\n"
        "                         kubelet: a node runs one pull at a time (default true);\n"
        "                         false: several at once, the rest wait in FIFO order\n"
        "  --max-parallel-image-pulls N\n"
        "                         kubelet: with --serialize-image-pulls=false, at most N\n"
        "                         pulls at once per node (default: no limit). Refused as\n"
        "                         the kubelet refuses them: N < 1 (\"invalid configuration:\n"
        "                         maxParallelImagePulls N must be a positive number\") and\n"
        "                         N > 1 with serialized pulls (\"invalid configuration:\n"
        "                         maxParallelImagePulls cannot be larger than 1 unless\n"
        "                         SerializeImagePulls (--serialize-image-pulls) is set to\n"
        "                         false\"). In any mode a pod's containers pull one after\n"
        "                         the other, in order: the next when the last pull ended\n"
        "  --pod-start-ms N       kubelet: Pending -> Running delay (default 200)\n"
        "  --pod-ready-ms N       kubelet: Running -> Ready delay (default 0)\n"
        "  --probe-scale F        kubelet: simulated containers' probe delays and\n"
        "                         periods times F (default 1)\n"
        "  --heartbeat-s N        kubelet: node lease renewal period (default 10)\n"
        "  --grace-cap-ms N       kubelet: longest wait before removing a deleted pod "
        "(default 1000)\n"
        "  --no-pod-events        kubelet: record no Pulled/Created/Started events (large\n"
        "                         benchmarks)\n"
        "  --fresh                start from an empty store, discarding the state kept in\n"
        "                         --dir (store.snap, store.log)\n"
        "  --no-persist           keep the objects in memory only (nothing in --dir)\n"
        "  --history N            watch events kept for resuming watches (default %d)\n"
        "  -v N                   request logging: 0 quiet, 1 writes, 2 every request, 3 "
        "bodies\n"
        "  --no-controllers       serve the API only (no controllers, no scheduler)\n"
        "  --faults FILE          fault-injection rules (JSON, as POSTed to /kubesim/v1/faults)\n"
        "  -h, --help             this text\n",
        KS_STORE_DEFAULT_HISTORY);
}

static bool parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* Go's strconv.ParseBool: 1 true, 0 false, -1 neither. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcmp(s, yes[i]))
            return 1;
        if (!strcmp(s, no[i]))
            return 0;
    }
    return -1;
}

typedef struct cli {
    ks_opts opts;
    long grace_cap_ms;
    bool no_events;
    const char *faults; /* --faults FILE or NULL */
    bool fresh, no_persist;
    char dir[PATH_MAX];
} cli;

static int parse_args(int argc, char **argv, cli *c)
{
    enum {
        O_DIR = 256,
        O_KUBECONFIG,
        O_PORT,
        O_HTTP_PORT,
        O_FLEET,
        O_IMAGE_MAP,
        O_RBAC,
        O_START,
        O_READY,
        O_HB,
        O_GRACE,
        O_HISTORY,
        O_NOCTL,
        O_NOEVENTS,
        O_FAULTS,
        O_PROBE_SCALE,
        O_FRESH,
        O_NO_PERSIST,
        O_IMAGES,
        O_ANY_IMAGE,
        O_PULL_MBPS,
        O_PULL_LATENCY,
        O_SERIALIZE_PULLS,
        O_MAX_PARALLEL_PULLS,
    };
    static const struct option longs[] = {
        {"dir", required_argument, NULL, O_DIR},
        {"kubeconfig", required_argument, NULL, O_KUBECONFIG},
        {"port", required_argument, NULL, O_PORT},
        {"http-port", required_argument, NULL, O_HTTP_PORT},
        {"fleet", required_argument, NULL, O_FLEET},
        {"image-map", required_argument, NULL, O_IMAGE_MAP},
        {"rbac", no_argument, NULL, O_RBAC},
        {"pod-start-ms", required_argument, NULL, O_START},
        {"pod-ready-ms", required_argument, NULL, O_READY},
        {"probe-scale", required_argument, NULL, O_PROBE_SCALE},
        {"heartbeat-s", required_argument, NULL, O_HB},
        {"grace-cap-ms", required_argument, NULL, O_GRACE},
        {"history", required_argument, NULL, O_HISTORY},
        {"no-controllers", no_argument, NULL, O_NOCTL},
        {"no-pod-events", no_argument, NULL, O_NOEVENTS},
        {"faults", required_argument, NULL, O_FAULTS},
        {"fresh", no_argument, NULL, O_FRESH},
        {"no-persist", no_argument, NULL, O_NO_PERSIST},
        {"images", required_argument, NULL, O_IMAGES},
        {"any-image", no_argument, NULL, O_ANY_IMAGE},
        {"pull-mbps", required_argument, NULL, O_PULL_MBPS},
        {"pull-latency-ms", required_argument, NULL, O_PULL_LATENCY},
        {"serialize-image-pulls", optional_argument, NULL, O_SERIALIZE_PULLS},
        {"max-parallel-image-pulls", required_argument, NULL, O_MAX_PARALLEL_PULLS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ks_opts *o = &c->opts;
    *o = (ks_opts){.listen_host = "127.0.0.1",
                   .https_port = 0,
                   .http_port = -1,
                   .pod_start_ms = 200,
                   .pod_ready_ms = 0,
                   .probe_scale = 1.0,
                   .node_heartbeat_s = 10,
                   .history = KS_STORE_DEFAULT_HISTORY};
    c->grace_cap_ms = 1000;
    c->no_events = false;
    c->faults = NULL;
    c->fresh = c->no_persist = false;
    const char *tmp = getenv("TMPDIR");
    const char *user = getenv("USER");
    snprintf(c->dir, sizeof(c->dir), "%s/kubesim-%s", tmp && *tmp ? tmp : "/tmp",
             user && *user ? user : "user");
    o->dir = c->dir;
    int ch;
    long v, max_pulls = 0;
    bool max_pulls_set = false;
    char msg[256];
    while ((ch = getopt_long(argc, argv, "hv:", longs, NULL)) != -1) {
        const char *bad = NULL;
        switch (ch) {
        case O_DIR:
            snprintf(c->dir, sizeof(c->dir), "%s", optarg);
            break;
        case O_KUBECONFIG:
            o->kubeconfig = optarg;
            break;
        case O_PORT:
            if (!parse_int(optarg, 0, 65535, &v))
                bad = "--port expects a port number 0-65535";
            o->https_port = (int)v;
            break;
        case O_HTTP_PORT:
            if (!parse_int(optarg, -1, 65535, &v))
                bad = "--http-port expects a port number 0-65535 (or -1 for none)";
            o->http_port = (int)v;
            break;
        case O_FLEET:
            o->fleet = optarg;
            break;
        case O_IMAGE_MAP:
            o->image_map = optarg;
            break;
        case O_RBAC:
            o->rbac = true;
            break;
        case O_START:
            if (!parse_int(optarg, 0, 3600000, &v))
                bad = "--pod-start-ms expects milliseconds (0-3600000)";
            o->pod_start_ms = (int)v;
            break;
        case O_READY:
            if (!parse_int(optarg, 0, 3600000, &v))
                bad = "--pod-ready-ms expects milliseconds (0-3600000)";
            o->pod_ready_ms = (int)v;
            break;
        case O_PROBE_SCALE: {
            char *end = NULL;
            double f = strtod(optarg, &end);
            if (!end || *end || end == optarg || !(f >= 0.001 && f <= 100))
                bad = "--probe-scale expects a factor (0.001-100)";
            o->probe_scale = f;
            break;
        }
        case O_HB:
            if (!parse_int(optarg, 1, 3600, &v))
                bad = "--heartbeat-s expects seconds (1-3600)";
            o->node_heartbeat_s = (int)v;
            break;
        case O_GRACE:
            if (!parse_int(optarg, 1, 3600000, &v))
                bad = "--grace-cap-ms expects milliseconds (1-3600000)";
            c->grace_cap_ms = v;
            break;
        case O_HISTORY:
            if (!parse_int(optarg, 1000, 100000000, &v))
                bad = "--history expects a number of events (1000-100000000)";
            o->history = (size_t)v;
            break;
        case O_NOCTL:
            o->no_controllers = true;
            break;
        case O_NOEVENTS:
            c->no_events = true;
            break;
        case O_FAULTS:
            c->faults = optarg;
            break;
        case O_FRESH:
            c->fresh = true;
            break;
        case O_NO_PERSIST:
            c->no_persist = true;
            break;
        case O_IMAGES: {
            size_t n = 0;
            while (n < KS_OPTS_MAX_IMAGES_FILES && o->images_files[n])
                n++;
            if (n == KS_OPTS_MAX_IMAGES_FILES)
                bad = "--images may be given at most 8 times";
            else
                o->images_files[n] = optarg;
            break;
        }
        case O_ANY_IMAGE:
            o->any_image = true;
            break;
        case O_PULL_MBPS: {
            char *end = NULL;
            double f = strtod(optarg, &end);
            if (!end || *end || end == optarg || !(f >= 0 && f <= 100000))
                bad = "--pull-mbps expects megabytes per second (0-100000; 0: pulls take no time)";
            o->pull_mbps = f;
            break;
        }
        case O_PULL_LATENCY:
            if (!parse_int(optarg, 0, 600000, &v))
                bad = "--pull-latency-ms expects milliseconds (0-600000)";
            o->pull_latency_ms = (int)v;
            break;
        case O_SERIALIZE_PULLS: {
            /* A Go bool flag: alone it means true; a value only as --serialize-image-pulls=V. */
            int b = optarg ? parse_bool(optarg) : 1;
            if (b < 0)
                bad = "--serialize-image-pulls expects true or false";
            o->parallel_pulls = b == 0;
            break;
        }
        case O_MAX_PARALLEL_PULLS:
            if (!parse_int(optarg, INT32_MIN, INT32_MAX, &v))
                bad = "--max-parallel-image-pulls expects a number of pulls";
            max_pulls = v;
            max_pulls_set = true;
            break;
        case 'v':
            if (!parse_int(optarg, 0, 3, &v))
                bad = "-v expects a verbosity 0-3";
            o->verbosity = (int)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "kubesim: %s, got \"%s\"\n", bad, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kubesim: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return -1;
    }
    if (!ks_kubelet_check_pulls(!o->parallel_pulls, max_pulls_set ? &max_pulls : NULL, msg,
                                sizeof(msg))) {
        fprintf(stderr, "kubesim: %s\n", msg);
        return -1;
    }
    o->max_parallel_pulls = max_pulls_set ? (int)max_pulls : 0;
    return 1;
}

/* ---- the fleet file ---- */

static json_t *as_string(const json_t *v, const char *def)
{
    if (json_is_string(v))
        return json_string(json_string_value(v));
    if (json_is_integer(v))
        return json_sprintf("%lld", (long long)json_integer_value(v));
    return def ? json_string(def) : NULL;
}

/* Builds the Node object of one fleet entry; GPU keys belong to nodesim and are ignored. */
static json_t *fleet_node(const json_t *e, const char *name)
{
    json_t *labels = json_is_object(json_object_get(e, "labels"))
                         ? json_deep_copy(json_object_get(e, "labels"))
                         : json_object();
    json_t *annotations = json_is_object(json_object_get(e, "annotations"))
                              ? json_deep_copy(json_object_get(e, "annotations"))
                              : json_object();
    json_t *node = json_pack("{s:{s:s, s:o, s:o}, s:{}, s:{s:{s:o, s:o, s:o}}}", "metadata", "name",
                             name, "labels", labels, "annotations", annotations, "spec", "status",
                             "capacity", "cpu", as_string(json_object_get(e, "cpu"), "8"), "memory",
                             as_string(json_object_get(e, "memory"), "32Gi"), "pods",
                             as_string(json_object_get(e, "pods"), "110"));
    if (!node)
        return NULL;
    const json_t *taints = json_object_get(e, "taints");
    if (json_is_array(taints) && json_array_size(taints) > 0)
        json_object_set_new(json_object_get(node, "spec"), "taints", json_deep_copy(taints));
    /* The container runtime the node reports (nodesim's `runtime` key; the kubelet's default
     * otherwise). */
    const json_t *rt = json_object_get(e, "runtime");
    if (json_is_string(rt))
        json_object_set_new(json_object_get(node, "status"), "nodeInfo",
                            json_pack("{s:O}", "containerRuntimeVersion", rt));
    json_t *es = as_string(json_object_get(e, "ephemeral-storage"), NULL);
    if (es)
        json_object_set_new(json_object_get(json_object_get(node, "status"), "capacity"),
                            "ephemeral-storage", es);
    return node;
}

static kc_code register_fleet(ks_sim *sim, const char *path, size_t *count, kc_err *err)
{
    json_t *docs = NULL;
    *count = 0;
    kc_code rc = kc_yaml_parse_file(path, &docs, err);
    if (rc != KC_OK) {
        kc_err_prefix(err, "fleet");
        return rc;
    }
    const json_t *nodes = json_object_get(json_array_get(docs, 0), "nodes");
    if (!json_is_array(nodes)) {
        rc = kc_err_set(err, KC_EINVALID,
                        "fleet %s: expected a top-level `nodes:` list of {name, count, cpu, "
                        "memory, labels, taints, runtime}",
                        path);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(nodes, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const json_t *cnt = json_object_get(e, "count");
        if (!name || !*name) {
            const json_t *nv = json_object_get(e, "name");
            rc = kc_err_set(err, KC_EINVALID, "fleet %s: nodes[%zu].name: %s", path, i,
                            !nv ? "Required value"
                                : "expected a string (quote names such as n, y, no, on that YAML "
                                  "reads as booleans)");
            goto out;
        }
        if (cnt && (!json_is_integer(cnt) || json_integer_value(cnt) < 0 ||
                    json_integer_value(cnt) > 100000)) {
            rc = kc_err_set(err, KC_EINVALID,
                            "fleet %s: nodes[%zu].count: expected an integer 0-100000", path, i);
            goto out;
        }
        /* With a count the name is a prefix: name-0 ... name-(count-1). */
        long n = cnt ? (long)json_integer_value(cnt) : 1;
        for (long k = 0; k < n; k++) {
            char nn[300];
            if (cnt)
                snprintf(nn, sizeof(nn), "%s-%ld", name, k);
            else
                snprintf(nn, sizeof(nn), "%s", name);
            json_t *node = fleet_node(e, nn);
            if (!node) {
                rc = kc_err_set(err, KC_ENOMEM, "out of memory building node %s", nn);
                goto out;
            }
            rc = ks_kubelet_add_node(sim, node, err);
            json_decref(node);
            /* Restored from --dir: the node is there already, with what happened to it since. */
            if (rc == KC_EALREADYEXISTS)
                rc = KC_OK;
            if (rc != KC_OK) {
                kc_err_prefix(err, "fleet %s: nodes[%zu]", path, i);
                goto out;
            }
            (*count)++;
        }
    }
out:
    json_decref(docs);
    return rc;
}

/* ---- the state directory ---- */

/* Opens (or, with --fresh, starts afresh) the store's state in --dir. */
static kc_code open_state(const cli *c, ks_store *st, ks_persist_info *info, kc_err *err)
{
    kc_code rc = ks_pki_mkdirs(c->dir, err);
    if (rc != KC_OK)
        return rc;
    if (c->fresh) {
        static const char *const names[] = {"store.snap", "store.log", "sa-tokens.json"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof(path), "%s/%s", c->dir, names[i]);
            if (unlink(path) != 0 && errno != ENOENT)
                return kc_err_set(err, KC_EIO, "cannot remove %s: %s", path, strerror(errno));
        }
    }
    return ks_store_persist_open(st, c->dir, info, err);
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    cli c;
    int pr = parse_args(argc, argv, &c);
    if (pr <= 0)
        return pr == 0 ? 0 : 1;
    /* Blocked before any thread exists, so only sigwait below sees them. Child processes get a
     * clean signal mask from libuv. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    static ks_sim sim;
    sim.opts = c.opts;
    kc_err err = {0};
    kc_code rc = KC_OK;
    char *cert = NULL, *key = NULL;
    int status = 1;
    sim.store = ks_store_new(sim.opts.history);
    if (!sim.store) {
        fprintf(stderr, "kubesim: out of memory creating the store\n");
        return 1;
    }
    ks_persist_info restored = {0};
    if (!c.no_persist && (rc = open_state(&c, sim.store, &restored, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_types_register_builtin(sim.store, &err)) != KC_OK)
        goto fail;
    ks_store_set_admission(sim.store, ks_admit, &sim);
    /* Before serving: Service deletions release addresses from the controllers' thread, which
     * must never race with admission creating the allocators. */
    if ((rc = ks_admit_init(&sim, &err)) != KC_OK)
        goto fail;
    if (restored.restored && (rc = ks_admit_restore_services(&sim, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_auth_new(&sim, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_auth_bootstrap(&sim, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_pki_init(&sim, &cert, &key, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_server_start(&sim, cert, key, &err)) != KC_OK)
        goto fail;
    if (c.faults && (rc = ks_faults_load_file(&sim, c.faults, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_pki_write_kubeconfig(&sim, sim.opts.kubeconfig, &err)) != KC_OK)
        goto fail;
    if (!sim.opts.no_controllers && (rc = ks_controllers_start(&sim, &err)) != KC_OK)
        goto fail;
    if ((rc = ks_kubelet_start(&sim, &err)) != KC_OK)
        goto fail;
    ks_kubelet_tuning tune = {.grace_cap_ms = (int)c.grace_cap_ms};
    ks_kubelet_tune(&sim, &tune);
    if (c.no_events)
        ks_kubelet_set_events(&sim, false);
    size_t nodes = 0;
    if (sim.opts.fleet && (rc = register_fleet(&sim, sim.opts.fleet, &nodes, &err)) != KC_OK)
        goto fail;
    char kcpath[PATH_MAX];
    if (sim.opts.kubeconfig)
        snprintf(kcpath, sizeof(kcpath), "%s", sim.opts.kubeconfig);
    else
        snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", sim.opts.dir);
    if (restored.restored)
        printf("kubesim: restored %zu objects at resourceVersion %llu from %s (%zu snapshot + %zu "
               "log records, %.0f ms)\n",
               restored.objects, (unsigned long long)restored.rv, sim.opts.dir,
               restored.snapshot_records, restored.log_records, restored.load_ms);
    printf("kubesim: serving %s; kubeconfig at %s\n", sim.server_url, kcpath);
    if (sim.http_url)
        printf("kubesim: plain HTTP at %s\n", sim.http_url);
    if (sim.opts.fleet)
        printf("kubesim: registered %zu nodes from %s\n", nodes, sim.opts.fleet);
    fflush(stdout);
    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    kc_info("kubesim: shutting down", "signal=%s", strsignal(sig));
    status = 0;
    goto shutdown;
fail:
    fprintf(stderr, "kubesim: %s\n", err.msg[0] ? err.msg : kc_code_name(rc));
shutdown:
    /* The API first, so no request reaches a part being stopped. */
    ks_server_stop(&sim);
    ks_controllers_stop(&sim);
    ks_kubelet_stop(&sim);
    ks_auth_free(&sim);
    /* Nothing runs or listens any more: say so before freeing the store, which takes seconds
     * with tens of thousands of objects (e2e/cluster down may stop waiting at this line). */
    ks_persist_stats ps;
    ks_store_persist_stats(sim.store, &ps);
    if (ps.records > 0)
        kc_info("kubesim: store log", "records=%llu bytes=%llu us_per_record=%.1f compactions=%llu",
                (unsigned long long)ps.records, (unsigned long long)ps.bytes,
                (double)ps.ns / 1000.0 / (double)ps.records, (unsigned long long)ps.compactions);
    if (status == 0) {
        printf("kubesim: stopped\n");
        fflush(stdout);
    }
    ks_store_free(sim.store);
    ks_admit_free(&sim);
    free(sim.ca_pem);
    free(sim.server_url);
    free(sim.http_url);
    free(cert);
    free(key);
    return status;
}
