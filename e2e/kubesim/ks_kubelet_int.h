/* ks_kubelet_int: the kubelet's state (nodes, pods, containers, process runs), owned by its loop
 * thread; shared by ks_kubelet.c, ks_kubelet_node.c, ks_kubelet_pod.c and ks_kubelet_ctr.c. */
#ifndef KS_KUBELET_INT_H
#define KS_KUBELET_INT_H

#include "ks_kubelet.h"
#include "ks_registry.h"

#include <stdatomic.h>

/* A node as the kubelet sees it (cache filled from the node watch and from direct reads). */
typedef struct kl_node {
    char *name;
    bool external; /* label kubesim.io/external=true: not ours at all */
    bool nodesim;  /* annotation kubesim.io/managed-by=nodesim: its status is nodesim's */
    bool ready;
    char ip[48];
    json_t *allocatable;  /* status.allocatable (reference) or NULL */
    json_t *used;         /* extended resource → integer in use by admitted pods */
    json_t *alloc_limits; /* annotation kubesim.io/allocate-limits, parsed, or NULL */
    uint64_t next_hb_ms;  /* loop time of the next lease renewal */
    unsigned hb_count;
    char boot_id[64]; /* status.nodeInfo.bootID: a change means the machine rebooted */
    bool rebooted;    /* set by the last update, consumed by kl_node_event */
} kl_node;

/* Node annotation: a JSON object resource → {"max": N, "error": text}, the device plugin's
 * Allocate error for a container asking more than N of that resource ("{found}" in the text is
 * replaced by the count asked). The kubelet rejects such a pod with UnexpectedAdmissionError. */
#define KL_ALLOCATE_LIMITS "kubesim.io/allocate-limits"

enum { CS_WAITING, CS_RUNNING, CS_TERMINATED };

struct kl_pod;
struct kl_ctr;

/* One run of a mapped container's process; lives until its handles are closed, which may be
 * after the container moved on (then c is NULL). Holds a reference on its pod. */
typedef struct kl_run {
    struct kl_pod *p;
    struct kl_ctr *c;
    uv_process_t proc;
    uv_pipe_t out, err;
    uv_timer_t drain; /* bounds the wait for the pipes' EOF after the process exited */
    int handles;      /* handles not yet closed */
    int pipes_open;
    bool exited, finished;
    int64_t status;
    int term_signal;
    int pid;
    char buf[16384];
} kl_run;

typedef struct kl_ctr {
    struct kl_pod *p;
    bool init;
    size_t idx;
    char *name;
    char *image;
    const ks_image_map_entry *map; /* NULL: simulated container */
    int state;
    char reason[64];
    char *message;
    char started_at[32];
    char finished_at[32];
    uint64_t ready_at_ms;
    int exit_code;
    int restarts;
    bool ready;
    bool killing;      /* we stopped it (liveness, deletion) */
    json_t *last_term; /* lastState.terminated */
    char cid[80];
    kl_run *run;
    /* Timers for mapped containers and containers with probes (timers_on says they were
     * initialized). */
    bool timers_on;
    uv_timer_t t_backoff, t_sprobe, t_rprobe, t_lprobe;
    int backoff_ms;
    ks_probe_spec sprobe, rprobe, lprobe; /* startup, readiness, liveness */
    int s_fail, r_ok, r_fail, l_fail;
    bool s_busy, r_busy, l_busy;
    bool started;          /* the startup probe passed (or there is none) */
    uint64_t run_since_ms; /* loop time the current run started (probes' initial delays) */
    /* Image pulls (ks_kubelet_pull.c). */
    bool pull_wait;      /* waiting for a pull job of its image (holds its pod's pull turn) */
    bool pull_defer;     /* its start waits for another container's pull in its pod */
    bool pulled;         /* the job finished: the next start goes ahead */
    int pull_phase;      /* 1: ErrImagePull, 2: ImagePullBackOff (t_backoff runs) */
    int pull_backoff_ms; /* the image back-off, doubling */
    char *pull_err;      /* the last pull's error */
} kl_ctr;

enum { ST_PENDING, ST_INIT, ST_RUNNING, ST_DONE, ST_DELETING };

