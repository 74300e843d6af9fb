/* Tests for kc_informer under faults: watches cut (also mid-event) resume without loss or
 * repeats, 410 Expired relists and reconciles, bookmarks, garbage in the stream, backoff. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer_env.h"

static void drop_and_resume(bool mid_event)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    ie_put_cm(&e, "ns", "b", "0");
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    ie_put_cm(&e, "ns", "a", "1");
    ie_wait_events(&e, 3);

    if (mid_event) {
        /* Half of this MODIFIED reaches the client, then the connection drops. */
        fakeapi_cut_next_event(e.api);
        ie_put_cm(&e, "ns", "b", "1");
    } else {
        fakeapi_cut_watches(e.api);
        ie_put_cm(&e, "ns", "b", "1");
    }
    /* More changes while the informer is disconnected: they must come from the history. */
    ie_put_cm(&e, "ns", "c", "0");
    fakeapi_delete(e.api, "ns", "a");
    ie_wait_watches(&e, 2);
    ie_put_cm(&e, "ns", "d", "0"); /* and one live on the resumed watch */
    ie_wait_events(&e, 7);
    ie_settle(&e, 100);
    cr_assert_eq(e.adds, 4, "a, b, c, d");
    cr_assert_eq(e.updates, 2, "a→1, b→1 exactly once each");
    cr_assert_eq(e.deletes, 1);
    ie_assert_consistent(&e);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.relists, 0, "a resume must not relist");
    cr_assert_eq(s.lists, 1);
    cr_assert_eq(s.watches, 2);
    cr_assert_eq(s.errors, 1, "the drop is one error");
    /* The second watch resumed from the version of the last event fully received. */
    char *l = fakeapi_request_line(e.api, 2);
    cr_assert(strstr(l, "resourceVersion=3&"), "resume request: %s", l);
    free(l);
    ie_fini(&e);
}

Test(informer_faults, watch_drop_resumes_without_loss_or_repeat)
{
    drop_and_resume(false);
}

Test(informer_faults, watch_drop_mid_event_resumes_without_loss_or_repeat)
{
    drop_and_resume(true);
}

Test(informer_faults, clean_end_resumes_at_once_and_instant_end_backs_off)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    kc_informer_opts o = ie_fast_opts();
    o.watch_timeout_s = 7;
    ie_informer(&e, &KC_RES_CONFIGMAPS, "ns", &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    char *l = fakeapi_request_line(e.api, 1);
    cr_assert(strstr(l, "GET /api/v1/namespaces/ns/configmaps?"), "%s", l);
    cr_assert(strstr(l, "timeoutSeconds=7"), "%s", l);
    free(l);
    ie_put_cm(&e, "ns", "a", "0");
    ie_wait_events(&e, 1);
    /* A watch that delivered events and ended cleanly is resumed without an error. */
    fakeapi_end_watches(e.api);
    ie_wait_watches(&e, 2);
    ie_put_cm(&e, "ns", "a", "1");
    ie_wait_events(&e, 2);
    fakeapi_end_watches(e.api);
    ie_wait_watches(&e, 3);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.errors, 0);
    cr_assert_eq(s.watches, 3);
    /* One that ends at once with nothing is treated as a failure (no tight reconnect loop). */
    fakeapi_end_watches(e.api);
    ie_wait_watches(&e, 4);
    s = ie_stats(&e);
    cr_assert_eq(s.errors, 1);
    cr_assert_geq(s.last_backoff_ms, 20);
    ie_assert_consistent(&e);
    ie_fini(&e);
}

/* The acceptance criterion: after 410 the relist reconciles adds, updates and deletes. */
static void expired_relist(fakeapi_expired_mode mode)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    fakeapi_set_expired_mode(e.api, mode);
    ie_put_cm(&e, "ns", "keep", "0");
    ie_put_cm(&e, "ns", "change", "0");
    ie_put_cm(&e, "ns", "remove", "0");
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    cr_assert_eq(e.adds, 3);

    /* The loop does not run in between: the informer sees the drop only after the server has
     * changed and forgotten its history. */
    fakeapi_cut_watches(e.api);
    ie_put_cm(&e, "ns", "change", "1");
    ie_put_cm(&e, "ns", "change", "2");
    fakeapi_delete(e.api, "ns", "remove");
    ie_put_cm(&e, "ns", "added", "0");
    fakeapi_compact(e.api);

    ie_wait_events(&e, 6);
    ie_settle(&e, 100);
    cr_assert_eq(e.adds, 4, "added");
    cr_assert_eq(e.updates, 1, "change (once, to its final state)");
    cr_assert_eq(e.deletes, 1, "remove");
    ie_assert_consistent(&e);
    json_t *ch = kc_informer_get(e.inf, "ns", "change");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ch, "data"), "v")), "2");
    json_decref(ch);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.relists, 1);
    cr_assert_eq(s.lists, 2);
    cr_assert(kc_informer_synced(e.inf));
    fakeapi_stats fs;
    fakeapi_get_stats(e.api, &fs);
    cr_assert_eq(fs.expired, 1);

    /* And it keeps watching from the relist's version (a 410 as HTTP status is no stream). */
    ie_wait_watches(&e, mode == FAKEAPI_EXPIRED_HTTP ? 2 : 3);
    ie_put_cm(&e, "ns", "later", "0");
    ie_wait_events(&e, 7);
    ie_assert_consistent(&e);
    ie_fini(&e);
}

