/* kc_leader: leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection. */
#ifndef KC_LEADER_H
#define KC_LEADER_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_client.h"
#include "kc_error.h"

typedef struct kc_leader kc_leader;

typedef struct kc_leader_config {
    const char *namespace_; /* of the Lease; required */
    const char *name;       /* of the Lease; required */
    const char *identity;   /* this candidate, unique among candidates (e.g. the pod name) */
    /* How long others wait, from when they last saw the Lease change, before taking it over;
     * 0 → 15000. Written to the Lease in whole seconds (rounded up). */
    long lease_duration_ms;
    /* How long the leader keeps retrying a failing renewal before it gives up leading;
     * 0 → 10000. Must be below lease_duration_ms. */
    long renew_deadline_ms;
    /* Pause between attempts to acquire or renew; 0 → 2000. Must be below renew_deadline_ms. */
    long retry_period_ms;
    /* Callbacks run on the elector's thread and must return promptly (signal another thread to
     * do the work); they must not call kc_leader_stop. Any may be NULL. */
    void (*on_started_leading)(void *ud);
    /* Called once leadership is lost (renewal failed for renew_deadline, or another holder was
     * seen) and after kc_leader_stop released it. The usual reaction is to stop all work at once,
     * often by exiting. The elector then campaigns again unless stopped. */
    void (*on_stopped_leading)(void *ud);
    /* Called when the observed holder changes to a new, non-empty identity (ours included). */
    void (*on_new_leader)(const char *identity, void *ud);
    void *ud;
} kc_leader_config;

/* Validates the config, copies it and starts campaigning on a new thread. The client (not owned)
 * must outlive the elector; give it a request timeout and retry budget well below
 * renew_deadline_ms, since a renewal blocked in the client cannot be abandoned. Bad or
 * inconsistent durations → KC_EARG. */
kc_code kc_leader_start(kc_client *client, const kc_leader_config *cfg, kc_leader **out,
                        kc_err *err);

/* True while this candidate holds the Lease and its last successful renewal is younger than
 * renew_deadline (so a leader stuck in a slow API call stops claiming leadership in time).
 * Thread-safe. */
bool kc_leader_is_leader(kc_leader *l);

/* Copies the last observed holder identity into buf ("" when none); returns buf. Thread-safe. */
const char *kc_leader_holder(kc_leader *l, char *buf, size_t size);

/* Stops campaigning. When leading, releases the Lease (holderIdentity "", leaseDurationSeconds 1,
 * renewTime now, as client-go's ReleaseOnCancel) so another candidate takes over at its next
 * retry, then calls on_stopped_leading. Joins the thread and frees. Accepts NULL. */
void kc_leader_stop(kc_leader *l);

#endif
