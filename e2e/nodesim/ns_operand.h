/* ns_operand: which NVIDIA component a pod is (by its app label, else its image), what a pod
 * asks of the node, and the outcome of a validation (vectorAdd) pod. Pure functions. */
#ifndef NS_OPERAND_H
#define NS_OPERAND_H

#include <jansson.h>
#include <stdbool.h>

#include "ns_dpconfig.h"
#include "ns_fault.h"
#include "kc_gpu.h"
#include "kc_migparted.h"

typedef enum ns_operand {
    NS_OP_NONE = 0,
    NS_OP_DRIVER,
    NS_OP_TOOLKIT,
    NS_OP_DEVICE_PLUGIN,
    NS_OP_MPS,
    NS_OP_GFD,
    NS_OP_DCGM,
    NS_OP_DCGM_EXPORTER,
    NS_OP_MIG_MANAGER,
    NS_OP_VALIDATOR,  /* the nvidia-operator-validator DaemonSet's pods (long-running) */
    NS_OP_VALIDATION, /* a run-to-completion validation pod (vectorAdd) */
    NS_OP_COUNT
} ns_operand;

const char *ns_operand_name(ns_operand op);

/* Whether an image holds the validator: it matches glob (fnmatch) when given, else it is this
 * project's image (.../gpu-operator-validator:TAG, .../gpu-operator:TAG), NVIDIA's
 * gpu-operator-validator or NVIDIA's operator image (the validator's home since v25.10). */
bool ns_image_has_validator(const char *image, const char *glob);

/* Classifies a pod. Validation pods are pods that run to completion (restartPolicy Never or
 * OnFailure) with a container or init container (NVIDIA's workload pods) running gpu-validator,
 * nvidia-validator or vectorAdd (its command or in a shell script) from an image that holds the
 * validator (ns_image_has_validator), or whose
 * image is NVIDIA's CUDA vectorAdd sample (images cuda-sample:vectoradd-... and
 * nvidia/samples:vectoradd-...: users' smoke test). A pod labelled nvidia-cuda-validator or running
 * `gpu-validator` from another image validates nothing (see ns_missing_program). Operand DaemonSet
 * pods are known by their app label (NVIDIA's names: nvidia-driver-daemonset,
 * nvidia-container-toolkit-daemonset, nvidia-device-plugin-daemonset,
 * nvidia-device-plugin-mps-control-daemon, gpu-feature-discovery, nvidia-dcgm,
 * nvidia-dcgm-exporter, nvidia-mig-manager, nvidia-operator-validator), else by image name. */
ns_operand ns_operand_of_pod(const json_t *pod, const char *validator_glob);

/* For a run-to-completion pod that is no validation pod but runs a validator program
 * (gpu-validator, nvidia-validator, vectorAdd) from an image without it: that program, else NULL.
 * *direct: the program is the container's command (containerd cannot start it), not a word of a
 * shell script (the shell exits 127). */
const char *ns_missing_program(const json_t *pod, const char *validator_glob, bool *direct);

/* The value of env var `name` in any container of the pod (first found), or an `--name=value`
 * / `--name value` argument where arg is given; NULL when absent. Borrowed from pod. */
const char *ns_pod_env(const json_t *pod, const char *name);
const char *ns_pod_arg(const json_t *pod, const char *arg);

/* The runtime name NVIDIA's toolkit takes in RUNTIME (containerd, docker, crio) for a node's
 * status.nodeInfo.containerRuntimeVersion ("containerd://1.7.20", "docker://24.0.7",
 * "cri-o://1.29.1"); NULL when it names none of them. */
const char *ns_runtime_name(const char *container_runtime_version);

/* The MIG strategy a device-plugin or GFD pod runs with: MIG_STRATEGY env or --mig-strategy arg,
 * else the config file's flags.migStrategy, else none. */
ns_mig_strategy ns_pod_mig_strategy(const json_t *pod, const ns_dpconfig *cfg);

/* The name of the ConfigMap mounted by a pod's volume named one of `names` (NULL-terminated),
 * else of its first configMap volume when any_fallback; NULL when none. Borrowed. */
const char *ns_pod_configmap(const json_t *pod, const char *const *names, bool any_fallback);

/* What the node can offer a validation pod at the moment it runs. */
typedef struct ns_node_view {
    const char *node;
    const kc_gpu_model *model; /* NULL on CPU-only nodes */
    int n_gpus;                /* GPUs present */
    const kc_mp_gpu_state *mig;
    bool driver_up, toolkit_up;
    const char *driver_version, *cuda_version;
    const json_t *allocatable; /* node status.allocatable */
    const ns_faults *faults;
} ns_node_view;

/* Decides a validation pod's outcome on the node (a CUDA sample pod prints the sample's own
 * output, ending in "Test PASSED" and "Done", or its allocation error): it succeeds when the GPUs
 * are there, the driver is up, gpu-validator reaches the driver's libraries and its status file
 * (ns_access.h), the toolkit is up (every mode but `driver`), the nvidia.com/ resources it
 * requests are allocatable and no GPU has an XID. *log_out (malloc'd) is what the validator
 * prints: the vectorAdd sample's output ending in "Test PASSED", or the reason it failed.
 * Returns the exit code: 0 for success, 2 when gpu-validator finds no driver library, else 1.
 * The mode comes from the pod's --mode argument or VALIDATOR_MODE env (default cuda). */
int ns_validation_run(const json_t *pod, const ns_node_view *v, char **log_out);

/* The pod annotation with nodesim's answers to its containers' probes (a JSON object). */
#define NS_PROBES_ANNOTATION "nodesim.io/probes"

/* What the node's components are doing, as their probes see it. */
typedef struct ns_probe_view {
    bool has_gpus;
    bool driver_up;   /* the kernel modules are loaded and nvidia-smi answers */
    bool driver_fail; /* the driver-fail fault: modprobe fails */
    bool toolkit_up;  /* the toolkit installed the runtime hooks */
} ns_probe_view;

/* nodesim plays the container runtime for probes of simulated containers: the answer of each
 * container of pod that has a startup, readiness or liveness probe, as an object container name →
 * "ok" or what the failing probe printed (NVIDIA's operands answer from the component's state:
 * the driver's once loaded, the toolkit's once installed, the others' once the driver is up;
 * other pods' probes pass). NULL when no container has a probe. */
json_t *ns_probe_answers(const json_t *pod, ns_operand op, const ns_probe_view *v);

/* The vectorAdd sample's success output (static). */
const char *ns_vectoradd_output(void);

#endif
