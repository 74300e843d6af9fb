/* Tests for informers that cache compact records (kc_informer_codec): reads decode fresh objects,
 * handlers see the right old and new objects through list, watch and relist, records are freed,
 * and an encoder failure is retried like any out-of-memory error. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "informer_env.h"

/* Wraps the JSON text codec and counts its calls. */
static atomic_int encodes, decodes, frees, fail_encodes;

static void *counting_encode(const json_t *obj, void *ud)
{
    if (atomic_load(&fail_encodes) > 0) {
        atomic_fetch_sub(&fail_encodes, 1);
        return NULL;
    }
    atomic_fetch_add(&encodes, 1);
    return kc_informer_json_text_codec.encode(obj, ud);
}

/* A decode on a thread that set hold_here waits, after signalling that it started, until the
 * test lets it go: the record stays in use while the watch replaces and deletes it. */
static _Thread_local bool hold_here;
static atomic_bool decoding, let_go, held_out;

static json_t *counting_decode(const void *rec, void *ud)
{
    atomic_fetch_add(&decodes, 1);
    if (hold_here) {
        atomic_store(&decoding, true);
        /* Bounded, so that a cache that blocks on its readers fails the test, not hangs it. */
        for (int i = 0; i < 3000 && !atomic_load(&let_go); i++)
            usleep(1000);
        atomic_store(&held_out, !atomic_load(&let_go));
    }
    return kc_informer_json_text_codec.decode(rec, ud);
}

static void counting_free(void *rec)
{
    atomic_fetch_add(&frees, 1);
    kc_informer_json_text_codec.free_rec(rec);
}

static const kc_informer_codec counting = {counting_encode, counting_decode, counting_free, NULL,
                                           NULL};

static size_t text_size(const void *rec, void *ud)
{
    (void)ud;
    return strlen(rec) + 1;
}

/* The same with rec_size: the cache keeps a copy of each record in its entry. */
static const kc_informer_codec counting_inline = {counting_encode, counting_decode, counting_free,
                                                  NULL, text_size};

static void reset_counts(void)
{
    atomic_store(&encodes, 0);
    atomic_store(&decodes, 0);
    atomic_store(&frees, 0);
    atomic_store(&fail_encodes, 0);
}

static const char *data_v(const json_t *o)
{
    return json_string_value(json_object_get(json_object_get(o, "data"), "v"));
}

static bool count_keys(const char *key, const json_t *obj, void *ud)
{
    cr_assert_not_null(key);
    cr_assert_not_null(data_v(obj), "foreach hands out decoded objects (%s)", key);
    (*(int *)ud)++;
    return true;
}

Test(informer_codec, records_serve_reads_handlers_and_relists)
{
    reset_counts();
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "keep", "0");
    ie_put_cm(&e, "ns", "change", "0");
    ie_put_cm(&e, "ns", "remove", "0");
    kc_informer_opts o = ie_fast_opts();
    o.codec = &counting;
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    cr_assert_eq(e.adds, 3);
    cr_assert_eq(atomic_load(&encodes), 3, "one record per listed object");

    /* A read decodes a fresh object, still trimmed by the default transform. */
    json_t *k1 = kc_informer_get(e.inf, "ns", "keep");
    json_t *k2 = kc_informer_get(e.inf, "ns", "keep");
    cr_assert_not_null(k1);
    cr_assert_neq(k1, k2, "every read decodes its own object");
    cr_assert_eq(k1->refcount, 1, "the caller holds the only reference");
    cr_assert(json_equal(k1, k2));
    cr_assert_str_eq(data_v(k1), "0");
    cr_assert_null(json_object_get(json_object_get(k1, "metadata"), "managedFields"),
                   "the transform runs before encoding");
    json_decref(k1);
    json_decref(k2);
    cr_assert_null(kc_informer_get(e.inf, "ns", "absent"));

    /* Watch: an update hands the previous version (decoded) to the handler. */
    ie_put_cm(&e, "ns", "change", "1");
    ie_wait_events(&e, 4);
    cr_assert_eq(e.updates, 1);
    ie_assert_consistent(&e);

    /* Relist after 410: adds, updates and deletes are computed from the stored versions. */
    fakeapi_cut_watches(e.api);
    ie_put_cm(&e, "ns", "change", "2");
    fakeapi_delete(e.api, "ns", "remove");
    ie_put_cm(&e, "ns", "added", "0");
    fakeapi_compact(e.api);
    ie_wait_events(&e, 7);
    ie_settle(&e, 100);
    cr_assert_eq(e.adds, 4, "added");
    cr_assert_eq(e.updates, 2, "change, once more");
    cr_assert_eq(e.deletes, 1, "remove");
    cr_assert_eq(ie_stats(&e).relists, 1);
    ie_assert_consistent(&e);
    json_t *ch = kc_informer_get(e.inf, "ns", "change");
    cr_assert_str_eq(data_v(ch), "2");
    json_decref(ch);

    /* list and foreach decode every record. */
    json_t *all = kc_informer_list(e.inf);
    cr_assert_eq(json_array_size(all), 3);
    size_t i;
    json_t *it;
    json_array_foreach(all, i, it) cr_assert_not_null(data_v(it));
    json_decref(all);
    int n = 0;
    kc_informer_foreach(e.inf, count_keys, &n);
    cr_assert_eq(n, 3);
    cr_assert_gt(atomic_load(&decodes), 0);

    ie_fini(&e);
    cr_assert_eq(atomic_load(&frees), atomic_load(&encodes),
                 "every record is freed (%d encoded, %d freed)", atomic_load(&encodes),
                 atomic_load(&frees));
}

