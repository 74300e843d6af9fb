/* ks_store_int: the object store's internals, shared by ks_store.c (types, reads), ks_store_write.c
 * (create/update/delete) and ks_store_watch.c (history and watchers). Not for other modules, except
 * the test hooks at the end. */
#ifndef KS_STORE_INT_H
#define KS_STORE_INT_H

#include <pthread.h>
#include <time.h>

#include "kc_map.h"
#include "ks_store.h"

/* One stored object. `obj` is the committed state and is never modified after the commit: a write
 * replaces it with a new json_t, so history entries and watcher queues can share it by reference
 * (jansson reference counts are atomic here) and readers deep-copy it outside the lock. */
typedef struct ks_obj {
    char *ns; /* "" for cluster-scoped objects */
    char *name;
    json_t *obj;
} ks_obj;

/* The storage of one group/resource. Several served versions of a type (a CRD with v1beta1 and
 * v1) share a bucket, as the API server stores one object per group/resource; readers get the
 * apiVersion of the type they asked through. */
typedef struct ks_bucket {
    char *group;
    char *resource;
    bool namespaced;
    int nserved;     /* served types storing here */
    kc_map *objs;    /* "ns/name" (or "name") → ks_obj* */
    ks_obj **sorted; /* every object in namespace, then name order (lists page through it) */
    size_t n, cap;
    struct ks_watch **watchers; /* open watches of this bucket not in widx */
    size_t nwatchers, capwatchers;
    /* The secondary index (ks_store_index.c) on one field: spec.nodeName for pods, else
     * metadata.name. Watches whose field selector requires a value of it are filed in widx under
     * that value, so an event reaches only the watches it can concern. For fields other than the
     * name, oidx files the objects too, so a list by that field touches only the matches. */
    const char *ifield;
    kc_map *widx;     /* value → ks_wlist* */
    kc_map *oidx;     /* value → kc_map of "ns/name" → ks_obj* (NULL for metadata.name) */
    bool oidx_broken; /* an allocation failed: lists scan instead */
} ks_bucket;

typedef struct ks_wlist {
    struct ks_watch **v;
    size_t n, cap;
} ks_wlist;

/* A served type. `pub` comes first so a const ks_rtype * handed out is a ks_type *. */
typedef struct ks_type {
    ks_rtype pub;
    char *api_version; /* "v1" or "group/version" */
    ks_bucket *bucket;
    bool served;
} ks_type;

/* One committed write in the history ring. `old` is the state before (NULL for ADDED), `obj` the
 * state after (for DELETED: the last state, carrying the deletion's resourceVersion). `t` is the
 * type the write came through, NULL for the store's own bootstrap writes. */
typedef struct ks_hist {
    ks_event_type type;
    ks_type *t;
    ks_bucket *b;
    json_t *old;
    json_t *obj;
    uint64_t rv;
} ks_hist;

/* One event waiting in a watcher's queue (obj is a shared reference to committed state). */
typedef struct ks_qev {
    ks_event_type type;
    ks_type *t;
    json_t *obj;
    uint64_t rv;
} ks_qev;

struct ks_watch {
    pthread_mutex_t mu; /* guards everything below that changes after open */
    pthread_cond_t cond;
    ks_store *st; /* NULL once the store is freed */
    ks_qev *q;    /* circular queue */
    size_t qhead, qlen, qcap;
    bool closed;
    bool drop_queue; /* closed for falling behind: queued events are discarded */
    kc_code close_code;
    char close_msg[256];
    uint64_t last_rv;            /* newest RV this watcher was given (events or bookmarks) */
    struct timespec last_active; /* monotonic time of the last event handed out */
    /* The filter, fixed at open (read under the store lock by writers). */
    ks_type *t; /* NULL: every type */
    char *ns;   /* NULL: every namespace */
    char *name; /* NULL: any */
    const kc_label_selector *labels;
    const kc_field_selector *fields;
    bool bookmarks;
    bool keep_src;       /* ks_event.src wanted */
    long bookmark_ms;    /* a bookmark after this long without an event */
    bool final_bookmark; /* one more is due at final_at (2 s before the watch ends) */
    struct timespec final_at;
    char *ivalue; /* the value it is filed under in its bucket's widx, or NULL */
};

