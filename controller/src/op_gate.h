/* op_gate: how one GPU node walks through the gated states (driver → container toolkit → device
 * plugin → MIG manager), each entered only after the previous one's operand is Ready on the node
 * and a validation pod for it has Succeeded there. Pure: the caller gathers the inputs from its
 * caches and carries out the decided writes. */
#ifndef OP_GATE_H
#define OP_GATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_error.h"

/* The gated stages, in order. */
typedef enum op_stage {
    OP_STAGE_DRIVER = 0,
    OP_STAGE_TOOLKIT,
    OP_STAGE_PLUGIN,
    OP_STAGE_MIG,
    OP_STAGE_COUNT
} op_stage;

/* Labels and names of each stage (NVIDIA's). */
const char *op_stage_name(op_stage s);         /* "driver", "container-toolkit", ... */
const char *op_stage_deploy_label(op_stage s); /* "nvidia.com/gpu.deploy.driver" */
const char *op_stage_daemonset(op_stage s);    /* "nvidia-driver-daemonset" */
const char *op_stage_mode(op_stage s);         /* validator --mode: driver, toolkit, plugin, mig */

/* A user's opt-out of one component on a node: nvidia.com/gpu.deploy.<component>=false (NVIDIA's
 * documented per-node switch, e.g. for a preinstalled driver). The operator itself never writes
 * "false": its own values are "true" (deployed) or no label (not yet, or not any more), so a
 * "false" is always the user's and is never changed or removed. */
#define OP_DEPLOY_OFF "false"

/* Deploy labels of the operands that follow the gated chain: set once the toolkit is validated
 * (they need the driver and the nvidia runtime), never before. */
extern const char *const op_follower_labels[];

/* The node label that selects the image-prepull DaemonSet (states/state-image-prepull): "true"
 * from the operator's first deploy label on the node to its last one, written with them. */
#define OP_PREPULL_LABEL "nvidia.com/gpu.deploy.image-prepull"

/* Labels and annotations on validation pods. */
#define OP_VAL_STAGE_LABEL "nvidia.com/gpu-operator.validation"
#define OP_VAL_NODE_LABEL  "nvidia.com/gpu-operator.node"
#define OP_VAL_KEY_ANN     "nvidia.com/gpu-operator.validation-key"
#define OP_PAUSED_MIG      "paused-for-mig-change"
/* Set beside a nvidia.com/mig.config the operator wrote as the default, so that removing the
 * operator removes only the label it added. */
#define OP_MIG_DEFAULT_ANN "nvidia.com/gpu-operator.mig-config-default"
/* Set on a node a driver upgrade cordoned, so that only the operator's cordon is undone. */
#define OP_CORDONED_ANN "nvidia.com/gpu-driver-upgrade.cordoned-by-operator"

/* What the operator wants of the cluster for this node's gating (from the ClusterPolicy). */
typedef struct op_gate_policy {
    bool enabled[OP_STAGE_COUNT]; /* stage enabled by the spec (MIG: migManager.enabled) */
    bool followers_enabled;       /* GFD, DCGM, ... exist at all */
    bool image_prepull;           /* the image-prepull DaemonSet exists (OP_PREPULL_LABEL) */
    const char *ns;               /* operator namespace */
    const char *validator_image;
    const json_t *owner;       /* ownerReference to the ClusterPolicy (borrowed) */
    const char *mig_default;   /* migManager.config.default: "" → none */
    const char *runtime_class; /* "nvidia" */
    const json_t *validator_env[OP_STAGE_COUNT]; /* env arrays for the validation container */
    long backoff_base_ms; /* retry delay of a failed validation; doubles (default 5000) */
    long backoff_max_ms;  /* cap (default 300000) */
} op_gate_policy;