Test(informer_faults, http_410_relists_and_reconciles)
{
    expired_relist(FAKEAPI_EXPIRED_HTTP);
}

Test(informer_faults, error_event_410_relists_and_reconciles)
{
    expired_relist(FAKEAPI_EXPIRED_EVENT);
}

static bool has_bookmark(ie_env *e)
{
    return ie_stats(e).bookmarks > 0;
}

Test(informer_faults, bookmark_advances_resume_version)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "mine", "a", "0");
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, "mine", &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    /* Changes elsewhere advance the server's version without any event for this watch. */
    for (int i = 0; i < 5; i++)
        ie_put_cm(&e, "other", "x", i % 2 ? "1" : "0");
    fakeapi_bookmark(e.api);
    cr_assert(ie_wait_for(&e, has_bookmark, 20000));
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)fakeapi_rv(e.api));
    cr_assert_str_eq(ie_stats(&e).resource_version, rv);
    /* Thanks to the bookmark, a resume after compaction is still within the history. */
    fakeapi_compact(e.api);
    fakeapi_cut_watches(e.api);
    ie_wait_watches(&e, 2);
    ie_settle(&e, 50);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.relists, 0, "the bookmark's version must be used to resume");
    cr_assert_eq(e.adds, 1);
    cr_assert_eq(kc_informer_count(e.inf), 1);
    ie_fini(&e);
}

Test(informer_faults, garbage_in_stream_is_an_error_then_recovers)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    static const char garbage[] = "\x00\x01\xfe not json at all }{\n";
    fakeapi_inject(e.api, garbage, sizeof(garbage) - 1);
    ie_wait_watches(&e, 2);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.errors, 1);
    cr_assert_geq(s.last_backoff_ms, 20, "recovery goes through the backoff");
    /* A well-formed but unknown event type is refused the same way. */
    static const char unknown[] = "{\"type\":\"EXPLODED\",\"object\":{}}\n";
    fakeapi_inject(e.api, unknown, strlen(unknown));
    ie_wait_watches(&e, 3);
    cr_assert_eq(ie_stats(&e).errors, 2);
    /* An ERROR event other than 410 is a failure too, retried from the same version. */
    static const char err500[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
                                 "\"code\":500,\"reason\":\"InternalError\"}}\n";
    fakeapi_inject(e.api, err500, strlen(err500));
    ie_wait_watches(&e, 4);
    cr_assert_eq(ie_stats(&e).errors, 3);
    char *l = fakeapi_request_line(e.api, 4);
    cr_assert(strstr(l, "resourceVersion=1&"), "%s", l);
    free(l);
    ie_put_cm(&e, "ns", "b", "0");
    ie_put_cm(&e, "ns", "a", "1");
    ie_wait_events(&e, 3);
    ie_settle(&e, 50);
    cr_assert_eq(e.adds, 2);
    cr_assert_eq(e.updates, 1);
    ie_assert_consistent(&e);
    cr_assert_eq(ie_stats(&e).relists, 0);
    ie_fini(&e);
}

static bool errors_at_least_4(ie_env *e)
{
    return ie_stats(e).errors >= 4;
}

Test(informer_faults, failing_list_backs_off_exponentially_then_syncs)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    fakeapi_fail_next(e.api, 4, 500, "InternalError");
    kc_informer_opts o = {.backoff_initial_ms = 20, .backoff_max_ms = 80};
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    kc_err err;
    cr_assert_eq(kc_informer_start(e.inf, &err), KC_OK);
    cr_assert_eq(kc_informer_start(e.inf, &err), KC_EARG, "second start refused");
    long long t0 = ie_now_ms();
    cr_assert(ie_wait_for(&e, errors_at_least_4, 20000));
    cr_assert_not(kc_informer_synced(e.inf), "not synced while lists fail");
    cr_assert_eq(kc_informer_count(e.inf), 0);
    kc_informer_stats s = ie_stats(&e);
    /* Delays 20, 40, 80 then capped at 80, each with up to 25% jitter. */
    cr_assert(s.last_backoff_ms >= 80 && s.last_backoff_ms <= 100, "last backoff %ld",
              s.last_backoff_ms);
    cr_assert(ie_wait_for(&e, ie_is_synced, 20000));
    cr_assert_geq(ie_now_ms() - t0, 20 + 40 + 80, "the backoffs were actually waited");
    cr_assert_eq(e.adds, 1);
    cr_assert_eq(ie_stats(&e).lists, 1);
    ie_assert_consistent(&e);
    ie_fini(&e);
}

static bool errors_at_least_1(ie_env *e)
{
    return ie_stats(e).errors >= 1;
}

Test(informer_faults, failing_watch_retries_from_same_version)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    /* The first watch request is refused; it is retried, not turned into a relist. */
    fakeapi_cut_watches(e.api);
    fakeapi_fail_next(e.api, 1, 503, "ServiceUnavailable");
    cr_assert(ie_wait_for(&e, errors_at_least_1, 20000));
    ie_wait_watches(&e, 1);
    ie_put_cm(&e, "ns", "a", "1");
    ie_wait_events(&e, 2);
    cr_assert_eq(ie_stats(&e).lists, 1);
    ie_assert_consistent(&e);
    ie_fini(&e);
}