typedef struct kl_pod {
    struct ks_kubelet *kl;
    char *key; /* "ns/name" */
    char *ns, *name, *uid, *node;
    json_t *obj; /* last seen object (reference) */
    int stage;
    int refs;     /* open handles + runs + probe requests; freed at 0 once removed */
    bool removed; /* out of the map */
    uv_timer_t t_stage, t_ready;
    kl_ctr *init, *ctrs;
    size_t n_init, n_ctrs, cur_init;
    char ip[48], host_ip[48], start_time[32];
    bool wrote_terminal;    /* we wrote Succeeded/Failed */
    char *reason, *message; /* pod-level status reason/message (rejection) */
    json_t *ext;            /* extended resources admitted on the node (object) or NULL */
    char *sa_root;
    /* The container whose pull is under way: the kubelet starts a pod's containers one after
     * the other, each start waiting for its image, so the others' starts wait (pull_defer). */
    struct kl_ctr *pull_ctr;
} kl_pod;

typedef struct kl_qev {
    int kind; /* 0 pod event, 1 node event, 2 pod list (sync), 3 node list (sync) */
    ks_event_type type;
    json_t *obj;
} kl_qev;

struct ks_kubelet {
    ks_sim *sim;
    ks_store *st;
    const ks_rtype *t_pods, *t_nodes, *t_leases, *t_ns, *t_secrets, *t_cms, *t_events;
    ks_image_map imap;
    ks_kl_logs *logs;
    /* Tuning (ks_kubelet_tune may run on any thread). */
    atomic_int grace_cap_ms, backoff_ms, backoff_max_ms;
    atomic_bool events; /* emit Pulled/Created/Started/Killing events */
    uv_loop_t loop;
    uv_async_t async;
    uv_timer_t t_hb, t_stop;
    bool loop_ok, threads_ok[3];
    pthread_t loop_thread, bridge[2];
    atomic_bool stopping;
    bool stop_seen;
    pthread_mutex_t qmu;
    kl_qev *q;
    size_t qlen, qcap;
    kc_map *pods;    /* key → kl_pod */
    kc_map *nodes;   /* name → kl_node */
    kc_map *missing; /* node names pods referred to before they existed → (void *)1 */
    bool pods_synced;
    unsigned ip_next;
    int runs; /* live kl_run */
    /* Images (ks_kubelet_pull.c); reg NULL: every image exists, pulls take no time. */
    ks_registry *reg;
    kc_map *imgs;           /* node "\n" reference → image state */
    kc_map *pullqs;         /* node → its pull queue */
    struct kl_pullq **busy; /* the queues with pulls running */
    size_t n_busy, cap_busy;
    uv_timer_t t_pull;
    struct kl_ctr *pull_sync; /* the container whose start is asking for a pull right now */
    /* nodesim's answers (ks_kubelet_answers.c): pod uid → {key: {container: text}}, under amu
     * (HTTP threads write, the loop reads). boot_id changes with every start. */
    pthread_mutex_t amu;
    kc_map *answers;
    char boot_id[20];
};

