/* gpu-operator: the operator's program: flags, metrics and health endpoints, leader election,
 * then the controller until SIGTERM. */
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_config.h"
#include "kc_httpd.h"
#include "kc_leader.h"
#include "kc_log.h"
#include "kc_metrics.h"
#include "op_controller.h"
#include "op_crd_apply.h" /* chart hook modes */
#include "op_render.h"
#include "op_policy.h" /* OP_VERSION */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gpu-operator [options]\n"
        "Reconciles the nvidia.com/v1 ClusterPolicy: deploys NVIDIA's GPU components on the\n"
        "cluster's GPU nodes and walks each node through driver, container toolkit, device\n"
        "plugin and MIG manager, gating each on a vectorAdd validation pod.\n\n"
        "  --kubeconfig PATH                 API server (default: in-cluster, then $KUBECONFIG,\n"
        "                                    then ~/.kube/config)\n"
        "  --states-dir DIR                  manifests of the states (default: $STATES_DIR, then\n"
        "                                    /opt/gpu-operator/states, then ./states)\n"
        "  --metrics-bind-address ADDR       Prometheus /metrics (default :8080; 0 disables)\n"
        "  --health-probe-bind-address ADDR  /healthz and /readyz (default :8081; 0 disables)\n"
        "  --leader-elect                    run only while holding the Lease\n"
        "  --leader-elect-namespace NS       where the Lease lives (default: the namespace)\n"
        "  --operator-image IMAGE            validator image when the spec names none\n"
        "  --workers N                       reconcile threads (default 8)\n"
        "  --kube-api-qps N                  API request rate limit (default 500, burst 2x)\n"
        "  --validation-backoff-ms MS        first retry delay of a failed validation (5000)\n"
        "  --image-prepull BOOL              pull a GPU node's later operand images while its\n"
        "                                    first ones start (true, the default, or false)\n"
        "  --log-level LEVEL                 debug, info (default), warn, error or off\n"
        "  --log-format FORMAT               text (logfmt, default) or json (one object a line)\n"
        "  --log-time-encoding ENC           rfc3339 (default), rfc3339nano, iso8601, epoch,\n"
        "                                    millis or nano\n"
        "  -v                                debug logs (--log-level debug)\n"
        /* --- chart hook modes (op_crd_apply.c) --- */
        "Helm hook modes (do one thing and exit):\n"
        "  --apply-crd FILE                  create or update the CRD in FILE, wait until\n"
        "                                    Established (a bare name is looked up in\n"
        "                                    $CRDS_DIR, then /opt/gpu-operator/crds)\n"
        "  --delete-clusterpolicy NAME       delete the ClusterPolicy, wait until the\n"
        "                                    operator's finalizer let it go\n"
        "  --delete-crd NAME                 then delete the CustomResourceDefinition, wait\n"
        "                                    until it is gone\n"
        "  --hook-timeout S                  how long each waits (default 120)\n"
        /* --- end chart hook modes --- */
        "  --version, --help\n"
        "Environment: OPERATOR_NAMESPACE (default gpu-operator); KC_LOG_LEVEL, KC_LOG_FORMAT and\n"
        "KC_LOG_TIME, the defaults of the three log flags.\n");
}

/* A flag value its parser refused (parsed < 0): says so and what the flag takes. */
static bool bad_value(const char *flag, const char *arg, int parsed, const char *want)
{
    if (parsed >= 0)
        return false;
    fprintf(stderr, "gpu-operator: --%s: \"%s\" is not %s\n", flag, arg, want);
    return true;
}

static op_controller *g_ctl;
static atomic_bool g_leading, g_stop, g_lost;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static void wake(void)
{
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    int sig;
    if (sigwait(set, &sig) == 0) {
        kc_info("signal received; stopping", "signal=%d", sig);
        atomic_store(&g_stop, true);
        op_controller_stop(g_ctl);
        wake();
    }
    return NULL;
}

