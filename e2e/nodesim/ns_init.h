/* ns_init: init containers on nodesim's nodes. nodesim plays the container runtime for them as
 * for probes: an init container of a simulated pod runs until nodesim's answer in the pod's
 * nodesim.io/init annotation says it completed (or exited, failing). NVIDIA's gates (a shell loop
 * waiting for /run/nvidia/validations/<x>-ready, NVIDIA's nvidia-validator with COMPONENT=x, the
 * operator's gpu-validator --mode x) complete once the component is ready on the node; other init
 * containers complete at once. Pure functions; ns_gates.c applies them. */
#ifndef NS_INIT_H
#define NS_INIT_H

#include <jansson.h>
#include <stdbool.h>

/* The pod annotation with nodesim's answers for init containers: container name → "ok" (it
 * exited 0) or what it is still waiting for (it keeps running). */
#define NS_INIT_ANNOTATION "nodesim.io/init"
/* An answer "exit N: TEXT" (this prefix, then the code): the container exited with code N,
 * printing TEXT; the kubelet restarts it with its back-off. */
#define NS_INIT_EXIT "exit "

typedef enum ns_gate_kind {
    NS_GATE_NONE = 0,  /* not a gate: completes at once */
    NS_GATE_FILE,      /* a shell loop waiting for /run/nvidia/validations/<what>-ready */
    NS_GATE_VALIDATOR, /* nvidia-validator (COMPONENT) or gpu-validator (--mode) */
} ns_gate_kind;

typedef struct ns_init_gate {
    ns_gate_kind kind;
    char what[32]; /* driver, toolkit, cuda, plugin, or another component */
    bool nvidia;   /* NVIDIA's nvidia-validator */
    bool workload; /* nvidia-validator cuda/plugin with WITH_WORKLOAD (default true): it
                    * creates a workload pod and waits for it to succeed */
} ns_init_gate;

/* Classifies an init container (an element of spec.initContainers). */
void ns_init_gate_of(const json_t *container, ns_init_gate *g);

/* The ready files of /run/nvidia/validations nodesim tracks per node: a validator's component
 * writes its file when it completes (NVIDIA's nvidia-validator COMPONENT=x, the operator's
 * gpu-validator --mode x) and deletes it when it starts over; the validator pod's preStop hook
 * removes them all, and a reboot empties /run. Files of other components never exist here. */
enum { NS_READY_DRIVER = 1u, NS_READY_TOOLKIT = 2u, NS_READY_CUDA = 4u, NS_READY_PLUGIN = 8u };
/* The NS_READY_ bit of component what ("driver" → driver-ready), 0 for others. */
unsigned ns_ready_file_bit(const char *what);
/* Whether pod removes the ready files when it stops (a preStop `rm -f
 * /run/nvidia/validations/...` as the validators' main containers have). */
bool ns_pod_clears_ready_files(const json_t *pod);

/* The node's components as the gates see them. */
typedef struct ns_gate_view {
    bool has_gpus;
    bool driver_up, driver_fail, toolkit_up;
    bool plugin_gpus; /* the device plugin advertises GPUs (node allocatable) */
    bool xid;         /* a GPU reports an XID: CUDA work fails */
    unsigned written; /* NS_READY_ files present on the node */
} ns_gate_view;

/* The answer for a gate that needs no workload pod: NULL when it completes, else what it waits
 * for (static text). A file gate passes once the file was written and the component is still
 * up (driver-ready: the driver loaded; toolkit-ready: the toolkit installed; cuda-ready: the GPUs
 * usable; plugin-ready: the plugin advertises GPUs); a validator's component passes once the
 * component is up. Unknown components of a validator complete. */
const char *ns_init_gate_wait(const ns_init_gate *g, const ns_gate_view *v);

/* The workload pod NVIDIA's validator creates for component cuda or plugin (its
 * validator/manifests/{cuda,plugin}-workload-validation.yaml with what the validator fills in):
 * generateName nvidia-cuda-validator- / nvidia-device-plugin-validator-, label app=<that>, in
 * namespace ns on node, image the validator's VALIDATOR_IMAGE (else its own), owner references
 * and tolerations of the nvidia-operator-validator DaemonSet ds (may be NULL), and for plugin
 * `resource: 1` in the init container's limits and requests. New reference. */
json_t *ns_init_workload_pod(const ns_init_gate *g, const json_t *container, const char *ns,
                             const char *node, const json_t *ds, const char *resource);

/* The label value NVIDIA's validator selects its workload pods by (app=...). */
const char *ns_init_workload_app(const ns_init_gate *g);

#endif
