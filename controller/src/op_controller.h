/* op_controller: the operator's control loop: watches (ClusterPolicies, Nodes and what the
 * operator owns), a work queue, and the reconcilers for the policy, each node and the status. */
#ifndef OP_CONTROLLER_H
#define OP_CONTROLLER_H

#include <stdbool.h>

#include "kc_client.h"
#include "kc_config.h"
#include "kc_error.h"
#include "kc_metrics.h"
#include "op_render.h"

typedef struct op_controller op_controller;

/* Reconciles run this many at once by default. */
#define OP_DEFAULT_WORKERS 8
/* The node reconciler's writes go through this many pipelined connections (a node's writes
 * always through the same one, in order), each with up to OP_PIPE_DEPTH requests unanswered. */
#define OP_PIPE_LANES 4
#define OP_PIPE_DEPTH 1024

typedef struct op_controller_opts {
    const kc_config *config;    /* API server (copied by the clients) */
    const char *ns;             /* the operator's namespace (OPERATOR_NAMESPACE) */
    const op_states *states;    /* loaded manifests (borrowed; outlive the controller) */
    const char *operator_image; /* validator fallback image (may be NULL) */
    kc_registry *metrics;       /* where the gpu_operator_* metrics go (borrowed, may be NULL) */
    int workers;                /* reconcile threads; 0 → OP_DEFAULT_WORKERS */
    double qps;                 /* API client rate limit; 0 → 500 (burst twice that) */
    const char *identity; /* this replica (user agent "gpu-operator@<identity>/..."); NULL: none */
    long validation_backoff_ms; /* first retry delay of a failed validation; 0 → 5000 */
    bool no_image_prepull;      /* no image-prepull DaemonSet (states/state-image-prepull) */
} op_controller_opts;

/* Creates the controller (clients, caches, queue); nothing runs yet. */
kc_code op_controller_new(const op_controller_opts *opts, op_controller **out, kc_err *err);
/* Runs until op_controller_stop is called (from any thread or a signal handler's thread).
 * Returns KC_OK after a clean stop. */
kc_code op_controller_run(op_controller *c, kc_err *err);
/* Stops for good: cancels every API request (nothing is written afterwards, waits and requests in
 * flight end at once) and asks the running loop to stop. Thread-safe. */
void op_controller_stop(op_controller *c);
/* True once every cache has synced (for /readyz). */
bool op_controller_synced(op_controller *c);
void op_controller_free(op_controller *c);

#endif
