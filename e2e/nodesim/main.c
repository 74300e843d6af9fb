/* nodesim: the simulated GPU fleet. Registers the nodes of a fleet file with an API server and
 * plays NVIDIA's node components on them; also injects faults and prints reference configs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_config.h"
#include "kc_log.h"
#include "kc_rest.h"
#include "ns_engine.h"
#include "ns_fault.h"
#include "ns_fleet.h"
#include "ns_migparted.h"
#include "ns_node.h"
#include "ns_reauth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  nodesim [run] --fleet FILE [--kubeconfig PATH] [options]\n"
            "      registers the fleet's nodes and simulates NVIDIA's node components on them\n"
            "  nodesim fault [--kubeconfig PATH] NODE SPEC\n"
            "      sets the node's faults (SPEC \"\" or \"none\" clears them), e.g.\n"
            "      xid:gpu=3  gpu-lost:gpu=7  driver-fail  mig-fail  mig-hang  notready  "
            "slow:factor=10\n"
            "      (several: comma-separated)\n"
            "  nodesim check-fleet FILE       validates a fleet file and prints its nodes\n"
            "  nodesim default-mig-config     prints the default mig-parted config.yaml\n"
            "\n"
            "run options:\n"
            "  --kubeconfig PATH        API server (default: $KUBECONFIG, then ~/.kube/config)\n"
            "  --workers N              reconcile threads (default 4)\n"
            "  --heartbeat-s S          node Lease renewal period (default 10)\n"
            "  --validator-image GLOB   images holding the validator (default: this project's and\n"
            "                           NVIDIA's validator and operator images)\n"
            "  --ready-file PATH        written once every node is registered\n"
            "  --driver-load-ms, --toolkit-ms, --plugin-ms, --gfd-ms, --validation-ms,\n"
            "  --mig-apply-ms, --mig-client-timeout-ms, --reboot-ms   component timings\n"
            "  --kubelet kubesim|kwok   what runs the nodes' pods (default kubesim); kwok writes\n"
            "                           pod status from templates, so nodesim writes a crash loop\n"
            "                           again when kwok's next write loses it\n"
            "  -v                       debug logging\n");
}

static int check_fleet(const char *path)
{
    ns_fleet *f = NULL;
    kc_err err;
    if (ns_fleet_load(path, &f, &err) != KC_OK) {
        fprintf(stderr, "nodesim: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < f->n_groups; i++) {
        const ns_fleet_group *g = &f->groups[i];
        char first[300];
        ns_fleet_node_name(g, 0, first, sizeof(first));
        printf("%s: %d node(s) from %s, %s\n", g->name, g->count, first,
               g->model ? g->model->name : "no GPU");
        if (g->model)
            printf("  %d x %s (%s), driver %s\n", g->gpus, g->model->name, g->model->product,
                   g->driver_version);
    }
    printf("%zu nodes\n", f->n_nodes);
    ns_fleet_free(f);
    return 0;
}

static int fault(const char *kubeconfig, const char *node, const char *spec)
{
    kc_config *cfg = NULL;
    kc_client *c = NULL;
    json_t *obj = NULL;
    kc_err err;
    int rc = 1;
    if (strcmp(spec, "none") == 0)
        spec = "";
    if (kc_config_load_default(kubeconfig, NULL, &cfg, &err) != KC_OK ||
        kc_client_new(cfg, NULL, &c, &err) != KC_OK ||
        kc_get(c, &KC_RES_NODES, NULL, node, &obj, &err) != KC_OK) {
        fprintf(stderr, "nodesim fault: %s\n", err.msg);
        goto out;
    }
    /* Validated against the node's GPU count, which nodesim records when it registers a node. */
    ns_faults f;
    const char *cnt = json_string_value(json_object_get(
        json_object_get(json_object_get(obj, "metadata"), "annotations"), NS_GPUS_ANNOTATION));
    if (!cnt) {
        fprintf(stderr, "nodesim fault: node %s was not registered by nodesim (no %s annotation)\n",
                node, NS_GPUS_ANNOTATION);
        goto out;
    }
    if (ns_fault_parse(spec, atoi(cnt), &f, &err) != KC_OK) {
        fprintf(stderr, "nodesim fault: %s\n", err.msg);
        goto out;
    }
    json_t *patch = json_pack("{s:{s:{s:o}}}", "metadata", "annotations", NS_FAULT_ANNOTATION,
                              *spec ? json_string(spec) : json_null());
    kc_code r = kc_patch(c, &KC_RES_NODES, NULL, node, KC_PATCH_MERGE, patch, NULL, NULL, &err);
    json_decref(patch);
    if (r != KC_OK) {
        fprintf(stderr, "nodesim fault: %s\n", err.msg);
        goto out;
    }
    printf(*spec ? "node/%s faults: %s\n" : "node/%s faults cleared%s\n", node, spec);
    rc = 0;
out:
    json_decref(obj);
    kc_client_free(c);
    kc_config_free(cfg);
    return rc;
}

enum {
    O_KUBECONFIG = 256,
    O_FLEET,
    O_WORKERS,
    O_HEARTBEAT,
    O_VALIDATOR,
    O_READY,
    O_DRIVER,
    O_TOOLKIT,
    O_PLUGIN,
    O_GFD,
    O_VALIDATION,
    O_MIGAPPLY,
    O_MIGCLIENT,
    O_REBOOT,
    O_KUBELET,
};

