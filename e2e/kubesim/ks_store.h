/* ks_store: kubesim's in-memory object store: served types, objects, the global resourceVersion,
 * the event history that watches replay from, and watchers. Every API write goes through it. */
#ifndef KS_STORE_H
#define KS_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_error.h"
#include "kc_selector.h"

typedef struct ks_store ks_store;

/* A served resource type (built-in or from a CRD). Strings are owned by the store once
 * registered; callers pass their own and the store copies. */
typedef struct ks_rtype {
    const char *group;    /* "" for core */
    const char *version;  /* "v1" */
    const char *resource; /* plural: "daemonsets" */
    const char *kind;     /* "DaemonSet" */
    const char *singular; /* "daemonset" */
    bool namespaced;
    bool has_status;                /* has a /status subresource: main writes ignore .status, status
                                     * writes change only .status */
    bool has_scale;                 /* has /scale (deployments, replicasets) */
    const char *const *short_names; /* NULL-terminated or NULL ("ds") */
    const char *const *categories;  /* NULL-terminated or NULL ("all") */
    json_t *printer_columns;        /* array of {name,type,jsonPath,description,priority} or NULL
                                     * (borrowed at register; the store keeps its own reference) */
    json_t *schema;                 /* openAPIV3Schema for CR validation, or NULL */
    const char *crd_name;           /* "clusterpolicies.nvidia.com" when served from a CRD */
    bool no_generation;             /* metadata.generation is not kept: the API server sets it
                                     * only for kinds whose strategy does (workloads, CRDs, PDBs,
                                     * custom resources), not for ConfigMaps, Pods, Services ... */
} ks_rtype;

/* The watch history a store keeps by default (kubesim's --history default follows it). */
#define KS_STORE_DEFAULT_HISTORY 20000

/* Creates a store whose watch history keeps the last `history_cap` events (0 →
 * KS_STORE_DEFAULT_HISTORY). */
ks_store *ks_store_new(size_t history_cap);
void ks_store_free(ks_store *st);

/* ---- types ---- */

/* Registers (or replaces, same group/version/resource) a served type. The returned pointer stays
 * valid until the store is freed (types are never deallocated, only marked unserved). */
const ks_rtype *ks_store_register(ks_store *st, const ks_rtype *t);
/* Stops serving a type (its CRD was deleted); its objects are dropped with DELETED events. */
void ks_store_unregister(ks_store *st, const ks_rtype *t);
/* Lookup by group/version/resource (resource may also be the singular name or a short name). */
const ks_rtype *ks_store_type(ks_store *st, const char *group, const char *version,
                              const char *resource);
/* Lookup by group + kind, preferring version when given (NULL: any served version). */
const ks_rtype *ks_store_type_by_kind(ks_store *st, const char *group, const char *version,
                                      const char *kind);
/* Snapshot of every served type; *out is malloc'd (caller frees the array, not the types). */
size_t ks_store_types(ks_store *st, const ks_rtype ***out);
/* Bumped whenever the set of served types changes (discovery caches key on it). */
uint64_t ks_store_types_generation(ks_store *st);

/* ---- admission ---- */

/* Called with the store's write lock held, for every create and update (API and controllers
 * alike), after the store filled metadata and before it commits. `old` is NULL on create.
 * It may change `obj` (defaulting) and returns KC_OK or an error (KC_EINVALID → 422 with the
 * field named, KC_EFORBIDDEN ...). Must not call back into the store. */
typedef kc_code (*ks_admit_fn)(void *ud, const ks_rtype *t, const json_t *old, json_t *obj,
                               bool status_write, kc_err *err);
void ks_store_set_admission(ks_store *st, ks_admit_fn fn, void *ud);

/* ---- objects: every function is thread-safe; returned json_t are new references ---- */

uint64_t ks_store_rv(ks_store *st); /* the current global resourceVersion */

kc_code ks_get(ks_store *st, const ks_rtype *t, const char *ns, const char *name, json_t **out,
               kc_err *err);

typedef struct ks_list_opts {
    const kc_label_selector *labels; /* NULL: all */
    const kc_field_selector *fields; /* NULL: all */
    long limit;                      /* 0: no limit */
    const char *continue_token;      /* from a previous page */
} ks_list_opts;

