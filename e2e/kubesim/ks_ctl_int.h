/* ks_ctl_int: the internals shared by kubesim's in-process controllers: the watch-fed cache and
 * its indexes, the per-controller workers, write helpers and the Event recorder. */
#ifndef KS_CTL_INT_H
#define KS_CTL_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_error.h"
#include "kc_map.h"
#include "kc_workqueue.h"
#include "ks_sim.h"
#include "ks_store.h"

/* The kinds the controllers index; everything else is KSC_K_OTHER (still tracked for GC). */
typedef enum ksc_kind {
    KSC_K_OTHER = 0,
    KSC_K_NAMESPACE,
    KSC_K_NODE,
    KSC_K_POD,
    KSC_K_SERVICE,
    KSC_K_ENDPOINTS,
    KSC_K_DEPLOYMENT,
    KSC_K_REPLICASET,
    KSC_K_DAEMONSET,
    KSC_K_CREV,
    KSC_K_CRD,
    KSC_K_EVENT,
    KSC_K_COUNT
} ksc_kind;

/* One cached object. Entries are owned by the cache and only touched with ksc->mu held; code
 * that releases the lock keeps no entry pointer, only references to `obj` (never modified). */
typedef struct ksc_ent {
    ksc_kind kind;
    const ks_rtype *t;
    char *key;   /* "<group>/<resource>/<ns>/<name>": the cache's primary key */
    char *nskey; /* "ns/name" or "name": the key within its kind and in work queues */
    char *ns;    /* "" for cluster-scoped objects */
    char *name;
    char *uid;
    json_t *obj;
    uint64_t rv;
    char *node;    /* pods: spec.nodeName when set */
    char **owners; /* uids of metadata.ownerReferences, as indexed in ksc->deps */
    size_t nowners;
    char *ctrl_uid; /* uid of the controller=true owner, or NULL */
    bool pending;   /* pods: in ksc->pending (waiting for the scheduler) */
    json_t *req;    /* pods bound and not terminated: their requests, counted in node_usage */
    json_t *hports; /* with req: the pod's host ports (ksc_pod_host_ports) */
    /* Nodes, digested once per change for the scheduler's scan: */
    json_t *alloc;        /* allocatable (else capacity) in thousandths */
    long long acpu, amem; /* alloc's cpu and memory (0 when absent) */
    long long apods;      /* alloc's pods, -1 when absent */
    bool ready;           /* condition Ready is True */
    bool unschedulable;   /* spec.unschedulable */
    bool tainted;         /* has NoSchedule or NoExecute taints */
} ksc_ent;

/* What the pods bound to one node request (kept by the cache for the scheduler). */
typedef struct ksc_usage {
    json_t *sum;              /* resource → thousandths requested */
    long long cpu, mem;       /* sum's cpu and memory */
    long long nz_cpu, nz_mem; /* for scoring: pods without a request count 100m / 200Mi */
    long npods;
    json_t *ports; /* host port "PROTO/PORT/IP" → pods using it */
} ksc_usage;

typedef struct ks_controllers ks_controllers;
typedef struct ksc_worker ksc_worker;

/* Syncs one key; an error requeues it with backoff. */
typedef kc_code (*ksc_sync_fn)(ksc_worker *w, const char *key, kc_err *err);

struct ksc_worker {
    ks_controllers *c;
    const char *name; /* also the Events' source component */
    ksc_sync_fn sync;
    kc_workqueue *q;
    pthread_t th;
    bool started;
    uint64_t wrote_rv;   /* newest resourceVersion this worker wrote (read-your-writes) */
    unsigned long syncs; /* keys synced, and the time spent syncing (for benchmarks) */
    long long busy_ms;
};

enum {
    KSC_W_GC,
    KSC_W_NS,
    KSC_W_DEPLOY,
    KSC_W_RS,
    KSC_W_DS,
    KSC_W_SCHED,
    KSC_W_EP,
    KSC_W_PODGC,
    KSC_W_CRD,
    KSC_W_COUNT
};

typedef struct ksc_recorder ksc_recorder;