static void on_leading(void *ud)
{
    (void)ud;
    atomic_store(&g_leading, true);
    kc_info("became the leader", "%s", "");
    wake();
}
static void on_lost(void *ud)
{
    (void)ud;
    if (!atomic_load(&g_leading))
        return;
    /* A leader that lost the Lease stops at once; the Deployment restarts it as a candidate. */
    kc_warn("leadership lost; stopping", "%s", "");
    atomic_store(&g_lost, true);
    op_controller_stop(g_ctl);
    wake();
}

/* A standby replica is ready (it only waits for the Lease); the leader once its caches synced. */
static bool ready_check(void *ud, char *reason, size_t size)
{
    (void)ud;
    if (!atomic_load(&g_leading) || op_controller_synced(g_ctl))
        return true;
    snprintf(reason, size, "caches not synced yet");
    return false;
}

enum {
    O_KUBECONFIG = 256,
    O_STATES,
    O_METRICS,
    O_HEALTH,
    O_LEADER,
    O_LEADER_NS,
    O_IMAGE,
    O_WORKERS,
    O_QPS,
    O_BACKOFF,
    O_PREPULL,
    O_VERSION,
    O_LOG_LEVEL,
    O_LOG_FORMAT,
    O_LOG_TIME,
    O_APPLY_CRD, /* chart hook modes */
    O_DELETE_POLICY,
    O_DELETE_CRD,
    O_HOOK_TIMEOUT
};