struct ks_store {
    pthread_rwlock_t lock; /* readers: get/list/count/open; writers: every write */
    uint64_t rv;           /* written under the write lock, read with atomics */
    uint64_t delivered_rv; /* every event up to it is in the watchers' queues (atomics) */
    ks_type **types;
    size_t ntypes, captypes;
    uint64_t types_gen; /* atomics */
    ks_bucket **buckets;
    size_t nbuckets, capbuckets;
    ks_bucket *ns_bucket; /* group "" resource "namespaces", created with the store */
    ks_admit_fn admit;
    void *admit_ud;
    ks_hist *hist; /* ring of the last hcap events */
    size_t hcap, hhead, hlen;
    uint64_t hfloor;                /* every event with rv > hfloor is still in the ring */
    struct ks_watch **all_watchers; /* watches of every type (rtype NULL) */
    size_t nall, capall;
    size_t queue_cap;   /* a watcher with more queued events than this is closed (410) */
    ks_rtype **retired; /* fields replaced by re-registration, freed with the store */
    size_t nretired, capretired;
    ks_store_stats stats;
    struct ks_persist *persist; /* NULL: memory only */
};

/* ---- ks_store.c helpers ---- */

/* Sets err (when non-NULL) with code, HTTP status and a message; returns code. */
kc_code kss_err(kc_err *err, kc_code code, int http, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "pods" for core types, "deployments.apps" otherwise. */
const char *kss_qualified(const ks_type *t, char *buf, size_t size);
/* 404 `<qualified> "<name>" not found`. */
kc_code kss_not_found(kc_err *err, const ks_type *t, const char *name);
/* 404 for a type that is no longer served. */
kc_code kss_unserved(kc_err *err, const ks_type *t);
ks_obj *kss_find(ks_bucket *b, const char *ns, const char *name);
/* First index of b->sorted whose object sorts at or after (ns, name). */
size_t kss_lower_bound(const ks_bucket *b, const char *ns, const char *name);
int kss_key_cmp(const char *ns1, const char *n1, const char *ns2, const char *n2);
/* Adds o to b's map and sorted index (KC_ENOMEM leaves b unchanged); removes it again. */
kc_code kss_index_add(ks_bucket *b, ks_obj *o);
void kss_index_remove(ks_bucket *b, ks_obj *o);
void kss_obj_free(void *o);
/* A deep copy of a stored object with the apiVersion of the type it is read through. */
json_t *kss_export(const ks_type *t, const json_t *stored);
/* Makes next (a state about to be committed, private until now) share with prev every subtree
 * equal to prev's (new references to prev's values), down to `depth` levels of objects and
 * arrays, so that the versions of an object the history holds cost only what changed between
 * them. Safe because committed states are never modified; next must get its last change (its
 * resourceVersion) before this is called. */
void kss_share_unchanged(json_t *next, const json_t *prev, int depth);
/* Makes v (a tree its caller owns) private: every value below it that someone else also holds
 * (a reference count above one, such as a value a mutate function linked in and kept) is
 * replaced by a deep copy; the rest stays. Cheaper than a deep copy of the whole tree when little
 * is shared. false: out of memory (v is then partly private; the caller drops it). */
bool kss_privatize(json_t *v);
/* Fresh identifiers. */
void kss_uuid(char out[37]);
void kss_random_suffix(char out[6]);
/* The namespace and name of an object (borrowed strings, "" when absent). */
const char *kss_meta_str(const json_t *obj, const char *field);
/* The bucket of group/resource, created (with that scope) when absent; NULL when out of memory. */
ks_bucket *kss_bucket_get(ks_store *st, const char *group, const char *resource, bool namespaced);
/* Any served type storing in b (for events written without a type), or NULL. */
ks_type *kss_bucket_type(ks_store *st, ks_bucket *b);

/* ---- ks_store_index.c ---- */

/* The value of a dotted field path as a field selector compares it ("" when absent or null);
 * NULL when it is not a string (such objects are never filed under a value). */
const char *kss_field_value(const json_t *obj, const char *path);
kc_code kss_bucket_index_init(ks_bucket *b);
void kss_bucket_index_free(ks_bucket *b);
/* Files o (its current state) in the object index; unfiles state's value for o. */
void kss_oidx_add(ks_bucket *b, ks_obj *o);
void kss_oidx_remove(ks_bucket *b, ks_obj *o, const json_t *state);
/* The objects filed under value (NULL when none), or NULL when the bucket has no usable object
 * index; *usable says which. */
kc_map *kss_oidx_get(ks_bucket *b, const char *value, bool *usable);
/* The objects a list (or a watch's initial events) must look at, in namespace/name order: one
 * object for a name pinned in a namespace, the object index's entries for a pinned value of the
 * indexed field (pin, when usable), else the namespace's range (want_ns, or all) of the sorted
 * index. c->owned (to free) is set when c->v was allocated. */
typedef struct kss_candidates_t {
    ks_obj **v;
    size_t n;
    ks_obj **owned;
} kss_candidates_t;
kc_code kss_candidates(ks_bucket *b, const char *want_ns, const char *fname, const char *pin,
                       kss_candidates_t *c);
/* First index of v[0..n) whose key sorts after (ns, name) (name NULL: after all of ns). */
size_t kss_bound_after(ks_obj *const *v, size_t n, const char *ns, const char *name);
/* Registers w with its bucket (in widx when its filter pins the indexed field), or removes it. */
kc_code kss_bucket_watch_add(ks_bucket *b, struct ks_watch *w);
void kss_bucket_watch_remove(ks_bucket *b, struct ks_watch *w);
/* Calls fn for every watch of b (filed or not); fn must not add or remove watches. */
void kss_bucket_foreach_watch(ks_bucket *b, void (*fn)(struct ks_watch *w, void *ud), void *ud);
size_t kss_bucket_watch_count(ks_bucket *b);
/* The watches an event with these states can concern: the unfiled ones, then those filed under
 * the value of old and of obj. Calls fn for each, once. */
void kss_bucket_event_watches(ks_bucket *b, const json_t *old, const json_t *obj,
                              void (*fn)(struct ks_watch *w, void *ud), void *ud);

/* ---- ks_store_write.c ---- */

/* Commits a new object (STOLEN) under ns/name: bumps the RV, indexes it, records ADDED. */
kc_code kss_commit_add(ks_store *st, ks_type *t, ks_bucket *b, const char *ns, const char *name,
                       json_t *obj, kc_err *err);
/* Replaces o's state with next (STOLEN): bumps the RV, records MODIFIED. */
void kss_commit_modify(ks_store *st, ks_type *t, ks_bucket *b, ks_obj *o, json_t *next);
/* Removes (and frees) o with a DELETED event whose object is `final` (STOLEN; NULL: a copy of the
 * stored state), stamped with the new RV. Returns the final state as a new reference. */
json_t *kss_commit_remove(ks_store *st, ks_type *t, ks_bucket *b, ks_obj *o, json_t *final);

/* ---- ks_store_watch.c ---- */

/* Records an event in the history (taking references) and queues it for every matching watcher;
 * called with the write lock held, once per RV, in RV order. */
void kss_publish(ks_store *st, ks_event_type type, ks_type *t, ks_bucket *b, json_t *old,
                 json_t *obj, uint64_t rv);
/* Empties the history ring (write lock held); the caller sets hfloor. */
void kss_history_clear(ks_store *st);
/* Closes the watchers of type t (queued events are still delivered first). Write lock held. */
void kss_close_type_watchers(ks_store *st, ks_type *t);
/* Closes and detaches every watcher (store shutdown); frees the history. Write lock held. */
void kss_watch_shutdown(ks_store *st);

/* ---- ks_store_persist.c ---- */

typedef struct ks_persist ks_persist;
/* Appends a committed event to the log (write lock held; no-op when not persisted). */
void kss_persist_append(ks_store *st, ks_event_type type, ks_bucket *b, const json_t *obj,
                        uint64_t rv);
/* Syncs and closes the log, stops the sync thread. */
void kss_persist_close(ks_store *st);

/* ---- test hooks ---- */

/* Sets how many queued events a watcher may hold before it is closed with KC_EEXPIRED. */
void ks_store_set_watch_queue_cap(ks_store *st, size_t cap);

#endif