struct ks_controllers {
    ks_sim *sim;
    ks_store *st;
    pthread_mutex_t mu; /* guards the cache, seen_rv and the CRD tombstones */
    pthread_cond_t seen_cv;
    uint64_t seen_rv; /* every event up to it is in the cache */
    bool synced;      /* the current watch's initial snapshot is all in the cache */
    uint64_t open_rv; /* the store's RV just after the watch opened: anything newer is live */
    volatile int stopping;
    pthread_t event_th;
    bool event_started;
    ks_watch *watch;
    long long last_resync_ms;
    unsigned long rebuilds; /* times the watch was lost and the cache rebuilt (tests read it) */

    const ks_rtype *types[KSC_K_COUNT]; /* resolved lazily from events or the store */

    kc_map *objs;                  /* key → ksc_ent* (owns the entries) */
    kc_map *by_uid;                /* uid → ksc_ent* */
    kc_map *kind_idx[KSC_K_COUNT]; /* nskey → ksc_ent*, per indexed kind */
    kc_map *deps;                  /* owner uid → kc_map (dependent uid → ksc_ent*) */
    kc_map *pods_by_node;          /* node name → kc_map (pod nskey → ksc_ent*) */
    kc_map *ns_count;              /* namespace → size_t* (namespaced objects cached in it) */
    kc_map *svcs_by_ns;            /* namespace → kc_map (service nskey → ksc_ent*) */
    kc_map *pending;               /* pod nskey → ksc_ent* (unscheduled pods) */
    kc_map *pods_by_ns;            /* namespace → kc_map (pod nskey → ksc_ent*) */
    kc_map *crd_tombstones;        /* CRD name → json_t* (last state of a deleted CRD) */
    kc_map *node_usage;            /* node name → ksc_usage* */
    kc_map *sched_backoff;         /* pod nskey → backoff state; the scheduler thread's own */
    size_t sched_next;             /* where the next scheduling pass starts among the nodes */
    kc_map *podgc_missing;         /* pod nskey → long long* (ms its node was first missed);
                                      the pod GC thread's own */
    long podgc_quarantine_ms;      /* how long a never-seen node may be missing (tests lower it) */

    ksc_worker w[KSC_W_COUNT];
    ksc_recorder *rec;
};

/* ---- ks_ctl_cache.c: the cache, maintained by the event thread with ksc->mu held ---- */

kc_code ksc_cache_init(ks_controllers *c, kc_err *err);
void ksc_cache_free(ks_controllers *c);
/* Forgets everything (the watch is reopened with a fresh snapshot). */
void ksc_cache_reset(ks_controllers *c);
/* Applies one watch event and queues the keys it concerns. */
void ksc_cache_apply(ks_controllers *c, const ks_event *ev);

/* ---- cache reads (each takes and releases ksc->mu) ---- */

/* The cached object of kind at nskey, as a new reference, or NULL. */
json_t *ksc_get(ks_controllers *c, ksc_kind kind, const char *nskey);
/* The dependents of owner uid whose kind matches (KSC_K_OTHER: any), as a new array of object
 * references; when ctrl_only, only those whose controller reference is that uid. */
json_t *ksc_dependents(ks_controllers *c, const char *owner_uid, ksc_kind kind, bool ctrl_only);
/* Every cached object of kind (new array of references). */
json_t *ksc_all(ks_controllers *c, ksc_kind kind);
/* The type of kind (from the events seen, else looked up in the store), or NULL. */
const ks_rtype *ksc_type(ks_controllers *c, ksc_kind kind);
/* Queues every cached key of kind on worker wi. */
void ksc_enqueue_all(ks_controllers *c, ksc_kind kind, int wi);
/* The cached object with that uid (new reference) and its type, or NULL. */
json_t *ksc_by_uid(ks_controllers *c, const char *uid, const ks_rtype **t);
/* How many cached objects name uid as an owner. */
size_t ksc_dependent_count(ks_controllers *c, const char *uid);
/* Cached pods of namespace ns whose labels a Service's selector (a map of labels, non-empty)
 * selects (new array of references). */
json_t *ksc_pods_selected(ks_controllers *c, const char *ns, const json_t *selector);
/* Whether a Service's selector (non-empty map of labels) selects obj's labels. */
bool ksc_selector_map_selects(const json_t *selector, const json_t *obj);
/* The keys of every unscheduled pod (new array of strings). */
json_t *ksc_pending_keys(ks_controllers *c);
/* Direct access for the scheduler's node scan, between ksc_lock and ksc_unlock: the cached
 * nodes (malloc'd array of borrowed objects, valid until unlock) and a node's usage (or NULL). */
