/* ns_engine: the running simulation: watches nodes, pods and ConfigMaps, registers the fleet,
 * renews node Leases and plays NVIDIA's node components on every simulated node. */
#ifndef NS_ENGINE_H
#define NS_ENGINE_H

#include "kc_config.h"
#include "kc_error.h"
#include "ns_fleet.h"

/* Timings (milliseconds) of what the node components take. slow faults multiply them. */
typedef struct ns_timings {
    long driver_load_ms;        /* driver pod Running → GPUs usable (default 800) */
    long toolkit_ms;            /* toolkit pod Running → GPU containers can start (default 300) */
    long plugin_ms;             /* device plugin Running → resources advertised (default 200) */
    long gfd_ms;                /* GFD Running → labels published (default 200) */
    long validation_ms;         /* a validation pod runs this long (default 300) */
    long mig_apply_ms;          /* creating MIG instances (default 1000) */
    long mig_client_timeout_ms; /* how long the MIG manager waits for clients (default 300000) */
    long reboot_ms;             /* a simulated reboot (default 3000) */
} ns_timings;

typedef struct ns_engine_opts {
    const kc_config *config;    /* API server (borrowed for the call) */
    const ns_fleet *fleet;      /* borrowed; must outlive the run */
    ns_timings timings;         /* zero fields take the defaults */
    const char *validator_glob; /* images holding the validator; NULL → ns_image_has_validator's */
    int workers;                /* reconcile threads; 0 → 4 */
    long heartbeat_s;           /* Lease renewal period; 0 → 10 */
    const char *ready_file;     /* written once every node is registered (may be NULL) */
    /* The nodes' kubelet is a stand-in that writes pod status from templates (kwok on the
     * conformance lane), not kubesim's, which keeps the status nodesim's answers imply: a crash
     * loop nodesim wrote is written again when a later status write of that stand-in lost it. */
    bool template_kubelet;
} ns_engine_opts;

/* Runs until SIGINT/SIGTERM. Returns KC_OK on a clean stop, else the error that stopped it. */
kc_code ns_engine_run(const ns_engine_opts *opts, kc_err *err);

#endif
