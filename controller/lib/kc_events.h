/* kc_events: records core/v1 Events about objects, deduplicating repeats as client-go does. */
#ifndef KC_EVENTS_H
#define KC_EVENTS_H

#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>

#include "kc_client.h"
#include "kc_error.h"

typedef struct kc_event_recorder kc_event_recorder;

typedef struct kc_event_recorder_opts {
    const char *component;         /* source.component and reportingComponent; required */
    const char *instance;          /* reportingInstance and source.host; NULL → the host name */
    const char *default_namespace; /* where Events about cluster-scoped objects go; NULL →
                                      "default" */
    size_t cache_size;             /* LRU entries for deduplication and spam buckets; 0 → 4096 */
    long dedup_window_ms;          /* a repeat within this time of the last write is counted on
                                      the existing Event; 0 → 3600000 (an Event's default TTL) */
    int spam_burst;                /* per-object token bucket depth; 0 → 25; < 0 → no limit */
    double spam_refill_per_s;      /* tokens regained per second; 0 → 1/300 (one per 5 min) */
    long long (*clock_ms)(void);   /* monotonic milliseconds for the window and the buckets;
                                      NULL → CLOCK_MONOTONIC (tests pass a fake clock) */
    size_t queue_size;             /* 0: kc_event_record writes before it returns; > 0: it
                                      queues the Event (up to this many) for a sender thread
                                      of the recorder and returns at once; an Event that finds
                                      the queue full is dropped and counted (queue_dropped) */
} kc_event_recorder_opts;

/* Creates a recorder writing through client (not owned; must outlive the recorder). Strings in
 * opts are copied. Missing component → KC_EARG. */
kc_code kc_event_recorder_new(kc_client *client, const kc_event_recorder_opts *opts,
                              kc_event_recorder **out, kc_err *err);
/* With a queue, writes what is still queued (each write bounded by the client's timeout) and
 * stops the sender thread. */
void kc_event_recorder_free(kc_event_recorder *rec);
/* Waits until every Event queued so far has been written (or has failed); returns at once for
 * a recorder without a queue. */
void kc_event_recorder_flush(kc_event_recorder *rec);

/* Records an Event about `involved`: either the object itself (kind, apiVersion,
 * metadata.name/namespace/uid/resourceVersion are read) or an ObjectReference holding those
 * fields at the top level. type is "Normal" or "Warning"; reason a short UpperCamelCase word;
 * the message is printf-formatted (truncated to 1024 bytes).
 *
 * The first occurrence creates an Event named <name>.<16 hex digits> in the object's namespace
 * (the default namespace for cluster-scoped objects) with count 1. A repeat of the same object,
 * type, reason and message within the dedup window merge-patches that Event's count and
 * lastTimestamp; if the Event is gone (404) a new one is created. Objects recording faster than
 * the spam bucket allows have their Events dropped.
 *
 * Without a queue: returns after the API call; calls are serialized per recorder. Thread-safe. A
 * failure is logged (a warning with the full message) and counted, and its code returned
 * (KC_ETOOMANYREQUESTS for a spam drop, logged at debug level only); it is never fatal, so
 * callers usually ignore the result. Bad arguments → KC_EARG. With a queue (opts.queue_size):
 * returns KC_OK once queued, KC_EUNAVAILABLE when the queue is full (the Event is dropped);
 * failures of the write itself are only logged and counted. */
kc_code kc_event_record(kc_event_recorder *rec, const json_t *involved, const char *type,
                        const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
kc_code kc_event_vrecord(kc_event_recorder *rec, const json_t *involved, const char *type,
                         const char *reason, const char *fmt, va_list ap);

typedef struct kc_event_stats {
    unsigned long created;       /* Events POSTed */
    unsigned long patched;       /* repeats counted on an existing Event */
    unsigned long dropped;       /* refused by the spam filter */
    unsigned long failed;        /* API writes that failed */
    unsigned long queue_dropped; /* dropped because the queue was full */
} kc_event_stats;
void kc_event_recorder_stats(kc_event_recorder *rec, kc_event_stats *out);

#endif
