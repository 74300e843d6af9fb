/* Tests for kc_watch: event decoding across arbitrary chunk splits, errors, Status of ERROR events.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_watch.h"

/* Records "TYPE:name" for every event into one string, so sequences compare with one assert. */
typedef struct rec {
    char log[4096];
    int n;
    int stop_at; /* when > 0, the stop_at-th event returns stop_code */
    kc_code stop_code;
} rec;

static kc_code record(kc_watch_type type, json_t *obj, void *ud, kc_err *err)
{
    rec *r = ud;
    r->n++;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    size_t l = strlen(r->log);
    snprintf(r->log + l, sizeof(r->log) - l, "%s%s:%s", l ? "," : "", kc_watch_type_name(type),
             name ? name : "-");
    if (r->stop_at && r->n == r->stop_at)
        return kc_err_set(err, r->stop_code, "handler refused event %d", r->n);
    return KC_OK;
}

static const char BODY[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}"
    "\r\n"
    "\n"
    "  \r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"6\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";
static const char WANT[] = "ADDED:a,MODIFIED:a,BOOKMARK:-,DELETED:a,ERROR:-";

Test(watch, decodes_many_events_in_one_chunk)
{
    rec r = {0};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, record, &r);
    kc_err err;
    cr_assert_eq(kc_watch_decoder_feed(&d, BODY, strlen(BODY), &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_watch_decoder_finish(&d, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(r.log, WANT);
    cr_assert_eq(d.events, 5);
    cr_assert_eq(d.line, 7, "blank lines count as lines for error positions");
    kc_watch_decoder_free(&d);
}

Test(watch, every_two_chunk_split_gives_the_same_events)
{
    size_t len = strlen(BODY);
    for (size_t cut = 0; cut <= len; cut++) {
        rec r = {0};
        kc_watch_decoder d;
        kc_watch_decoder_init(&d, 0, record, &r);
        cr_assert_eq(kc_watch_decoder_feed(&d, BODY, cut, NULL), KC_OK, "cut %zu", cut);
        cr_assert_eq(kc_watch_decoder_feed(&d, BODY + cut, len - cut, NULL), KC_OK, "cut %zu", cut);
        cr_assert_eq(kc_watch_decoder_finish(&d, NULL), KC_OK, "cut %zu", cut);
        cr_assert_str_eq(r.log, WANT, "cut at %zu", cut);
        kc_watch_decoder_free(&d);
    }
}

Test(watch, byte_by_byte_and_empty_feeds)
{
    rec r = {0};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, record, &r);
    for (size_t i = 0; BODY[i]; i++) {
        cr_assert_eq(kc_watch_decoder_feed(&d, BODY + i, 1, NULL), KC_OK);
        cr_assert_eq(kc_watch_decoder_feed(&d, "", 0, NULL), KC_OK);
    }
    cr_assert_eq(kc_watch_decoder_finish(&d, NULL), KC_OK);
    cr_assert_str_eq(r.log, WANT);
    kc_watch_decoder_free(&d);
}

static kc_code keep(kc_watch_type t, json_t *o, void *ud, kc_err *e)
{
    (void)t;
    (void)e;
    *(json_t **)ud = json_incref(o);
    return KC_OK;
}

Test(watch, object_is_borrowed_and_can_be_kept)
{
    json_t *kept = NULL;
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, keep, &kept);
    const char *ev = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n";
    cr_assert_eq(kc_watch_decoder_feed(&d, ev, strlen(ev), NULL), KC_OK);
    kc_watch_decoder_free(&d);
    cr_assert_not_null(kept);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(kept, "metadata"), "name")),
                     "x");
    cr_assert_eq(kept->refcount, 1, "the decoder must have dropped its own reference");
    json_decref(kept);
}

/* Feeds body in one go and expects failure: returns the error. */
static kc_err expect_fail(const char *body, size_t max_line, rec *r)
{
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, max_line, record, r);
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = kc_watch_decoder_feed(&d, body, strlen(body), &err);
    if (rc == KC_OK)
        rc = kc_watch_decoder_finish(&d, &err);
    cr_assert_neq(rc, KC_OK, "body should have been refused: %s", body);
    cr_assert_eq(err.code, rc);
    /* The decoder stays failed: a valid event afterwards is refused with the same error. */
    const char *good = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"late\"}}}\n";
    kc_err again;
    cr_assert_eq(kc_watch_decoder_feed(&d, good, strlen(good), &again), rc);
    cr_assert_str_eq(again.msg, err.msg);
    cr_assert_eq(kc_watch_decoder_finish(&d, NULL), rc);
    cr_assert_null(strstr(r->log, "late"));
    kc_watch_decoder_free(&d);
    return err;
}

