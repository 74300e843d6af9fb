/* ns_engine_int: state shared by the engine's infrastructure (ns_engine.c) and the per-node
 * reconcile (ns_reconcile.c). */
#ifndef NS_ENGINE_INT_H
#define NS_ENGINE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kc_client.h"
#include "kc_informer.h"
#include "kc_map.h"
#include "kc_workqueue.h"
#include "ns_engine.h"
#include "ns_fault.h"
#include "ns_init.h"
#include "kc_migparted.h"
#include "ns_operand.h"

#define NS_MAX_GPUS 16

typedef enum ns_mm_phase { MM_IDLE = 0, MM_WAIT_CLIENTS, MM_REBOOTING, MM_APPLYING } ns_mm_phase;

/* One simulated node. Only the worker holding the node's key touches the fields, except the
 * atomics the heartbeat thread reads. */
typedef struct ns_simnode {
    char name[256];
    const ns_fleet_group *g;
    unsigned index;
    char *fault_spec; /* the annotation value last parsed */
    ns_faults faults;
    kc_mp_gpu_state mig[NS_MAX_GPUS];  /* the GPUs' MIG state (the "hardware") */
    char op_uid[NS_OP_COUNT][64];      /* the Running pod of each operand, "" when none */
    uint64_t op_since[NS_OP_COUNT];    /* when it was first seen Running */
    char crashed_uid[NS_OP_COUNT][64]; /* the operand pod whose status says it crash-loops */
    uint64_t crashed_rv[NS_OP_COUNT];  /* its resourceVersion once that status was written */
    /* MIG manager */
    ns_mm_phase mm;
    bool mm_have_handled;
    char mm_handled[128]; /* the config last driven to success/failed */
    char mm_pod_uid[64];  /* for that MIG manager pod */
    char mm_target[128];
    kc_mp_gpu_state mm_new[NS_MAX_GPUS];
    /* Why creating the instances will fail (a layout NVML cannot place, a profile the GPU lacks):
     * as with mig-parted, known only once applying, after pending; "" when it will not. */
    char mm_apply_err[512];
    uint64_t mm_deadline;
    uint32_t mm_paused; /* client deploy labels this node's MIG manager paused */
    /* reboot */
    uint64_t reboot_until;
    int boot;
    kc_map *vals; /* validation pod uid → first-seen ms (boxed uint64_t) */
    /* "validator pod uid/init container" → name of the workload pod it created (malloc'd) */
    kc_map *workloads;
    unsigned ready_files; /* NS_READY_ files in the node's /run/nvidia/validations */
    kc_map *wrote;        /* "pod uid/init container" of validators that wrote their file */
    /* "pod uid key" → the answers (compact JSON) last handed to kubesim's kubelet for that pod,
     * as of kubelet boot sent_epoch (see ns_engine.answers_epoch) */
    kc_map *sent;
    unsigned sent_epoch;
    atomic_bool clear_files; /* a pod whose preStop removes the ready files began to stop */
    bool gone;               /* the Node was deleted by someone: not re-registered */
    bool created;
    atomic_bool hb_down;    /* no Lease renewals (NotReady fault, rebooting) */
    atomic_bool registered; /* the Node exists */
    uint64_t next_hb_ms;    /* heartbeat thread only */
} ns_simnode;

typedef struct ns_engine {
    ns_engine_opts o;
    ns_timings t;
    kc_client *api;   /* blocking writes from workers */
    kc_client *watch; /* informers on the loop */
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_timer_t tick;
    kc_informer *nodes, *pods, *cms;
    ns_simnode *sn;
    size_t n;
    kc_map *by_name; /* name → ns_simnode* (immutable after start) */
    pthread_mutex_t idx_mu;
    kc_map *pods_by_node; /* node → kc_map of pod keys "ns/name" */
    kc_workqueue *q;
    pthread_t *workers;
    int n_workers;
    pthread_t hb;
    atomic_bool stop;
    /* kubesim's kubelet, which keeps nodesim's answers in memory: its boot id as last seen
     * (heartbeat thread only), and how many times it changed (a restarted kubelet knows no
     * answers: every node hands them over again) */
    char kubelet_boot[32];
    atomic_uint answers_epoch;
    bool started_workers;
    bool ready_written;
} ns_engine;

uint64_t ns_now_ms(void);

/* Pods on a node (new array of new references) from the pod index and cache. */
json_t *ns_engine_node_pods(ns_engine *e, const char *node);

/* Renews (or creates) the node's Lease in kube-node-lease. */
void ns_engine_renew_lease(ns_engine *e, ns_simnode *n);

/* ns_gates.c: hands nodesim's answers under key (NS_INIT_ANNOTATION, NS_PROBES_ANNOTATION) for
 * pod on node n to the kubelet, where they changed: to kubesim's kubelet over its answer channel
 * (PUT /kubesim/v1/answers/...), which a real node's runtime does without the API server; to a
 * template kubelet (kwok) as the pod's annotation key. ans (compact JSON) is consumed. False
 * when the write failed and should be retried. */
bool ns_write_pod_answers(ns_engine *e, ns_simnode *n, const json_t *pod, const char *key,
                          json_t *ans);
/* Forgets what was sent for pods no longer in pods (the node's), and everything when the
 * kubelet restarted since. */
void ns_answers_sync(ns_engine *e, ns_simnode *n, const json_t *pods);
/* Heartbeat thread: notices a restart of kubesim's kubelet (its boot id) and has every node
 * hand its answers over again. */
void ns_answers_check_kubelet(ns_engine *e);
/* Not Succeeded/Failed and not being deleted. */
bool ns_pod_live(const json_t *pod);
/* The GPU resource NVIDIA's validator asks for in its plugin workload pod (nvidia.com/gpu, else
 * the first MIG resource) among the node's allocatable alloc; NULL when it advertises none. */
const char *ns_gpu_resource(const json_t *alloc);
/* Answers the init containers of pods (the pods on node n) and keeps n's ready files; returns
 * the delay (ms) after which it wants to run again, or -1. */
long ns_init_step(ns_engine *e, ns_simnode *n, const json_t *pods, uint64_t now,
                  const ns_gate_view *v, const json_t *alloc);

/* Reconciles one node (worker thread). Returns the delay after which it wants to run again
 * (ms), or -1 for none. */
long ns_reconcile_node(ns_engine *e, ns_simnode *n);

void ns_simnode_init(ns_simnode *n);
void ns_simnode_clear(ns_simnode *n);

#endif