/* ks_kubelet.c */
uint64_t kl_now(struct ks_kubelet *kl);
void kl_event(struct ks_kubelet *kl, const kl_pod *p, const kl_ctr *c, const char *type,
              const char *reason, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void kl_pod_ref(kl_pod *p);
void kl_pod_unref(kl_pod *p);
/* Initializes a timer owned by pod p (holds a reference until closed). */
void kl_timer_init(kl_pod *p, uv_timer_t *t);
void kl_close(kl_pod *p, uv_handle_t *h);

/* Called by ks_kubelet_ctr.c whenever a process run ended (stop waits for all of them). */
void kl_runs_changed(struct ks_kubelet *kl);

/* Queues pod_key ("ns/name") for kl_pod_answered on the loop (any thread). */
void kl_push_answered(struct ks_kubelet *kl, const char *pod_key);

/* ks_kubelet_answers.c */
#define KL_ANSWER_INIT   "nodesim.io/init"
#define KL_ANSWER_PROBES "nodesim.io/probes"
kc_code kl_answers_init(struct ks_kubelet *kl, kc_err *err);
void kl_answers_free(struct ks_kubelet *kl);
/* Forgets a pod's answers (any thread). */
void kl_answers_drop(struct ks_kubelet *kl, const char *uid);
/* nodesim's answer under key (KL_ANSWER_*) for container ctr of p: its channel's once it has
 * answered p under key, else the pod's annotation key. Copied into buf; false when none. */
bool kl_answer(const kl_pod *p, const char *key, const char *ctr, char *buf, size_t size);

/* ks_kubelet_node.c */
kl_node *kl_node_get(struct ks_kubelet *kl, const char *name);
void kl_node_refresh_devices(struct ks_kubelet *kl, kl_node *n);
void kl_node_event(struct ks_kubelet *kl, ks_event_type type, json_t *obj);
void kl_node_sync(struct ks_kubelet *kl, json_t *items);
void kl_heartbeat(uv_timer_t *t);
void kl_node_free(void *n);

/* ks_kubelet_pod.c */
void kl_pod_event(struct ks_kubelet *kl, ks_event_type type, json_t *obj);
void kl_pod_sync(struct ks_kubelet *kl, json_t *items);
/* nodesim answered about the pod pod_key ("ns/name"): a simulated init container waiting for
 * its answer may be done. */
void kl_pod_answered(struct ks_kubelet *kl, const char *pod_key);
/* Stops the local processes an earlier kubesim on the same directory left running (it was killed
 * with SIGKILL), before this kubelet starts the pods' containers again. */
void kl_reap_orphans(struct ks_kubelet *kl);
/* Drops a pod's state: kills its processes (SIGKILL when hard), closes its handles. */
void kl_pod_remove(kl_pod *p, bool hard);
/* Recomputes the pod's status from its containers and writes it (unless done/deleting). */
void kl_pod_write(kl_pod *p);
/* Called when a container of p changed state (started, ready, exited). */
void kl_pod_ctr_changed(kl_pod *p, kl_ctr *c);
void kl_pod_node_ready_changed(struct ks_kubelet *kl, const char *node);
/* The node rebooted (its bootID changed): every running simulated container restarted once. */
void kl_pod_node_rebooted(struct ks_kubelet *kl, const char *node);
void kl_ctr_clear(kl_ctr *c);
bool kl_is_terminal(const char *phase);
/* A quantity (JSON number or "500m"/"2Gi" string) as a number; 0 when absent or invalid. */
double kl_qty(const json_t *v);

/* ks_kubelet_status.c */
typedef struct kl_write_ctx {
    kl_pod *p;
    const char *phase;
} kl_write_ctx;
/* The phase the pod's containers add up to. */
const char *kl_pod_phase(const kl_pod *p);
/* ks_mutate callback (ud: kl_write_ctx) writing the kubelet's part of the status; KC_ECANCELED
 * when the pod was replaced or another writer already set a terminal phase. */
kc_code kl_status_cb(void *ud, json_t *obj, kc_err *err);

/* ks_kubelet_pull.c */
/* Sets up the registries and the pull state (nothing when opts.any_image). */
bool kl_pull_init(struct ks_kubelet *kl, kc_err *err);
void kl_pull_free(struct ks_kubelet *kl);
/* Called by kl_ctr_start: false when c's image is on the node (or was pulled at once) and the
 * container may start now; true when it waits for a pull or its pull failed (c is waiting;
 * kl_pod_ctr_pulled starts it later). */
bool kl_pull_before_start(kl_ctr *c);
void kl_pull_on_timer(uv_timer_t *t);
/* The node was deleted: its images and pulls go with it. */
void kl_pull_node_gone(struct ks_kubelet *kl, const char *node);
/* ks_kubelet_pod.c: c's pull finished (or its back-off ended, or its pod's turn to pull came):
 * start it (or pull again). */
void kl_pod_ctr_pulled(kl_pod *p, kl_ctr *c);

/* ks_kubelet_ctr.c */
/* Starts container c: a process for mapped images, else a simulated running container. */
void kl_ctr_start(kl_ctr *c);
/* A simulated container exited with code, msg as its termination message: restarted with the
 * back-off as the pod's restartPolicy says. */
void kl_ctr_sim_exit(kl_ctr *c, int code, const char *msg);
/* Signals a mapped container's process group (no-op when it has none). */
void kl_ctr_signal(kl_ctr *c, int sig);
/* Stops probes and back-off timers of c (kept initialized). */
void kl_ctr_quiesce(kl_ctr *c);
/* The container (re)started: its probes start over, the startup probe first. */
void kl_ctr_probes_start(kl_ctr *c);
void kl_ctr_close_timers(kl_ctr *c);

#endif
