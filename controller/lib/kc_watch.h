/* kc_watch: incremental decoder for a Kubernetes watch response body (one JSON event per line). */
#ifndef KC_WATCH_H
#define KC_WATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

typedef enum kc_watch_type {
    KC_WATCH_ADDED,
    KC_WATCH_MODIFIED,
    KC_WATCH_DELETED,
    KC_WATCH_BOOKMARK, /* object carries only metadata.resourceVersion worth keeping */
    KC_WATCH_ERROR     /* object is a Status; see kc_watch_status_error */
} kc_watch_type;

/* "ADDED", "MODIFIED", ...; "UNKNOWN" for an out-of-range value. */
const char *kc_watch_type_name(kc_watch_type type);

/* Called once per decoded event, in stream order. object is borrowed for the duration of the call
 * (json_incref it to keep it; it may be modified, the decoder drops its reference afterwards).
 * Return KC_OK to go on; any other code stops decoding: feed returns that code (with err as the
 * callback filled it) and the decoder stays stopped. */
typedef kc_code (*kc_watch_event_cb)(kc_watch_type type, json_t *object, void *ud, kc_err *err);

#define KC_WATCH_MAX_LINE_DEFAULT ((size_t)16 << 20) /* 16 MiB, well above etcd's 1.5 MiB */

/* Decoder state. Embed it or allocate it; treat the fields as private. */
typedef struct kc_watch_decoder {
    kc_watch_event_cb cb;
    void *ud;
    char *buf; /* the incomplete trailing line, owned */
    size_t len, cap;
    size_t max_line;
    unsigned long line;   /* number of lines completed so far */
    unsigned long events; /* events delivered */
    kc_code failed;       /* KC_OK while usable; the first error otherwise */
    kc_err fail_err;      /* that error, reported again by later calls */
} kc_watch_decoder;

/* Prepares a decoder that calls cb for every event. max_line: longest accepted line in bytes, 0 →
 * KC_WATCH_MAX_LINE_DEFAULT. Cannot fail. */
void kc_watch_decoder_init(kc_watch_decoder *d, size_t max_line, kc_watch_event_cb cb, void *ud);

/* Feeds the next chunk of the body (any split: part of a line, many lines). Lines end with "\n";
 * a trailing "\r" and blank lines are ignored. Each complete line must be a JSON object
 * {"type": one of the kc_watch_type names, "object": {...}}; anything else (malformed JSON, an
 * unknown type, a missing or non-object "object", a line longer than max_line) fails with
 * KC_EPARSE and a message naming the line number and quoting its start. After any failure the
 * decoder refuses further input with the same error. KC_ENOMEM when buffering fails. */
kc_code kc_watch_decoder_feed(kc_watch_decoder *d, const char *data, size_t len, kc_err *err);

/* Marks the end of the body: KC_OK when it ended on a line boundary (only whitespace left),
 * KC_EPARSE "truncated watch stream" when a partial event is pending; a previous failure is
 * reported again. The decoder must still be freed. */
kc_code kc_watch_decoder_finish(kc_watch_decoder *d, kc_err *err);

/* Releases the buffer; the decoder may be re-initialised afterwards. Accepts NULL. */
void kc_watch_decoder_free(kc_watch_decoder *d);

/* Turns the Status object of an ERROR event into err and returns its code: the Status "code"
 * field is the HTTP status (410 → KC_EEXPIRED), its reason and message are kept. A status that
 * is not an object yields KC_EPARSE. */
kc_code kc_watch_status_error(const json_t *status, kc_err *err);

#endif