/* Lists objects of t in ns (NULL or "": every namespace) in name order (namespace, then name).
 * *items is a new array; *rv the resourceVersion of the snapshot; *next_continue a malloc'd
 * token when more remain (NULL otherwise). An invalid or expired continue token → KC_EEXPIRED
 * or KC_EBADREQUEST. */
kc_code ks_list(ks_store *st, const ks_rtype *t, const char *ns, const ks_list_opts *opts,
                json_t **items, uint64_t *rv, char **next_continue, kc_err *err);
/* Number of objects of a type (all namespaces). */
size_t ks_count(ks_store *st, const ks_rtype *t);

/* Creates obj (STOLEN). Fills metadata.uid, creationTimestamp, resourceVersion, generation=1
 * (none for types with no_generation; drops any incoming resourceVersion/uid/deletionTimestamp
 * and, for those types, generation), generateName → name with a random
 * suffix, apiVersion/kind from the type. 409 AlreadyExists; 404 when the namespace does not
 * exist (or is terminating → 403 Forbidden, as the API server says). */
kc_code ks_create(ks_store *st, const ks_rtype *t, const char *ns, json_t *obj, json_t **out,
                  kc_err *err);

typedef enum ks_write_kind {
    KS_WRITE_MAIN,   /* the object; .status is kept from the stored one when t->has_status */
    KS_WRITE_STATUS, /* /status: only .status changes (and metadata is kept) */
} ks_write_kind;

/* Replaces an object (obj STOLEN). When obj carries metadata.resourceVersion it must equal the
 * stored one (else 409 Conflict with the API server's message); without one the write is
 * unconditional. generation increments when anything outside metadata and status changes (types
 * with no_generation have none).
 * An object being deleted whose last finalizer this write removes is deleted (DELETED event).
 * No new finalizers may be added once deletion started (422). A write that changes nothing is
 * not an event and keeps the resourceVersion. */
kc_code ks_update(ks_store *st, const ks_rtype *t, const char *ns, json_t *obj, ks_write_kind kind,
                  json_t **out, kc_err *err);

/* Read-modify-write under the store's lock: fn gets a private copy of the stored object and
 * changes it in place (or returns an error to abort). The result is committed as ks_update would
 * (without the resourceVersion check). Used by patches and controllers. */
typedef kc_code (*ks_mutate_fn)(void *ud, json_t *obj, kc_err *err);
kc_code ks_mutate(ks_store *st, const ks_rtype *t, const char *ns, const char *name,
                  ks_write_kind kind, ks_mutate_fn fn, void *ud, json_t **out, kc_err *err);

typedef enum ks_propagation {
    KS_PROPAGATE_DEFAULT = 0, /* Background, except Orphan where the type defaults to it */
    KS_PROPAGATE_BACKGROUND,
    KS_PROPAGATE_FOREGROUND,
    KS_PROPAGATE_ORPHAN,
} ks_propagation;

typedef struct ks_delete_opts {
    ks_propagation propagation;
    const char *precondition_uid;              /* NULL: none */
    const char *precondition_resource_version; /* NULL: none */
    long grace_period_seconds;                 /* -1: the object's default */
} ks_delete_opts;

/* Deletes an object. With finalizers (or Foreground, which adds `foregroundDeletion`, or Orphan,
 * which adds `orphan`) it only sets deletionTimestamp/deletionGracePeriodSeconds (MODIFIED) and
 * *out is the updated object; otherwise the object is removed (DELETED) and *out is the last
 * state. Pods bound to a node get deletionTimestamp and are removed by the kubelet after their
 * grace period (grace 0 removes at once). Garbage collection of dependents is the GC
 * controller's job, driven by the events. Deleting a namespace marks it Terminating. */
kc_code ks_delete(ks_store *st, const ks_rtype *t, const char *ns, const char *name,
                  const ks_delete_opts *opts, json_t **out, kc_err *err);

/* ---- watch ---- */

typedef enum ks_event_type { KS_ADDED, KS_MODIFIED, KS_DELETED, KS_BOOKMARK } ks_event_type;

typedef struct ks_event {
    ks_event_type type;
    const ks_rtype *rtype;
    /* Owned by the receiver of ks_watch_next (json_decref it): a shallow copy, so top-level
     * members may be set or removed, but nested values are the store's and must not change. */
    json_t *object;
    uint64_t rv;
    /* With ks_watch_opts.keep_src only: a reference (the receiver's to json_decref) to the store's
     * object that object was copied from, shared by every watcher of the event: the same pointer
     * means the same state, so what is derived from it may be computed once for all of them. */
    json_t *src;
} ks_event;

