/* kc_workqueue: a thread-safe, deduplicating, rate-limited queue of string keys for controllers. */
#ifndef KC_WORKQUEUE_H
#define KC_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "kc_metrics.h"

/* Semantics follow client-go's rate-limited delaying work queue:
 *  - a key is queued at most once however often it is added;
 *  - a key handed out by get is "processing" until done; adding it meanwhile marks it dirty and
 *    it is queued again by done, so no two workers ever hold the same key at once;
 *  - add_after queues a key once its delay has passed (an internal thread watches the earliest
 *    deadline); a key already waiting keeps the earlier of its two deadlines;
 *  - add_rate_limited delays by max(per-key exponential backoff, overall token bucket);
 *  - shutdown stops accepting keys, drops pending delayed adds, and wakes every getter: get
 *    hands out what is still queued, then returns false.
 * Every function is safe to call from any thread. */
typedef struct kc_workqueue kc_workqueue;

typedef struct kc_workqueue_opts {
    long base_delay_ms; /* per-key backoff for the first failure; 0 → 5 */
    long max_delay_ms;  /* per-key backoff cap; 0 → 1000000 (1000 s) */
    double qps;         /* overall token bucket rate; 0 → 10; < 0 → no bucket */
    int burst;          /* bucket depth; 0 → 100 */
} kc_workqueue_opts;

/* opts may be NULL for the defaults. Starts the delay thread. */
kc_code kc_workqueue_new(const kc_workqueue_opts *opts, kc_workqueue **out, kc_err *err);
/* Shuts the queue down if needed, joins the delay thread and frees everything. No thread may be
 * inside a queue call anymore (join your workers first). Accepts NULL. */
void kc_workqueue_free(kc_workqueue *q);

/* Queues key (copied) unless it is already queued. KC_ECANCELED after shutdown (the key is
 * dropped), KC_ENOMEM, KC_EARG for NULL. */
kc_code kc_workqueue_add(kc_workqueue *q, const char *key);
/* Queues key after delay_ms (<= 0: now). Same errors as add. */
kc_code kc_workqueue_add_after(kc_workqueue *q, const char *key, long delay_ms);
/* add_after with the rate limiter's delay for key; counts a requeue of key. */
kc_code kc_workqueue_add_rate_limited(kc_workqueue *q, const char *key);
/* add_rate_limited, waiting at least min_delay_ms (a server's Retry-After). */
kc_code kc_workqueue_add_backoff(kc_workqueue *q, const char *key, long min_delay_ms);
/* Clears key's failure count (call when it was processed successfully). */
void kc_workqueue_forget(kc_workqueue *q, const char *key);
/* How many times key went through add_rate_limited since it was last forgotten. */
int kc_workqueue_num_requeues(kc_workqueue *q, const char *key);
/* The delay add_rate_limited would apply now for key, in ms, without consuming anything:
 * max(base × 2^failures capped, token bucket wait). */
long kc_workqueue_peek_delay_ms(kc_workqueue *q, const char *key);
/* The ms left until a delayed add of key (add_after, add_rate_limited) queues it; -1 when none is
 * pending. */
long kc_workqueue_delayed_ms(kc_workqueue *q, const char *key);
/* Whether key needs processing: queued for a worker, or re-added while being processed (a
 * delayed add counts once it is due). */
bool kc_workqueue_dirty(kc_workqueue *q, const char *key);

/* Blocks until a key is available and hands it out: *key is malloc'd and owned by the caller, who
 * must call kc_workqueue_done(q, *key) when finished with it and then free it. Returns false (and
 * *key = NULL) once the queue is shut down and empty. */
bool kc_workqueue_get(kc_workqueue *q, char **key);
/* Marks key as no longer processing; requeues it when it was added meanwhile. */
void kc_workqueue_done(kc_workqueue *q, const char *key);

/* Stops accepting keys and wakes every getter; idempotent. */
void kc_workqueue_shutdown(kc_workqueue *q);
bool kc_workqueue_shutting_down(kc_workqueue *q);
/* Keys queued and ready (not processing, not waiting on a delay). */
size_t kc_workqueue_len(kc_workqueue *q);
/* Keys waiting on a delay. */
size_t kc_workqueue_delayed_len(kc_workqueue *q);

/* Registers client-go's work-queue metrics for q in r, with the families, help texts, label names
 * and buckets controller-runtime registers them with (both labels, controller and name, carry
 * name; workqueue_depth also has priority, ""):
 *   workqueue_depth                       gauge: keys added and not handed out yet
 *   workqueue_adds_total                  counter: adds of a key not already waiting
 *   workqueue_queue_duration_seconds      histogram: from such an add to get
 *   workqueue_work_duration_seconds       histogram: from get to done
 *   workqueue_retries_total               counter: adds with a delay (add_after > 0 ms,
 *                                         add_rate_limited, add_backoff)
 *   workqueue_unfinished_work_seconds     gauge: summed age of the keys being processed
 *   workqueue_longest_running_processor_seconds  gauge: age of the oldest of them
 * Once per registry (the family names are fixed) and once per queue; r must outlive q, whose
 * kc_workqueue_free removes the registry hook that samples the gauges. */
kc_code kc_workqueue_register_metrics(kc_workqueue *q, kc_registry *r, const char *name,
                                      kc_err *err);

#endif
