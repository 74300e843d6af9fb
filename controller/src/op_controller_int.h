/* op_controller_int: the controller's shared state, for op_controller.c and its reconcilers
 * (op_apply.c, op_nodes.c, op_status.c). */
#ifndef OP_CONTROLLER_INT_H
#define OP_CONTROLLER_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <uv.h>

#include "kc_events.h"
#include "kc_informer.h"
#include "kc_pack.h"
#include "kc_map.h"
#include "kc_migparted.h"
#include "kc_rest.h"
#include "kc_workqueue.h"
#include "op_controller.h"
#include "op_gate.h"

#define OP_KEY_POLICY "policy"
#define OP_KEY_STATUS "status"
/* A failed write requeues its key after this, doubling per failure up to the max. */
#define OP_WRITE_BACKOFF_MS     250L
#define OP_WRITE_BACKOFF_MAX_MS 30000L
/* The field manager of the operator's server-side applies. */
#define OP_FIELD_MANAGER "gpu-operator"
/* A watch that delivered nothing (not even a bookmark) for this long is started again. */
#define OP_WATCH_IDLE_TIMEOUT_S 150
/* What a reconciler returns when it requeued its key itself (op_requeue_failed). */
#define OP_REQUEUED    (-2L)
#define OP_NODE_PREFIX "node/"

/* A kind the operator renders and therefore watches (label-selected on OP_MANAGED_LABEL). */
typedef struct op_kind {
    const char *api_version, *kind;
    kc_resource res;
    /* NULL when the server does not serve the kind. Set and cleared on the loop thread only,
     * under the write side of kinds_mu; workers read it under the read side. */
    kc_informer *inf;
    /* A kind from a CustomResourceDefinition someone else installs (ServiceMonitor: the
     * Prometheus Operator's): the CRD's name, watched so that the kind's informer starts when the
     * CRD is installed and stops when it is deleted, without a restart. NULL: a built-in kind,
     * discovered once at start. */
    const char *crd;
    kc_informer *crd_inf; /* that CRD, watched by name (NULL: built-in, or not allowed) */
    bool pending;         /* its informer was started and has not synced yet */
} op_kind;

/* A node's driver upgrade, from NVIDIA's nvidia.com/gpu-driver-upgrade-state label: the states
 * NVIDIA's upgrade library counts (OP_UP_NONE: a node whose driver the operator does not manage,
 * or a value it does not know). */
typedef enum op_upgrade_state {
    OP_UP_NONE,
    OP_UP_UNKNOWN, /* managed, no label yet */
    OP_UP_REQUIRED,
    OP_UP_CORDON,
    OP_UP_WAIT_JOBS,
    OP_UP_POD_DELETION,
    OP_UP_DRAIN,
    OP_UP_POD_RESTART,
    OP_UP_VALIDATION,
    OP_UP_UNCORDON,
    OP_UP_DONE,
    OP_UP_FAILED,
    OP_UP_COUNT
} op_upgrade_state;

/* What a node's last reconcile found. */
typedef struct op_node_result {
    op_node_phase phase;
    int stage;
    char *reason; /* owned; NULL reads as "" (one per node: sized to fit, not a fixed buffer) */
    unsigned char upgrade; /* op_upgrade_state */
    bool unavailable;      /* cordoned or not Ready (what NVIDIA's upgrade counts as unavailable) */
    bool sharing_invalid;  /* the device plugin would refuse the node's sharing config */
    bool mig_invalid;      /* what the node asks of MIG cannot happen (op_migcheck) */
} op_node_result;

/* The reason, never NULL; and the map's free function for results. */
const char *op_node_result_reason(const op_node_result *r);
void op_node_result_free(void *r);

/* The config a failed MIG state belongs to (op_controller.mig_owner). */
typedef struct op_mig_owner {
    char *config;         /* owned */
    uint64_t stale_since; /* wall ms since the node asks for another config; 0 when it does not */
} op_mig_owner;
void op_mig_owner_free(void *o);

/* The ConfigMaps whose data the operator reads (op_wanted_configmap): the device plugin's sharing
 * configs and the MIG manager's config. */
enum { OP_CM_SHARING, OP_CM_MIG, OP_CM_WANTED };