typedef struct ks_watch ks_watch;

typedef struct ks_watch_opts {
    const ks_rtype *rtype;           /* NULL: every type (in-process controllers) */
    const char *ns;                  /* NULL or "": all namespaces */
    const char *name;                /* NULL: any (metadata.name=X field selectors) */
    const kc_label_selector *labels; /* NULL: all; borrowed for the watch's lifetime */
    const kc_field_selector *fields; /* NULL: all; borrowed for the watch's lifetime */
    bool send_initial;               /* RV unset/"0": first an ADDED for every current match */
    uint64_t from_rv;                /* replay events strictly after this RV */
    /* Periodic BOOKMARK events (rv only) when the store has moved past what the watcher was
     * given: after bookmark_ms without an event (0: KS_BOOKMARK_DEFAULT_MS, the API server's
     * once a minute), and once more 2 s before lifetime_ms from the open (the watch's
     * timeoutSeconds; 0: none), so a client resumes from a recent resourceVersion. */
    bool bookmarks;
    long bookmark_ms;
    long lifetime_ms;
    bool keep_src; /* fill ks_event.src */
} ks_watch_opts;

/* The API server's watch cache bookmarks each watcher about once a minute. */
#define KS_BOOKMARK_DEFAULT_MS 60000
/* ... and once more this long before the watch's timeout. */
#define KS_BOOKMARK_BEFORE_END_MS 2000

/* Opens a watch. from_rv older than the retained history → KC_EEXPIRED with the API server's
 * message ("too old resource version: N (M)"). An object leaving the selection is delivered as
 * DELETED, one entering as ADDED. Events of one watch arrive in resourceVersion order. */
kc_code ks_watch_open(ks_store *st, const ks_watch_opts *opts, ks_watch **out, kc_err *err);
/* Waits up to timeout_ms for the next event: 1 = *ev filled, 0 = timeout, -1 = the watch was
 * closed by the store (shutdown, its type unserved, or the watcher fell too far behind:
 * then *err says KC_EEXPIRED so the client relists). */
int ks_watch_next(ks_watch *w, int timeout_ms, ks_event *ev, kc_err *err);
void ks_watch_close(ks_watch *w);

/* Drops history so that watches resuming from before the current RV get 410 (tests). */
void ks_store_compact(ks_store *st);

/* ---- persistence (ks_store_persist.c) ---- */

/* Keeps the store in dir: store.snap (every object at one resourceVersion) and store.log (every
 * commit after it, one JSON line each, appended before the write returns). When dir holds a
 * state, it replaces what the store holds (call right after ks_store_new): objects keep their
 * uids, timestamps, generations and resourceVersions, new commits continue after the last one,
 * and the log's commits are the watch history again (older resourceVersions: 410). A thread
 * syncs the log to disk once a second and folds it into a new snapshot when it has grown. */
typedef struct ks_persist_info {
    bool restored;           /* dir held a state */
    size_t objects;          /* objects in the store afterwards */
    size_t snapshot_records; /* read from store.snap */
    size_t log_records;      /* replayed from store.log */
    uint64_t rv, snapshot_rv;
    double load_ms;
} ks_persist_info;
kc_code ks_store_persist_open(ks_store *st, const char *dir, ks_persist_info *info, kc_err *err);
/* Writes a snapshot now and empties the log (tests; the sync thread does it when needed). */
kc_code ks_store_persist_compact(ks_store *st, kc_err *err);
typedef struct ks_persist_stats {
    uint64_t records, bytes, ns; /* log records appended, their bytes, time spent on them */
    uint64_t compactions, last_compact_ns;
    uint64_t log_bytes; /* the log's size now */
} ks_persist_stats;
void ks_store_persist_stats(ks_store *st, ks_persist_stats *out);

/* Per-client request counting lives in the API layer; the store counts writes for benchmarks. */
typedef struct ks_store_stats {
    uint64_t creates, updates, deletes, events, watchers;
} ks_store_stats;
void ks_store_get_stats(ks_store *st, ks_store_stats *out);

/* RFC 3339 "now" used for every timestamp (UTC, seconds precision), and a microsecond variant. */
void ks_now_rfc3339(char buf[32]);
void ks_now_rfc3339_micro(char buf[40]);

#endif