void ksc_lock(ks_controllers *c);
void ksc_unlock(ks_controllers *c);
size_t ksc_nodes_locked(ks_controllers *c, const ksc_ent ***out);
const ksc_usage *ksc_usage_locked(ks_controllers *c, const char *node);
/* The host ports a pod's containers ask for, as "PROTO/PORT/IP" strings (protocol defaulting to
 * TCP, hostIP to 0.0.0.0; ports without hostPort left out): a new array. */
json_t *ksc_pod_host_ports(const json_t *pod);
/* HostPortInfo.CheckConflict of the scheduler's NodePorts filter: whether one of want's ports is
 * taken in used (an object whose keys are such strings; NULL: none). */
bool ksc_host_ports_conflict(const json_t *used, const json_t *want);
/* Waits (bounded) until the cache holds every event up to w->wrote_rv. */
void ksc_wait_synced(ksc_worker *w);

/* ---- ks_ctl_util.c: writes (recording the RV for read-your-writes), Events, helpers ---- */

/* As ks_create / ks_mutate / ks_delete; *out may be NULL. */
kc_code ksc_create(ksc_worker *w, const ks_rtype *t, const char *ns, json_t *obj, json_t **out,
                   kc_err *err);
kc_code ksc_mutate(ksc_worker *w, const ks_rtype *t, const char *ns, const char *name,
                   ks_write_kind kind, ks_mutate_fn fn, void *ud, kc_err *err);
kc_code ksc_delete(ksc_worker *w, const ks_rtype *t, const char *ns, const char *name,
                   const char *uid, ks_propagation prop, long grace, kc_err *err);

kc_code ksc_recorder_new(ks_controllers *c, ksc_recorder **out, kc_err *err);
void ksc_recorder_free(ksc_recorder *r);
/* Writes a core/v1 Event about obj from component, or counts a repeat of the same (object,
 * type, reason, message) on the existing one. Failures are logged at debug level only. */