struct op_controller {
    op_controller_opts o;
    char *ns;
    /* The one client: watches, pipelined writes and blocking requests share its connection (one
     * over HTTP/2) on the loop. */
    kc_client *api;
    kc_pipe *pipe; /* the node reconciler's writes, answered later on the loop (during run) */
    uv_loop_t loop;
    uv_async_t stop_async;
    uv_timer_t tick;
    uv_timer_t trim; /* returns freed heap to the system now and then */
    /* When the ClusterPolicy status was last written (op_mono_ms; the status key reconciles
     * one at a time). */
    uint64_t status_written_ms;
    /* What that write got back (NULL: none yet): until the policy cache reaches its
     * resourceVersion, the cached status is older than the server's. */
    json_t *status_written;
    kc_informer *policies, *nodes, *pods, *daemonsets;
    /* ConfigMaps of the operator namespace as identities (name, resourceVersion), with their data
     * only for those cm_want names: the sharing configs (spec.devicePlugin.config.name) and the MIG
     * manager's (spec.migManager.config.name). */
    kc_informer *configmaps;
    pthread_mutex_t cm_mu; /* guards cm_want and cm_fetched */
    char cm_want[OP_CM_WANTED][256];
    json_t *cm_fetched[OP_CM_WANTED]; /* cm_want as read directly, while its cached record has no
                                         data */
    op_kind *kinds;
    size_t n_kinds;
    /* Guards op_kind.inf of the kinds from optional CRDs: the policy reconcile holds the read
     * side; the loop only ever tries the write side (a worker's request may wait on the loop),
     * and tries again from crd_timer when a reconcile holds it. */
    pthread_rwlock_t kinds_mu;
    uv_timer_t crd_timer; /* starts, stops and watches the sync of the optional kinds' informers */
    kc_workqueue *q;
    pthread_t *workers;
    int n_workers;
    bool workers_started;
    atomic_bool synced;
    atomic_bool lost_keys;     /* a key could not be queued: the next resync queues everything */
    atomic_ulong queued;       /* keys queued so far: whether anything happened since a trim */
    unsigned long trim_queued; /* (loop thread) `queued` at the last trim tick */
    int trim_quiet;            /* (loop thread) trim ticks in a row that saw nothing queued */
    atomic_bool running;       /* the loop and its stop handle exist */
    atomic_long gpu_nodes;     /* GPU nodes in the node cache (kept by the node handlers) */
    /* The active ClusterPolicy has been ready (its status said so, or was written so); false
     * again for a policy that has no status yet. A node that gets ready after that, joining or
     * coming back, is announced by an Event; during the first rollout the policy's own Ready
     * Event and status counts say it. */
    atomic_bool policy_was_ready;
    kc_event_recorder *events;

    pthread_mutex_t mu; /* guards everything below */
    json_t *policy;     /* the active ClusterPolicy (as last reconciled), or NULL */
    json_t *last_spec;  /* its spec at the last node fan-out */
    char render_error[512];
    char runtime[16];    /* the GPU nodes' container runtime last rendered with ("": none known) */
    json_t *ds_by_state; /* state name → array of DaemonSet names rendered */
    /* Objects of optional kinds (op_kind.crd) the last policy reconcile rendered: {"applied":
     * ["Kind name", ...], "missing": [{"object": "Kind name", "crd": ..., "requested": bool}]}
     * (missing: the CRD is not served; requested: the spec opted in, not a default). NULL when
     * none was rendered. */
    json_t *optional;
    kc_map *results;      /* node name → op_node_result* */
    kc_map *pods_by_node; /* node name → pod_set: names of its pods in our namespace */
    /* app label → (uintptr_t) pods in our namespace with that label and no deletionTimestamp,
     * kept by the pod handlers (under mu; emptied when a run starts its new caches) */
    kc_map *app_pods;
    /* app label → op_app_fail: a pod of that app failing to start (the last one seen), for the
     * status of states whose nodes are not gated (under mu) */
    kc_map *app_failing;

    /* metrics */
    kc_series *m_gpu_nodes, *m_status, *m_reconciles, *m_failed, *m_last_success, *m_nfd;
    kc_metric *m_state_nodes, *m_duration;
    /* NVIDIA's driver-upgrade gauges (op_status.c), in its order: auto upgrade enabled, in
     * progress, done, failed, available, pending. */
    kc_series *m_upgrade[6];
    kc_series *m_delay;   /* event received → first resulting write sent, per transition */
    kc_series *m_queued;  /* event received → the reconcile's start */
    kc_series *m_applied; /* event received → last resulting write acknowledged */
    kc_series *m_ignored; /* node/pod updates that changed nothing the operator reads */
    kc_map *event_at;     /* node key → first unprocessed event time (boxed ms), under mu */
    kc_map *admitted;     /* nodes admitted to a driver upgrade, not yet seen so in the cache */
    kc_map *expect;       /* node name → op_expect*: own writes the caches have not shown yet */
    /* node name → op_mig_owner*: for a node whose nvidia.com/mig.config.state reads failed, the
     * config that failure belongs to (a relabelled node keeps the old failure until the MIG
     * manager takes the new config up). Under mu. */
    kc_map *mig_owner;
    /* The MIG manager's config, parsed once per ConfigMap version (op_nodes.c; under mig_mu). */
    pthread_mutex_t mig_mu;
    char *mig_cm_key;     /* "<name>@<resourceVersion>" of the parsed ConfigMap */
    kc_migparted *mig_mp; /* NULL when it did not parse (mig_parse_err says why) */
    char mig_parse_err[400];
    kc_series *m_dict;           /* strings in the node and pod caches' shared dictionary */
    kc_series *m_throttled;      /* time requests waited for the client-side rate limit */
    kc_series *m_sharing_errors; /* GPU nodes whose sharing config the plugin would refuse */
    kc_series *m_mig_errors;     /* GPU nodes whose MIG config cannot be applied as asked */