Test(watch, malformed_json_names_line_and_excerpt)
{
    rec r = {0};
    kc_err e = expect_fail("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                           "\n"
                           "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\n",
                           0, &r);
    cr_assert_eq(e.code, KC_EPARSE);
    cr_assert_str_eq(r.log, "ADDED:a", "events before the bad line are delivered");
    cr_assert(strstr(e.msg, "line 3"), "%s", e.msg);
    cr_assert(strstr(e.msg, "invalid JSON"), "%s", e.msg);
    cr_assert(strstr(e.msg, "{\\x22type\\x22:\\x22ADDED"), "excerpt quoted: %s", e.msg);
}

Test(watch, garbage_bytes_are_escaped_in_the_message)
{
    rec r = {0};
    kc_err e = expect_fail("\x01\xff garbage\n", 0, &r);
    cr_assert_eq(e.code, KC_EPARSE);
    cr_assert(strstr(e.msg, "\\x01\\xff garbage"), "%s", e.msg);
    cr_assert(strstr(e.msg, "line 1"), "%s", e.msg);
    cr_assert_eq(r.n, 0);
}

Test(watch, unknown_type_missing_or_bad_object_and_non_object_root)
{
    rec r = {0};
    kc_err e = expect_fail("{\"type\":\"CREATED\",\"object\":{}}\n", 0, &r);
    cr_assert_eq(e.code, KC_EPARSE);
    cr_assert(strstr(e.msg, "unknown event type \"CREATED\""), "%s", e.msg);

    e = expect_fail("{\"type\":\"ADDED\"}\n", 0, &r);
    cr_assert(strstr(e.msg, "ADDED event has no \"object\""), "%s", e.msg);

    e = expect_fail("{\"type\":\"MODIFIED\",\"object\":[1]}\n", 0, &r);
    cr_assert(strstr(e.msg, "non-object \"object\""), "%s", e.msg);

    e = expect_fail("{\"type\":7,\"object\":{}}\n", 0, &r);
    cr_assert(strstr(e.msg, "no string \"type\""), "%s", e.msg);

    e = expect_fail("[{\"type\":\"ADDED\"}]\n", 0, &r);
    cr_assert(strstr(e.msg, "expected a JSON object"), "%s", e.msg);
    cr_assert_eq(r.n, 0);
}

Test(watch, line_length_cap)
{
    /* 60-byte limit: a 60-byte line passes, 61 fails, whether whole or split across chunks. */
    char line[128];
    const char *head = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"";
    const char *tail = "\"}}}";
    size_t fill = 60 - strlen(head) - strlen(tail);
    snprintf(line, sizeof(line), "%s%.*s%s\n", head, (int)fill, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
             tail);
    cr_assert_eq(strlen(line), 61);
    rec r = {0};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 60, record, &r);
    cr_assert_eq(kc_watch_decoder_feed(&d, line, 30, NULL), KC_OK);
    cr_assert_eq(kc_watch_decoder_feed(&d, line + 30, 31, NULL), KC_OK);
    cr_assert_eq(r.n, 1);
    kc_watch_decoder_free(&d);

    char longer[130];
    snprintf(longer, sizeof(longer), "%s%.*s%s\n", head, (int)fill + 1,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", tail);
    kc_err e = expect_fail(longer, 60, &r);
    cr_assert_eq(e.code, KC_EPARSE);
    cr_assert(strstr(e.msg, "60-byte limit"), "%s", e.msg);

    /* Split: the cap triggers on the buffered part before the newline ever arrives. */
    kc_watch_decoder_init(&d, 60, record, &r);
    cr_assert_eq(kc_watch_decoder_feed(&d, longer, 40, NULL), KC_OK);
    kc_err e2;
    cr_assert_eq(kc_watch_decoder_feed(&d, longer + 40, 21, &e2), KC_EPARSE);
    cr_assert(strstr(e2.msg, "line 1: longer than"), "%s", e2.msg);
    kc_watch_decoder_free(&d);
}