/* --- chart hook modes: one API call sequence, then exit --- */
static int run_hook(const char *kubeconfig, const char *crd, const char *policy,
                    const char *del_crd, int timeout_s)
{
    kc_err err;
    kc_config *cfg = NULL;
    kc_client *client = NULL;
    char path[4096];
    int rc = 1;
    kc_client_opts co = {.user_agent = "gpu-operator/hook"};
    if (kc_config_load_default(kubeconfig, NULL, &cfg, &err) != KC_OK ||
        kc_client_new(cfg, &co, &client, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    if (crd && op_crd_apply(client, op_crd_resolve(crd, NULL, path, sizeof(path)), timeout_s,
                            stdout, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    if (policy && op_policy_delete_wait(client, policy, timeout_s, stdout, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    if (del_crd && op_crd_delete_wait(client, del_crd, timeout_s, stdout, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    rc = 0;
out:
    fflush(stdout);
    kc_client_free(client);
    kc_config_free(cfg);
    return rc;
}
/* --- end chart hook modes --- */

int main(int argc, char **argv)
{
    /* glibc gives each thread that allocates its own arena (up to 8 per core), each keeping
     * its own free memory; the workers' allocations are small and brief, so two arenas hold the
     * heap with far less of it idle. */
    mallopt(M_ARENA_MAX, 2);
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, O_KUBECONFIG},
        {"states-dir", required_argument, NULL, O_STATES},
        {"metrics-bind-address", required_argument, NULL, O_METRICS},
        {"health-probe-bind-address", required_argument, NULL, O_HEALTH},
        {"leader-elect", no_argument, NULL, O_LEADER},
        {"leader-elect-namespace", required_argument, NULL, O_LEADER_NS},
        {"operator-image", required_argument, NULL, O_IMAGE},
        {"workers", required_argument, NULL, O_WORKERS},
        {"kube-api-qps", required_argument, NULL, O_QPS},
        {"validation-backoff-ms", required_argument, NULL, O_BACKOFF},
        {"image-prepull", required_argument, NULL, O_PREPULL},
        {"version", no_argument, NULL, O_VERSION},
        {"log-level", required_argument, NULL, O_LOG_LEVEL},
        {"log-format", required_argument, NULL, O_LOG_FORMAT},
        {"log-time-encoding", required_argument, NULL, O_LOG_TIME},
        {"apply-crd", required_argument, NULL, O_APPLY_CRD}, /* chart hook modes */
        {"delete-clusterpolicy", required_argument, NULL, O_DELETE_POLICY},
        {"delete-crd", required_argument, NULL, O_DELETE_CRD},
        {"hook-timeout", required_argument, NULL, O_HOOK_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *kubeconfig = NULL, *states_dir = getenv("STATES_DIR"), *metrics_addr = ":8080",
               *health_addr = ":8081", *leader_ns = NULL, *image = NULL;
    bool leader_elect = false;
    int workers = 0;
    double qps = 0;
    long backoff = 0;
    bool prepull = true;
    const char *hook_crd = NULL, *hook_policy = NULL, *hook_del_crd = NULL; /* chart hook modes */
    int hook_timeout = 120;
    int c;
    while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            kc_log_set_level(KC_LOG_DEBUG);
            break;
        case O_VERSION:
            printf("gpu-operator %s\n", OP_VERSION);
            return 0;
        case O_LOG_LEVEL: {
            int l = kc_log_parse_level(optarg);
            if (bad_value("log-level", optarg, l, "one of debug, info, warn, error, off"))
                return 2;
            kc_log_set_level((kc_log_level)l);
            break;
        }
        case O_LOG_FORMAT: {
            int f = kc_log_parse_format(optarg);
            if (bad_value("log-format", optarg, f, "text or json"))
                return 2;
            kc_log_set_format((kc_log_format)f);
            break;
        }
        case O_LOG_TIME: {
            int t = kc_log_parse_time_encoding(optarg);
            if (bad_value("log-time-encoding", optarg, t,
                          "one of rfc3339, rfc3339nano, iso8601, epoch, millis, nano"))
                return 2;
            kc_log_set_time_encoding((kc_log_time)t);
            break;
        }
        case O_KUBECONFIG:
            kubeconfig = optarg;
            break;
        case O_STATES:
            states_dir = optarg;
            break;
        case O_METRICS:
            metrics_addr = optarg;
            break;
        case O_HEALTH:
            health_addr = optarg;
            break;
        case O_LEADER:
            leader_elect = true;
            break;
        case O_LEADER_NS:
            leader_ns = optarg;
            break;
        case O_IMAGE:
            image = optarg;
            break;
        case O_WORKERS:
            workers = atoi(optarg);
            break;
        case O_QPS:
            qps = atof(optarg);
            break;
        case O_BACKOFF:
            backoff = atol(optarg);
            break;
        case O_PREPULL:
            if (strcmp(optarg, "true") && strcmp(optarg, "false")) {
                fprintf(stderr, "gpu-operator: --image-prepull: \"%s\" is not true or false\n",
                        optarg);
                return 2;
            }
            prepull = strcmp(optarg, "true") == 0;
            break;
        case O_APPLY_CRD: /* chart hook modes */
            hook_crd = optarg;
            break;
        case O_DELETE_POLICY:
            hook_policy = optarg;
            break;
        case O_DELETE_CRD:
            hook_del_crd = optarg;
            break;
        case O_HOOK_TIMEOUT:
            hook_timeout = atoi(optarg);
            if (hook_timeout <= 0) {
                fprintf(stderr, "gpu-operator: --hook-timeout: expected seconds > 0, got %s\n",
                        optarg);
                return 2;
            }
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "gpu-operator: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    if (hook_crd || hook_policy || hook_del_crd) /* chart hook modes */
        return run_hook(kubeconfig, hook_crd, hook_policy, hook_del_crd, hook_timeout);
    const char *ns = getenv("OPERATOR_NAMESPACE");
    if (!ns || !*ns)
        ns = "gpu-operator";
    if (!states_dir)
        states_dir =
            access("/opt/gpu-operator/states", R_OK) == 0 ? "/opt/gpu-operator/states" : "states";

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = 1;
    kc_err err;
    op_states *states = NULL;
    kc_config *cfg = NULL;
    kc_registry *reg = NULL;
    kc_httpd *metrics = NULL, *health = NULL;
    kc_client *lclient = NULL;
    kc_leader *leader = NULL;
    if (op_states_load(states_dir, &states, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    if (kc_config_load_default(kubeconfig, NULL, &cfg, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    kc_metric *build = NULL;
    if (kc_registry_new(&reg, &err) != KC_OK || kc_metrics_register_process(reg, &err) != KC_OK ||
        kc_metrics_gauge(reg, "gpu_operator_build_info", "1, labelled with the operator's version",
                         KC_LABELS("version"), &build, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    kc_gauge_set(kc_metric_with(build, KC_LABELS(OP_VERSION)), 1);
    /* Who this replica is: the Lease holder identity and part of its API user agent. */
    char host[128] = "", id[200];
    gethostname(host, sizeof(host) - 1);
    snprintf(id, sizeof(id), "%s_%d", host, (int)getpid());
    op_controller_opts co = {.config = cfg,
                             .identity = id,
                             .qps = qps,
                             .ns = ns,
                             .states = states,
                             .operator_image = image,
                             .metrics = reg,
                             .workers = workers,
                             .validation_backoff_ms = backoff,
                             .no_image_prepull = !prepull};
    if (op_controller_new(&co, &g_ctl, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    if (strcmp(metrics_addr, "0") != 0) {
        kc_httpd_opts ho = {.addr = metrics_addr, .registry = reg};
        if (kc_httpd_start(&ho, &metrics, &err) != KC_OK) {
            fprintf(stderr, "gpu-operator: metrics: %s\n", err.msg);
            goto out;
        }
    }
    if (strcmp(health_addr, "0") != 0) {
        kc_httpd_opts ho = {.addr = health_addr, .ready = ready_check};
        if (kc_httpd_start(&ho, &health, &err) != KC_OK) {
            fprintf(stderr, "gpu-operator: health: %s\n", err.msg);
            goto out;
        }
    }
    pthread_t sig;
    pthread_create(&sig, NULL, signal_thread, &set);
    pthread_detach(sig);
    if (leader_elect) {
        /* Its own user agent, the identity in it: a partition of this replica's Lease traffic
         * alone can be simulated (e2e/chaos.d/leader_partition.sh). */
        char lagent[300];
        snprintf(lagent, sizeof(lagent), "gpu-operator@%s/leader", id);
        kc_client_opts lo = {
            /* No retries inside the client: the elector retries every retry period, and the
             * release at exit is one attempt that cannot hold the exit up. */
            .timeout_ms = 4000,
            .max_retries = -1,
            .user_agent = lagent};
        kc_leader_config lc = {.namespace_ = leader_ns ? leader_ns : ns,
                               .name = "53822513.nvidia.com",
                               .identity = id,
                               .on_started_leading = on_leading,
                               .on_stopped_leading = on_lost};
        if (kc_client_new(cfg, &lo, &lclient, &err) != KC_OK ||
            kc_leader_start(lclient, &lc, &leader, &err) != KC_OK) {
            fprintf(stderr, "gpu-operator: leader election: %s\n", err.msg);
            goto out;
        }
        kc_info("waiting to become the leader", "identity=%s", id);
        pthread_mutex_lock(&g_mu);
        while (!atomic_load(&g_leading) && !atomic_load(&g_stop))
            pthread_cond_wait(&g_cv, &g_mu);
        pthread_mutex_unlock(&g_mu);
        if (atomic_load(&g_stop)) {
            rc = 0;
            goto out;
        }
    } else {
        atomic_store(&g_leading, true);
    }
    if (op_controller_run(g_ctl, &err) != KC_OK) {
        fprintf(stderr, "gpu-operator: %s\n", err.msg);
        goto out;
    }
    rc = atomic_load(&g_lost) ? 1 : 0;
out:
    kc_leader_stop(leader);
    kc_client_free(lclient);
    kc_httpd_stop(metrics);
    kc_httpd_stop(health);
    op_controller_free(g_ctl);
    g_ctl = NULL;
    kc_registry_free(reg);
    kc_config_free(cfg);
    op_states_free(states);
    return rc;
}