    /* The node and pod caches keep packed records over one string dictionary. */
    kc_pack_dict *pack;
    kc_informer_codec pack_codec;
};

/* Node labels and annotations the node cache keeps (the others are dropped on arrival). */
bool op_node_label_cached(const char *key);
bool op_node_annotation_cached(const char *key);
/* The pod cache's transform (consumes obj): what the operator keeps of a Pod. */
json_t *op_pod_transform(json_t *obj, const kc_resource *res, void *ud);

/* ---- op_controller.c: the work queue ---- */
/* Queues key after delay_ms (<= 0: now). A key the queue cannot take (out of memory) is logged
 * and everything is queued again by the next resync (every 10 s); a stopping queue drops it. */
void op_enqueue(op_controller *c, const char *key, long delay_ms);
/* Queues key again after a failure: per-key exponential backoff (reset by a reconcile that
 * needs no requeue), and not before the server's Retry-After. */
void op_requeue_failed(op_controller *c, const char *key, int retry_after_s);

/* ---- op_apply.c: the policy reconciler ---- */
/* Renders every state from the active policy, applies what changed, deletes what is no longer
 * rendered, keeps the finalizer, and cleans up on deletion. Returns a requeue delay (ms) or -1. */
long op_reconcile_policy(op_controller *c);
/* The kind entry for an apiVersion/kind, or NULL. */
op_kind *op_kind_find(op_controller *c, const char *api_version, const char *kind);

/* ---- op_nodes.c: the node reconciler ---- */
/* Hands the node's writes (labels, validation pods) to c->pipe and returns without waiting for
 * them; a write that fails requeues the node. ev: when the watch event that queued the node
 * arrived (0: none), start: when this reconcile started (CLOCK_MONOTONIC ms); once its last write
 * is answered the transition is timed in the m_queued/m_delay/m_applied histograms. Returns a
 * requeue delay (ms) or -1. */
long op_reconcile_node(op_controller *c, const char *name, uint64_t ev, uint64_t start);
/* Pods in the operator's namespace labelled app=<app> and not terminating (a DaemonSet's). */
long op_app_pods(op_controller *c, const char *app);
/* Whether a pod labelled app is failing to start (an image that cannot be pulled, a crash loop);
 * why: op_pod_failing's text. */
bool op_app_failing(op_controller *c, const char *app, char *why, size_t size);
/* CLOCK_MONOTONIC in milliseconds (transition timings). */
uint64_t op_mono_ms(void);
/* A resourceVersion as a number, for ordering the versions one server gave (0: not a number). */
uint64_t op_rv_num(const char *rv);
/* Frees an op_expect (kc_map_free callback). */
void op_expect_free(void *e);
/* Drops the expectations the caches have caught up with, and those past their deadline ahead_ms
 * from now (a node not reconciled again would keep its last one); returns how many. */
size_t op_expect_sweep(op_controller *c, uint64_t ahead_ms);
/* Records what a reconcile of node `name` is about to write (labels and annotations: value or
 * null for removed; created: the pods as the gate reads them; deleted: pod names; writes: how
 * many requests, each answered through the node's batch), folded with what the node's earlier
 * reconciles wrote that the caches do not show yet. */
void op_expect_record(op_controller *c, const char *name, const json_t *labels,
                      const json_t *annotations, json_t *created, json_t *deleted, int writes);
/* What the node's reconciles expect to see of their writes, as {"labels", "annotations",
 * "created": [pod names], "deleted": [pod names]} (new reference), or NULL (tests, logs). */
json_t *op_expect_describe(op_controller *c, const char *name);
/* Pods of the operator's namespace on a node (new array of new references; NULL when out of
 * memory). */
json_t *op_node_pods(op_controller *c, const char *node);

/* The ConfigMap `name` of the operator namespace with its data (new reference), and from now on
 * the one of `slot` (OP_CM_SHARING, OP_CM_MIG) whose data the ConfigMap cache keeps; NULL when it
 * does not exist, or, with *failed set, when it could not be read (out of memory, a failed GET). */
json_t *op_wanted_configmap(op_controller *c, int slot, const char *name, bool *failed);

/* ---- op_status.c: the status reconciler ---- */
long op_reconcile_status(op_controller *c);

/* A new reference to the active policy (NULL when none). */
json_t *op_active_policy(op_controller *c);

#endif