void ksc_event(ks_controllers *c, const char *component, const json_t *obj, const char *type,
               const char *reason, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Field access (borrowed; "" or 0 when absent). */
const char *ksc_str(const json_t *obj, const char *path); /* dotted path: "metadata.name" */
json_t *ksc_at(const json_t *obj, const char *path);      /* borrowed, NULL when absent */
long long ksc_int(const json_t *obj, const char *path, long long dflt);
bool ksc_deleting(const json_t *obj);
bool ksc_has_finalizer(const json_t *obj, const char *fin);
/* Removes fin from metadata.finalizers of obj in place; true when it was there. */
bool ksc_remove_finalizer(json_t *obj, const char *fin);
uint64_t ksc_rv(const json_t *obj);
/* The ownerReference with controller=true, or NULL (borrowed). */
const json_t *ksc_controller_ref(const json_t *obj);
/* {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true} for owner. */
json_t *ksc_owner_ref(const json_t *owner, const char *api_version, const char *kind);

/* A pod for owner from a pod template: generateName "<owner>-", the template's labels and
 * annotations, a controller ownerReference of kind (apiVersion apps/v1), the template's spec. */
json_t *ksc_pod_from_template(const json_t *owner, const json_t *tmpl, const char *kind);
/* Sets or refreshes one condition of status (array "conditions") the way the controllers do:
 * unchanged when status, reason (and message when with_message) already match; the transition
 * time is kept while the status stays. with_update adds lastUpdateTime (Deployments). */
void ksc_set_condition(json_t *status, const char *type, const char *cstatus, const char *reason,
                       const char *message, bool with_message, bool with_update);

/* Pods. */
bool ksc_pod_terminated(const json_t *pod); /* phase Succeeded or Failed */
bool ksc_pod_active(const json_t *pod);     /* not terminated and not being deleted */
bool ksc_pod_ready(const json_t *pod);
/* What a pod update means to the endpoints controller, as the real one's podEndpointsChanged:
 * *pod_changed its deletion, readiness or IPs changed; *labels_changed its labels, hostname or
 * subdomain (which Services select it). */
void ksc_pod_endpoints_changed(const json_t *old, const json_t *now, bool *pod_changed,
                               bool *labels_changed);
/* Ready for at least min_ready_s; *wait_ms (when not NULL) gets how long until it will be
 * (0 when it already is or is not ready at all). */
bool ksc_pod_available(const json_t *pod, long long min_ready_s, long long *wait_ms);

/* The controller hash of a pod template (with collision count), as the pod-template-hash and
 * controller-revision-hash labels hold it: FNV-1a of the canonical JSON, safe-encoded. */
void ksc_template_hash(const json_t *tmpl, long long collisions, char out[16]);
/* An int-or-percent field against total; round_up chooses the rounding of percentages. */
long long ksc_int_or_percent(const json_t *v, long long total, bool round_up, long long dflt);

/* Quantities ("100m", "2Gi", "1e3") in thousandths of the unit; false when malformed. */
bool ksc_quantity_milli(const char *s, long long *out);
/* A quantity as JSON: a string as above, or a number (clients may send `nvidia.com/gpu: 1`). */
bool ksc_json_quantity(const json_t *v, long long *out);
/* A copy of v without the members that typed clients treat as unset (null, {}, []), so that
 * templates compare and hash as the real controllers' Go structs do (kubectl sends
 * `creationTimestamp: null` in templates). New reference. */
json_t *ksc_normalized(const json_t *v);
long long ksc_now_ms(void); /* monotonic */
long long ksc_wall_s(void); /* epoch seconds */
/* Epoch seconds of an RFC 3339 timestamp, or -1. */
long long ksc_parse_time(const char *s);

/* ---- ks_sched.c helpers shared with the DaemonSet controller ---- */

/* Whether pod spec's nodeSelector and required node affinity select node. */
bool ksc_node_matches(const json_t *pod_spec, const json_t *node);
/* The first NoSchedule/NoExecute taint of node (only NoExecute when noexec_only) that the
 * tolerations (pod spec's plus extra, either may be NULL) do not tolerate, or NULL. */
const json_t *ksc_untolerated_taint(const json_t *pod_spec, const json_t *extra, const json_t *node,
                                    bool noexec_only);
/* What scoring assumes a pod without a cpu / memory request uses (the real scheduler's). */
#define KSC_DEFAULT_CPU_MILLI 100LL
#define KSC_DEFAULT_MEM_MILLI (200LL * 1024 * 1024 * 1000)
/* A node's allocatable resources (else its capacity) in thousandths, as a new object. */
json_t *ksc_node_allocatable(const json_t *node);
/* Whether a node's Ready condition is True. */
bool ksc_node_ready(const json_t *node);
/* What a pod requests (resource → thousandths; limits stand in for unset requests; the
 * largest init container; overhead), as a new object. */
json_t *ksc_pod_requests(const json_t *pod);
/* The tolerations a DaemonSet adds to its pods (new reference). */
json_t *ksc_ds_tolerations(const json_t *pod_spec);

/* ---- the controllers' sync functions and event hooks ---- */

kc_code ksc_gc_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_ns_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_deploy_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_rs_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_ds_sync(ksc_worker *w, const char *key, kc_err *err);
/* Whether DaemonSet ds should run a pod on node (*run) and keep one running there (*cont): its
 * template's node selection and taints against its tolerations plus the ones DaemonSets add. */
void ksc_ds_node_eligibility(const json_t *ds, const json_t *node, bool *run, bool *cont);
kc_code ksc_sched_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_ep_sync(ksc_worker *w, const char *key, kc_err *err);
/* A Service is gone (its DELETED event, cache lock held): its clusterIP and node ports go back to
 * admission's allocators so a new Service may take them. */
void ksc_svc_deleted(ks_controllers *c, const json_t *svc);
kc_code ksc_podgc_sync(ksc_worker *w, const char *key, kc_err *err);
kc_code ksc_crd_sync(ksc_worker *w, const char *key, kc_err *err);

/* Whether a node change matters to scheduling and DaemonSets (labels, taints, unschedulable,
 * allocatable, readiness), so heartbeats do not wake them. */
bool ksc_node_changed(const json_t *old, const json_t *now);

#endif
