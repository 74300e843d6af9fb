/* fakeapi: an in-memory Kubernetes API server for one resource, with watch history and faults. */
#ifndef FAKEAPI_H
#define FAKEAPI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_rest.h"

/* Serves GET list (limit/continue over a consistent snapshot, labelSelector k=v[,k=v]) and GET
 * watch (resourceVersion replay from its event history, allowWatchBookmarks, timeoutSeconds) for
 * the collection of one resource, cluster-wide and per namespace. A global resourceVersion counter
 * advances with every change. All functions are thread-safe; tests call them from their own
 * thread while the server answers on its threads. */
typedef struct fakeapi fakeapi;

/* How a watch from a compacted resourceVersion is refused. */
typedef enum fakeapi_expired_mode {
    FAKEAPI_EXPIRED_HTTP,  /* HTTP 410 with an Expired Status */
    FAKEAPI_EXPIRED_EVENT, /* 200, one ERROR event carrying a 410 Status, end of stream */
} fakeapi_expired_mode;

/* res is copied. NULL when the server cannot start. */
fakeapi *fakeapi_start(const kc_resource *res);
/* Ends open watches, stops the server, frees everything. Accepts NULL. */
void fakeapi_free(fakeapi *api);
const char *fakeapi_url(fakeapi *api);

/* Creates or replaces an object (obj is borrowed; a deep copy is stored with a new
 * metadata.resourceVersion and a uid), sends ADDED or MODIFIED to open watches. Returns the new
 * resourceVersion. */
uint64_t fakeapi_put(fakeapi *api, const json_t *obj);
/* Deletes ns/name (ns NULL for cluster-scoped), sends DELETED carrying a new resourceVersion.
 * Returns that version, 0 when the object did not exist. */
uint64_t fakeapi_delete(fakeapi *api, const char *ns, const char *name);
uint64_t fakeapi_rv(fakeapi *api);
/* A JSON object mapping "ns/name" (or "name") to a copy of every stored object. */
json_t *fakeapi_objects(fakeapi *api);

/* ---- faults ---- */
/* Cuts every open watch connection now (as a dropped network would). */
void fakeapi_cut_watches(fakeapi *api);
/* The next event is written only halfway to the open watches, which are then cut: the event is
 * in the history (a resumed watch replays it) but no client saw it whole. */
void fakeapi_cut_next_event(fakeapi *api);
/* Ends every open watch cleanly, as timeoutSeconds does. */
void fakeapi_end_watches(fakeapi *api);
/* Sends a BOOKMARK with the current resourceVersion to the watches that allowed bookmarks. */
void fakeapi_bookmark(fakeapi *api);
/* Forgets the history up to the current resourceVersion: watches from older versions get 410,
 * and so do continue tokens of lists taken before. */
void fakeapi_compact(fakeapi *api);
void fakeapi_set_expired_mode(fakeapi *api, fakeapi_expired_mode mode);
/* The next n requests are answered with a Status failure (status, reason). */
void fakeapi_fail_next(fakeapi *api, int n, int status, const char *reason);
/* As fail_next, but starting with the request of 0-based index `first` (counting every request
 * since the start), e.g. to fail the second page of a list. */
void fakeapi_fail_at(fakeapi *api, unsigned first, int n, int status, const char *reason);
/* Writes raw bytes to every open watch. */
void fakeapi_inject(fakeapi *api, const char *bytes, size_t len);

/* ---- observation ---- */
typedef struct fakeapi_stats {
    unsigned requests; /* every request, failed ones included */
    unsigned lists;    /* list requests answered with 200 (each page counts) */
    unsigned watches;  /* watch requests accepted (streams begun, 410-as-event included) */
    unsigned expired;  /* requests refused with 410 */
    int open_watches;  /* watch streams currently open and live */
} fakeapi_stats;
void fakeapi_get_stats(fakeapi *api, fakeapi_stats *out);
/* "GET /path?query" of the n-th request (0-based), malloc'd; NULL when out of range. */
char *fakeapi_request_line(fakeapi *api, unsigned n);

#endif
