/* Tests for the store's persistence (ks_store_persist.c): a store reopened on its state directory
 * holds the same objects (uids, timestamps, generations, resourceVersions), continues the
 * resourceVersion, replays the log as watch history (410 before the snapshot), survives a kill
 * (the files as they are while the store runs) and drops a torn last record. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ks_store_test.h"

static char dir[64], copy[64];
static ks_store *st;
static kst_types ty;

static ks_store *open_store(const char *d, ks_persist_info *info)
{
    ks_store *s = ks_store_new(1000);
    cr_assert_not_null(s);
    kc_err err = {0};
    cr_assert_eq(ks_store_persist_open(s, d, info, &err), KC_OK, "open %s: %s", d, err.msg);
    kst_types t;
    kst_register_all(s, &t);
    if (s != st)
        ty = t;
    return s;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ks_persist.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(copy, sizeof(copy), "%s.copy", dir);
    st = open_store(dir, NULL);
}

static void rm_dir(const char *d)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
    ks_store_free(st);
    st = NULL;
    rm_dir(dir);
    rm_dir(copy);
}

TestSuite(persist, .init = setup, .fini = teardown);

static json_t *get(ks_store *s, const ks_rtype *t, const char *ns, const char *name)
{
    json_t *out = NULL;
    kc_code rc = ks_get(s, t, ns, name, &out, NULL);
    return rc == KC_OK ? out : NULL;
}

/* The files of dir as a killed process leaves them: copied while the store is open. */
static void copy_state(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", copy, dir, copy);
    cr_assert_eq(system(cmd), 0);
}

static void set_data(json_t *cm, const char *v)
{
    json_object_set_new(cm, "data", json_pack("{s:s}", "k", v));
}

static void assert_same(const json_t *a, const json_t *b)
{
    cr_assert(json_equal(a, b), "objects differ:\n%s\n%s", json_dumps(a, JSON_SORT_KEYS),
              json_dumps(b, JSON_SORT_KEYS));
}

Test(persist, objects_and_metadata_survive_a_kill)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "apps", NULL));
    json_t *cm = kst_obj("apps", "cfg", NULL);
    set_data(cm, "1");
    json_decref(kst_create(st, ty.configmaps, "apps", cm));
    json_t *dep = kst_create(st, ty.deployments, "apps",
                             kst_obj("apps", "web", json_pack("{s:i}", "replicas", 1)));
    /* A spec change: generation 2. */
    json_t *upd = json_deep_copy(dep);
    json_object_set_new(json_object_get(upd, "spec"), "replicas", json_integer(3));
    json_t *dep2 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "apps", upd, KS_WRITE_MAIN, &dep2, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(dep2, "generation"), 2);
    kst_create_free(st, ty.pods, "apps", kst_pod("apps", "gone", NULL));
    cr_assert_eq(ks_delete(st, ty.pods, "apps", "gone", NULL, NULL, NULL), KC_OK);
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w1", NULL));
    uint64_t rv = ks_store_rv(st);
    json_t *cm_before = get(st, ty.configmaps, "apps", "cfg");
    json_t *ns_before = get(st, ty.namespaces, NULL, "default");

    copy_state();
    ks_persist_info info;
    ks_store *s2 = open_store(copy, &info);
    cr_assert(info.restored);
    cr_assert_eq(info.rv, rv);
    cr_assert_eq(ks_store_rv(s2), rv, "the resourceVersion continues where it was");
    json_t *dep3 = get(s2, ks_store_type(s2, "apps", "v1", "deployments"), "apps", "web");
    cr_assert_not_null(dep3);
    assert_same(dep2, dep3);
    json_t *cm2 = get(s2, ks_store_type(s2, "", "v1", "configmaps"), "apps", "cfg");
    assert_same(cm_before, cm2);
    json_t *ns2 = get(s2, ks_store_type(s2, "", "v1", "namespaces"), NULL, "default");
    assert_same(ns_before, ns2);
    cr_assert_null(get(s2, ks_store_type(s2, "", "v1", "pods"), "apps", "gone"));
    json_t *w = get(s2, ks_store_type(s2, "example.com", "v1", "widgets"), NULL, "w1");
    cr_assert_not_null(w);
    /* New writes continue after the restored resourceVersion. */
    json_t *cm3 = kst_create(s2, ks_store_type(s2, "", "v1", "configmaps"), "apps",
                             kst_obj("apps", "new", NULL));
    cr_assert_eq(kst_rv(cm3), rv + 1);
    ks_store_free(s2);
    json_decref(cm3);
    json_decref(w);
    json_decref(ns2);
    json_decref(cm2);
    json_decref(dep3);
    json_decref(ns_before);
    json_decref(cm_before);
    json_decref(dep2);
    json_decref(dep);
}

static int next_event(ks_watch *w, ks_event *ev)
{
    return ks_watch_next(w, 2000, ev, NULL);
}

