/* kc_informer: a list+watch cache of one resource kept current on a libuv loop (client-go style).
 */
#ifndef KC_INFORMER_H
#define KC_INFORMER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kc_client.h"
#include "kc_error.h"
#include "kc_rest.h"

/* The informer lists the resource (pages of opts.page_size, continue tokens, asynchronously on
 * the loop), then watches from the list's resourceVersion with bookmarks. A watch that ends
 * cleanly is resumed at once from the last resourceVersion seen (events and bookmarks advance
 * it); a failed one is resumed after a jittered exponential backoff. A 410 Expired (HTTP status
 * or ERROR event) triggers a full relist whose result replaces the cache atomically; handlers
 * then see add for new objects, update for those whose resourceVersion changed and delete for
 * those gone. Objects in the cache are shared and immutable: never modify one you get from the
 * informer (json_deep_copy it first). */
typedef struct kc_informer kc_informer;

/* Handlers run on the loop thread, without the cache lock held (they may call get/list/count).
 * Objects are borrowed for the call; json_incref to keep them. Any handler may be NULL. */
typedef struct kc_informer_handlers {
    void (*on_add)(kc_informer *inf, const json_t *obj, void *ud);
    void (*on_update)(kc_informer *inf, const json_t *old_obj, const json_t *new_obj, void *ud);
    /* obj: the object's last state (the DELETED event's object, or the cached one after a
     * relist found it gone). */
    void (*on_delete)(kc_informer *inf, const json_t *obj, void *ud);
    void *ud;
} kc_informer_handlers;

/* Applied to every object before it is cached or shown to a handler. It receives a reference it
 * owns and returns the object to keep: either obj itself, trimmed in place, or a new object (then
 * it must json_decref obj). Keep metadata.name, .namespace and .resourceVersion: relists detect
 * changes by resourceVersion. Returning NULL counts as out of memory: the informer abandons the
 * current list/watch and retries after a backoff. Runs on the loop thread. */
typedef json_t *(*kc_informer_transform)(json_t *obj, const kc_resource *res, void *ud);

/* The default transform: drops metadata.managedFields (large, never read by controllers) and, for
 * core/v1 nodes, status.images. */
json_t *kc_informer_default_transform(json_t *obj, const kc_resource *res, void *ud);

/* How the cache stores objects. Without a codec every cached object is a jansson tree (one
 * allocation per value: several KiB for a trimmed Pod). With one, the cache keeps a compact
 * record per object, built by encode from the transformed object, and rebuilds a JSON object
 * with decode on every read (get, list, foreach and the old object given to on_update):
 * readers then receive a fresh object, which costs a decode per read and saves most of the
 * memory of large caches. encode returns NULL and decode NULL only when out of memory. */
typedef struct kc_informer_codec {
    void *(*encode)(const json_t *obj, void *ud);
    json_t *(*decode)(const void *rec, void *ud);
    void (*free_rec)(void *rec);
    void *ud;
    /* Optional: the size in bytes of a record, which is then position-independent and needs no
     * release but its memory. The cache copies such a record into its own entry (one allocation
     * per object instead of two) and frees the encoded one at once with free_rec. */
    size_t (*rec_size)(const void *rec, void *ud);
} kc_informer_codec;

/* A codec that keeps each object as its compact JSON text (json_dumps, JSON_COMPACT). */
extern const kc_informer_codec kc_informer_json_text_codec;

typedef struct kc_informer_opts {
    const char *label_selector;      /* NULL: everything */
    const char *field_selector;      /* NULL: everything */
    kc_informer_transform transform; /* NULL → kc_informer_default_transform */
    void *transform_ud;
    bool no_transform;       /* cache objects exactly as received (transform ignored) */
    long page_size;          /* list page size; 0 → 500 */
    long watch_timeout_s;    /* timeoutSeconds per watch; 0 → random in [290, 600] */
    long backoff_initial_ms; /* first delay after an error; 0 → 800 */
    long backoff_max_ms;     /* cap (the delay doubles per consecutive error); 0 → 30000 */
    long backoff_reset_ms;   /* error-free time after which the delay starts over; 0 → 120000 */
    const char *name;        /* for log lines; NULL → the resource name */
    const kc_informer_codec *codec; /* NULL: cache jansson trees; must outlive the informer */
} kc_informer_opts;

/* Creates a stopped informer. client must already be attached to loop (kc_client_attach_loop)
 * and, like res, must outlive the informer; ns: a namespace, or NULL/"" for all namespaces (and
 * for cluster-scoped resources). Strings in res, opts and ns are copied. handlers and opts may be
 * NULL. */
kc_code kc_informer_new(kc_client *client, uv_loop_t *loop, const kc_resource *res, const char *ns,
                        const kc_informer_handlers *handlers, const kc_informer_opts *opts,
                        kc_informer **out, kc_err *err);

/* Starts the initial list. Call on the loop thread (or before the loop runs). KC_EARG if already
 * started or stopped. */
kc_code kc_informer_start(kc_informer *inf, kc_err *err);
/* Cancels the running request and timers; no handler runs afterwards. Loop thread only; safe to
 * call from a handler and more than once. The cache stays readable. */
void kc_informer_stop(kc_informer *inf);
/* Stops the informer and frees it. The memory is released once the loop has processed the
 * closing of its timer, so keep running the loop (as uv_loop_close requires anyway). Loop thread
 * only; not from a handler. Accepts NULL. */
void kc_informer_free(kc_informer *inf);

/* ---- reads: any thread ---- */

/* True once the first full list is in the cache and its add handlers have run. */
bool kc_informer_synced(kc_informer *inf);
/* The cached object ns/name (ns NULL or "" for cluster-scoped), as a new reference the caller
 * must json_decref; NULL when absent. */
json_t *kc_informer_get(kc_informer *inf, const char *ns, const char *name);
/* Whether ns/name is cached; allocates nothing, so it tells "absent" from "out of memory" when
 * kc_informer_get returned NULL. */
bool kc_informer_has(kc_informer *inf, const char *ns, const char *name);
/* A snapshot array of every cached object (new references; caller decrefs the array). NULL only
 * when out of memory. */
json_t *kc_informer_list(kc_informer *inf);
size_t kc_informer_count(kc_informer *inf);
/* Calls fn for each cached object under the cache lock (writers wait); fn must be quick and must
 * not call back into this informer. Return false from fn to stop early. */
void kc_informer_foreach(kc_informer *inf, bool (*fn)(const char *key, const json_t *obj, void *ud),
                         void *ud);
/* The cache key of an object: "ns/name", or "name" when it has no namespace. Malloc'd; NULL when
 * obj has no metadata.name or out of memory. */
char *kc_informer_key(const json_t *obj);

typedef struct kc_informer_stats {
    unsigned long lists;       /* full lists completed (the first one and every relist) */
    unsigned long pages;       /* list pages received */
    unsigned long relists;     /* lists after the first, forced by 410 Expired */
    unsigned long watches;     /* watch requests started */
    unsigned long events;      /* watch events decoded, bookmarks and errors included */
    unsigned long bookmarks;   /* BOOKMARK events */
    unsigned long errors;      /* failed lists or watches (each followed by a backoff) */
    long last_backoff_ms;      /* the most recent backoff delay chosen */
    char resource_version[64]; /* the last resourceVersion seen (truncated if longer) */
} kc_informer_stats;
void kc_informer_get_stats(kc_informer *inf, kc_informer_stats *out);

#endif