Test(informer_codec, encoder_failure_backs_off_and_retries)
{
    reset_counts();
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    ie_put_cm(&e, "ns", "b", "0");
    kc_informer_opts o = ie_fast_opts();
    o.codec = &counting;
    atomic_store(&fail_encodes, 1);
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_geq(s.errors, 1, "the failed encode counts as an error");
    cr_assert_geq(s.pages, 2, "the list was retried");
    cr_assert_eq(e.adds, 2);
    ie_wait_watches(&e, 1);

    /* A watch event whose record cannot be built ends the watch; the resume brings it back. */
    atomic_store(&fail_encodes, 1);
    ie_put_cm(&e, "ns", "a", "1");
    ie_wait_events(&e, 3);
    ie_settle(&e, 100);
    ie_assert_consistent(&e);
    json_t *a = kc_informer_get(e.inf, "ns", "a");
    cr_assert_str_eq(data_v(a), "1");
    json_decref(a);
    ie_fini(&e);
    cr_assert_eq(atomic_load(&frees), atomic_load(&encodes));
}

static void *slow_reader(void *arg)
{
    hold_here = true;
    return kc_informer_get(arg, "ns", "x");
}

static bool updated_and_deleted(ie_env *e)
{
    return e->updates == 1 && e->deletes == 1;
}

/* Starts an informer over ConfigMaps ns/x (and ns/y) with codec cd, has a reader decode x while
 * the watch replaces and deletes it, and returns what the reader got; *freed_while_read is the
 * count of freed records before the reader was let go. */
static json_t *read_across_replacement(ie_env *e, const kc_informer_codec *cd,
                                       int *freed_while_read)
{
    reset_counts();
    atomic_store(&decoding, false);
    atomic_store(&let_go, false);
    atomic_store(&held_out, false);
    ie_init(e, &KC_RES_CONFIGMAPS);
    ie_put_cm(e, "ns", "x", "0");
    ie_put_cm(e, "ns", "y", "0");
    kc_informer_opts o = ie_fast_opts();
    o.codec = cd;
    ie_informer(e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(e);
    ie_wait_watches(e, 1);

    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, slow_reader, e->inf), 0);
    long long end = ie_now_ms() + 5000;
    while (!atomic_load(&decoding) && ie_now_ms() < end)
        usleep(1000);
    cr_assert(atomic_load(&decoding), "the reader never started decoding");

    ie_put_cm(e, "ns", "x", "1");
    fakeapi_delete(e->api, "ns", "x");
    bool applied = ie_wait_for(e, updated_and_deleted, 5000);
    *freed_while_read = atomic_load(&frees);
    atomic_store(&let_go, true);
    json_t *got = NULL;
    pthread_join(t, (void **)&got);
    cr_assert(applied && !atomic_load(&held_out),
              "the watch waited for the reader (updates %d, deletes %d)", e->updates, e->deletes);
    cr_assert_not_null(got);
    cr_assert_str_eq(data_v(got), "0", "the reader gets the version it found");
    cr_assert_null(kc_informer_get(e->inf, "ns", "x"));
    return got;
}

/* A read decodes outside the cache lock: the watch goes on replacing and deleting the object
 * meanwhile, and the record being read is freed by the reader, not under it. */
Test(informer_codec, reads_decode_outside_the_lock)
{
    ie_env e;
    int freed_while_read;
    json_t *got = read_across_replacement(&e, &counting, &freed_while_read);
    cr_assert_eq(freed_while_read, 1, "only the version nobody was reading is freed (%d)",
                 freed_while_read);
    json_decref(got);
    cr_assert_eq(atomic_load(&frees), 2, "the reader freed the record it held");
    ie_fini(&e);
    cr_assert_eq(atomic_load(&frees), atomic_load(&encodes));
}

/* With rec_size the cache copies each record into its entry and frees the encoded one at once;
 * a reader still decodes the version it found while the watch replaces and deletes it. */
Test(informer_codec, inline_records_outlive_their_replacement)
{
    ie_env e;
    int freed_while_read;
    json_t *got = read_across_replacement(&e, &counting_inline, &freed_while_read);
    cr_assert_eq(freed_while_read, atomic_load(&encodes), "encoded records are freed at once");
    json_decref(got);
    json_t *y = kc_informer_get(e.inf, "ns", "y");
    cr_assert_not_null(y);
    cr_assert_str_eq(data_v(y), "0");
    json_decref(y);
    ie_assert_consistent(&e);
    ie_fini(&e);
    cr_assert_eq(atomic_load(&frees), atomic_load(&encodes));
}