static bool parse_long(const char *s, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    if (argc >= 2 &&
        (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "default-mig-config")) {
        fputs(ns_migparted_default_yaml(), stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "check-fleet")) {
        if (argc != 3) {
            usage(stderr);
            return 2;
        }
        return check_fleet(argv[2]);
    }
    const char *kubeconfig = NULL, *fleet_path = NULL;
    if (argc >= 2 && !strcmp(argv[1], "fault")) {
        int i = 2;
        if (i + 1 < argc && !strcmp(argv[i], "--kubeconfig")) {
            kubeconfig = argv[i + 1];
            i += 2;
        }
        if (argc - i != 2) {
            usage(stderr);
            return 2;
        }
        return fault(kubeconfig, argv[i], argv[i + 1]);
    }
    int first = argc >= 2 && !strcmp(argv[1], "run") ? 1 : 0;
    argc -= first;
    argv += first;
    static const struct option longopts[] = {
        {"kubeconfig", required_argument, NULL, O_KUBECONFIG},
        {"fleet", required_argument, NULL, O_FLEET},
        {"workers", required_argument, NULL, O_WORKERS},
        {"heartbeat-s", required_argument, NULL, O_HEARTBEAT},
        {"validator-image", required_argument, NULL, O_VALIDATOR},
        {"ready-file", required_argument, NULL, O_READY},
        {"driver-load-ms", required_argument, NULL, O_DRIVER},
        {"toolkit-ms", required_argument, NULL, O_TOOLKIT},
        {"plugin-ms", required_argument, NULL, O_PLUGIN},
        {"gfd-ms", required_argument, NULL, O_GFD},
        {"validation-ms", required_argument, NULL, O_VALIDATION},
        {"mig-apply-ms", required_argument, NULL, O_MIGAPPLY},
        {"mig-client-timeout-ms", required_argument, NULL, O_MIGCLIENT},
        {"reboot-ms", required_argument, NULL, O_REBOOT},
        {"kubelet", required_argument, NULL, O_KUBELET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ns_engine_opts o = {0};
    int c;
    long v = 0;
    while ((c = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
        if (c >= O_WORKERS && c != O_VALIDATOR && c != O_READY && c != O_KUBELET &&
            !parse_long(optarg, &v)) {
            fprintf(stderr, "nodesim: %s: expected a non-negative integer\n", optarg);
            return 2;
        }
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            kc_log_set_level(KC_LOG_DEBUG);
            break;
        case O_KUBECONFIG:
            kubeconfig = optarg;
            break;
        case O_FLEET:
            fleet_path = optarg;
            break;
        case O_WORKERS:
            o.workers = (int)v;
            break;
        case O_HEARTBEAT:
            o.heartbeat_s = v;
            break;
        case O_VALIDATOR:
            o.validator_glob = optarg;
            break;
        case O_READY:
            o.ready_file = optarg;
            break;
        case O_DRIVER:
            o.timings.driver_load_ms = v;
            break;
        case O_TOOLKIT:
            o.timings.toolkit_ms = v;
            break;
        case O_PLUGIN:
            o.timings.plugin_ms = v;
            break;
        case O_GFD:
            o.timings.gfd_ms = v;
            break;
        case O_VALIDATION:
            o.timings.validation_ms = v;
            break;
        case O_MIGAPPLY:
            o.timings.mig_apply_ms = v;
            break;
        case O_MIGCLIENT:
            o.timings.mig_client_timeout_ms = v;
            break;
        case O_REBOOT:
            o.timings.reboot_ms = v;
            break;
        case O_KUBELET:
            if (strcmp(optarg, "kubesim") && strcmp(optarg, "kwok")) {
                fprintf(stderr, "nodesim: --kubelet %s: expected kubesim or kwok\n", optarg);
                return 2;
            }
            o.template_kubelet = !strcmp(optarg, "kwok");
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || !fleet_path) {
        fprintf(stderr, "nodesim: %s\n",
                fleet_path ? "unexpected arguments" : "--fleet FILE is required");
        usage(stderr);
        return 2;
    }
    ns_fleet *fleet = NULL;
    kc_config *cfg = NULL;
    kc_err err;
    if (ns_fleet_load(fleet_path, &fleet, &err) != KC_OK ||
        kc_config_load_default(kubeconfig, NULL, &cfg, &err) != KC_OK) {
        fprintf(stderr, "nodesim: %s\n", err.msg);
        ns_fleet_free(fleet);
        return 1;
    }
    /* A kubesim whose state was reset writes its kubeconfig again with a new token: follow it
     * rather than stay Unauthorized. */
    ns_reauth *reauth = NULL;
    if (ns_reauth_start(cfg, 1000, &reauth, &err) != KC_OK)
        kc_warn("nodesim: the token will not follow the kubeconfig", "err=\"%s\"", err.msg);
    o.config = cfg;
    o.fleet = fleet;
    kc_code rc = ns_engine_run(&o, &err);
    if (rc != KC_OK)
        fprintf(stderr, "nodesim: %s\n", err.msg);
    ns_reauth_stop(reauth);
    kc_config_free(cfg);
    ns_fleet_free(fleet);
    return rc == KC_OK ? 0 : 1;
}