Test(watch, finish_detects_truncation)
{
    rec r = {0};
    kc_err e = expect_fail("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                           "{\"type\":\"ADDED\",\"obj",
                           0, &r);
    cr_assert_eq(e.code, KC_EPARSE);
    cr_assert(strstr(e.msg, "truncated watch stream"), "%s", e.msg);
    cr_assert(strstr(e.msg, "after line 1"), "%s", e.msg);
    cr_assert_str_eq(r.log, "ADDED:a");

    /* Trailing whitespace without a newline is not an event. */
    kc_watch_decoder d;
    rec r2 = {0};
    kc_watch_decoder_init(&d, 0, record, &r2);
    cr_assert_eq(kc_watch_decoder_feed(&d, " \r", 2, NULL), KC_OK);
    cr_assert_eq(kc_watch_decoder_finish(&d, NULL), KC_OK);
    kc_watch_decoder_free(&d);
    /* An empty body is a clean, empty stream. */
    kc_watch_decoder_init(&d, 0, record, &r2);
    cr_assert_eq(kc_watch_decoder_finish(&d, NULL), KC_OK);
    kc_watch_decoder_free(&d);
    cr_assert_eq(r2.n, 0);
}

Test(watch, callback_error_stops_decoding)
{
    rec r = {.stop_at = 2, .stop_code = KC_ECANCELED};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, record, &r);
    kc_err err;
    cr_assert_eq(kc_watch_decoder_feed(&d, BODY, strlen(BODY), &err), KC_ECANCELED);
    cr_assert_str_eq(err.msg, "handler refused event 2");
    cr_assert_str_eq(r.log, "ADDED:a,MODIFIED:a", "no event after the refusal");
    cr_assert_eq(kc_watch_decoder_feed(&d, "\n", 1, NULL), KC_ECANCELED);
    kc_watch_decoder_free(&d);
}

static kc_code bare(kc_watch_type t, json_t *o, void *ud, kc_err *e)
{
    (void)t;
    (void)o;
    (void)ud;
    (void)e;
    return KC_EIO;
}

Test(watch, callback_error_without_message_gets_one)
{
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, bare, NULL);
    kc_err err;
    cr_assert_eq(kc_watch_decoder_feed(&d, BODY, strlen(BODY), &err), KC_EIO);
    cr_assert(strstr(err.msg, "stopped the stream at line 1"), "%s", err.msg);
    kc_watch_decoder_free(&d);
}

Test(watch, error_event_status_maps_to_codes)
{
    json_t *st =
        json_pack("{s:s,s:s,s:s,s:s,s:i}", "kind", "Status", "status", "Failure", "message",
                  "too old resource version: 5 (10)", "reason", "Expired", "code", 410);
    kc_err err;
    cr_assert_eq(kc_watch_status_error(st, &err), KC_EEXPIRED);
    cr_assert_eq(err.code, KC_EEXPIRED);
    cr_assert(strstr(err.msg, "too old resource version"), "%s", err.msg);
    json_decref(st);

    st = json_pack("{s:s,s:s,s:i}", "kind", "Status", "message", "etcd down", "code", 500);
    cr_assert_eq(kc_watch_status_error(st, &err), KC_ESERVER);
    json_decref(st);

    /* 410 without a reason still means Expired. */
    st = json_pack("{s:s,s:i}", "kind", "Status", "code", 410);
    cr_assert_eq(kc_watch_status_error(st, &err), KC_EEXPIRED);
    json_decref(st);

    /* A Status claiming success is still an error when it arrives as an ERROR event. */
    st = json_pack("{s:s,s:i}", "kind", "Status", "code", 200);
    cr_assert_neq(kc_watch_status_error(st, &err), KC_OK);
    json_decref(st);

    json_t *arr = json_array();
    cr_assert_eq(kc_watch_status_error(arr, &err), KC_EPARSE);
    cr_assert_eq(kc_watch_status_error(NULL, NULL), KC_EPARSE);
    json_decref(arr);
}

Test(watch, names_and_bad_arguments)
{
    cr_assert_str_eq(kc_watch_type_name(KC_WATCH_BOOKMARK), "BOOKMARK");
    cr_assert_str_eq(kc_watch_type_name(KC_WATCH_DELETED), "DELETED");
    cr_assert_str_eq(kc_watch_type_name((kc_watch_type)42), "UNKNOWN");
    cr_assert_eq(kc_watch_decoder_feed(NULL, "x", 1, NULL), KC_EARG);
    cr_assert_eq(kc_watch_decoder_finish(NULL, NULL), KC_EARG);
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, NULL, NULL);
    cr_assert_eq(kc_watch_decoder_feed(&d, NULL, 1, NULL), KC_EARG);
    /* Without a callback events are still validated and counted. */
    cr_assert_eq(kc_watch_decoder_feed(&d, BODY, strlen(BODY), NULL), KC_OK);
    cr_assert_eq(d.events, 5);
    kc_watch_decoder_free(&d);
    kc_watch_decoder_free(NULL);
}