Test(persist, watches_resume_from_the_log_and_expire_before_the_snapshot)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "apps", NULL));
    json_t *cm = kst_obj("apps", "cfg", NULL);
    set_data(cm, "1");
    json_t *c1 = kst_create(st, ty.configmaps, "apps", cm);
    uint64_t before_snapshot = kst_rv(c1);
    kc_err err = {0};
    cr_assert_eq(ks_store_persist_compact(st, &err), KC_OK, "%s", err.msg);
    uint64_t snap_rv = ks_store_rv(st);
    /* After the snapshot: a change and a delete, both in the log. */
    json_t *upd = json_deep_copy(c1);
    set_data(upd, "2");
    cr_assert_eq(ks_update(st, ty.configmaps, "apps", upd, KS_WRITE_MAIN, NULL, NULL), KC_OK);
    kst_create_free(st, ty.configmaps, "apps", kst_obj("apps", "tmp", NULL));
    cr_assert_eq(ks_delete(st, ty.configmaps, "apps", "tmp", NULL, NULL, NULL), KC_OK);
    uint64_t rv = ks_store_rv(st);

    copy_state();
    ks_persist_info info;
    ks_store *s2 = open_store(copy, &info);
    cr_assert_eq(info.snapshot_rv, snap_rv);
    cr_assert_eq(info.log_records, 3);
    const ks_rtype *cmt = ks_store_type(s2, "", "v1", "configmaps");
    /* From the snapshot's resourceVersion: the three events of the log, as they happened. */
    ks_watch *w = NULL;
    ks_watch_opts o = {.rtype = cmt, .ns = "apps", .from_rv = snap_rv};
    cr_assert_eq(ks_watch_open(s2, &o, &w, &err), KC_OK, "%s", err.msg);
    ks_event ev;
    const ks_event_type want[] = {KS_MODIFIED, KS_ADDED, KS_DELETED};
    const char *names[] = {"cfg", "tmp", "tmp"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(next_event(w, &ev), 1, "event %d", i);
        cr_assert_eq(ev.type, want[i], "event %d type %d", i, ev.type);
        cr_assert_str_eq(kst_meta(ev.object, "name"), names[i]);
        cr_assert_eq(ev.rv, snap_rv + 1 + (uint64_t)i);
        cr_assert_eq(kst_rv(ev.object), ev.rv);
        json_decref(ev.object);
    }
    /* A write after the restart reaches it too, with the next resourceVersion. */
    kst_create_free(s2, cmt, "apps", kst_obj("apps", "after", NULL));
    cr_assert_eq(next_event(w, &ev), 1);
    cr_assert_eq(ev.type, KS_ADDED);
    cr_assert_eq(ev.rv, rv + 1);
    json_decref(ev.object);
    ks_watch_close(w);
    /* From before the snapshot: compacted away, 410 as the API server answers. */
    o.from_rv = before_snapshot - 1;
    w = NULL;
    cr_assert_eq(ks_watch_open(s2, &o, &w, &err), KC_EEXPIRED);
    cr_assert_null(w);
    cr_assert_eq(err.http_status, 410);
    ks_store_free(s2);
    json_decref(c1);
}

Test(persist, a_torn_last_record_is_dropped)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "apps", NULL));
    kst_create_free(st, ty.configmaps, "apps", kst_obj("apps", "kept", NULL));
    uint64_t rv = ks_store_rv(st);
    copy_state();
    char path[128];
    snprintf(path, sizeof(path), "%s/store.log", copy);
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs("{\"rv\":999,\"e\":\"A\",\"g\":\"\",\"r\":\"configmaps\",\"c\":true,\"s\":\"apps\",\"n",
          f);
    fclose(f);
    ks_store *s2 = open_store(copy, NULL);
    cr_assert_eq(ks_store_rv(s2), rv);
    const ks_rtype *cmt = ks_store_type(s2, "", "v1", "configmaps");
    json_t *k = get(s2, cmt, "apps", "kept");
    cr_assert_not_null(k);
    /* The next record starts on a line of its own, and a third start reads both. */
    kst_create_free(s2, cmt, "apps", kst_obj("apps", "next", NULL));
    ks_store_free(s2);
    ks_store *s3 = open_store(copy, NULL);
    cr_assert_eq(ks_store_rv(s3), rv + 1);
    json_t *n = get(s3, ks_store_type(s3, "", "v1", "configmaps"), "apps", "next");
    cr_assert_not_null(n);
    ks_store_free(s3);
    json_decref(n);
    json_decref(k);
}

Test(persist, a_clean_restart_keeps_everything_and_a_fresh_dir_starts_empty)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "apps", NULL));
    uint64_t rv = ks_store_rv(st);
    ks_store_free(st);
    st = open_store(dir, NULL);
    cr_assert_eq(ks_store_rv(st), rv);
    json_t *ns = get(st, ty.namespaces, NULL, "apps");
    cr_assert_not_null(ns);
    json_decref(ns);
    /* A new directory: the store as created (its four namespaces), and the state is written. */
    ks_persist_info info;
    cr_assert_eq(mkdir(copy, 0700), 0);
    ks_store *s2 = open_store(copy, &info);
    cr_assert_not(info.restored);
    cr_assert_eq(info.objects, 4);
    ks_store_free(s2);
}