/* One stage's inputs on the node. */
typedef struct op_gate_stage_in {
    const json_t *operand_pod; /* the stage's DaemonSet pod on the node, or NULL */
    const json_t *ds;          /* the stage's DaemonSet (its pod template's tolerations are read
                                  when the node has NoSchedule/NoExecute taints), or NULL */
    const json_t *val_pods[8]; /* validation pods of this stage on the node */
    int n_val;
} op_gate_stage_in;

typedef struct op_gate_in {
    const json_t *node; /* the Node */
    op_gate_stage_in stage[OP_STAGE_COUNT];
    uint64_t now_ms; /* wall clock, ms since the epoch */
    /* Why the MIG config the node asks for cannot work there (op_mig_check, or a MIG label the
     * node cannot act on), NULL when nothing is wrong: reported as the MIG state's failure. */
    const char *mig_problem;
    /* The node's mig.config.state reads failed for a config it no longer asks for: the MIG
     * manager has not taken the new one up yet, which is no failure of the new one. */
    bool mig_state_stale;
} op_gate_in;

typedef enum op_node_phase {
    OP_NODE_NOT_GPU = 0,   /* not a GPU node: nothing to do (labels we set are removed) */
    OP_NODE_OPTED_OUT,     /* nvidia.com/gpu.deploy.operands=false */
    OP_NODE_IN_PROGRESS,   /* waiting for an operand or a validation */
    OP_NODE_RECONFIGURING, /* MIG reconfiguration in progress (not a failure) */
    OP_NODE_FAILED,        /* a validation failed or the MIG config failed; retried */
    OP_NODE_DONE,          /* every enabled stage validated */
    OP_NODE_BLOCKED,       /* a taint the operands do not tolerate keeps them off the node */
} op_node_phase;

const char *op_node_phase_name(op_node_phase p);

typedef struct op_gate_out {
    json_t *labels;      /* label patch: key → "value" or null (nothing to do: empty object) */
    json_t *annotations; /* annotation patch, same form */
    json_t *create;      /* array of validation pods to create */
    json_t *remove;      /* array of validation pod names (in ns) to delete */
    op_node_phase phase;
    int stage;            /* the stage the node is at (OP_STAGE_COUNT when done), -1 not GPU */
    char reason[768];     /* why it is not done, for status and events */
    long requeue_ms;      /* when to look again without an event (backoff), -1 none */
    bool oom;             /* internal: an allocation failed (op_gate_node returns KC_ENOMEM) */
    bool sharing_invalid; /* set by the node reconciler: the device plugin would refuse the
                             node's sharing config (phase failed, stage device-plugin) */
    bool mig_invalid;     /* set by the node reconciler: the failure is what op_migcheck found */
} op_gate_out;

/* Decides the node's labels and validation pods. out's JSON values are new (op_gate_out_clear).
 * KC_ENOMEM only. */
kc_code op_gate_node(const op_gate_policy *pol, const op_gate_in *in, op_gate_out *out,
                     kc_err *err);
void op_gate_out_clear(op_gate_out *out);

/* True when the node is a GPU node by its NFD labels (pci-10de / pci-0302_10de / pci-0300_10de
 * present = "true"). */
bool op_node_is_gpu(const json_t *node);

/* The node's container runtime as NVIDIA's toolkit names it (containerd, docker, crio) from
 * status.nodeInfo.containerRuntimeVersion ("containerd://1.7.20", "docker://24.0.7",
 * "cri-o://1.29.1"); NULL when it names none of them. */
const char *op_node_runtime(const json_t *node);

/* True when a pod is Running with its Ready condition True and no deletionTimestamp. */
bool op_pod_ready(const json_t *pod);

/* Whether a container waiting for this reason is failing rather than starting (a crash loop, an
 * image that cannot be pulled, a bad config): the reasons the gate reports. */
bool op_waiting_reason_failing(const char *reason);

/* True when an operand pod is failing rather than starting (a container waiting for a failing
 * reason); why: "<ds> pod <name> is failing: container <c>: <reason>: <last error>". */
bool op_pod_failing(const json_t *pod, const char *ds, char *why, size_t size);

#endif
