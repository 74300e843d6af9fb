/* Tests that consecutive versions of an object share what did not change (so the watch history
 * costs only the changes, and freeing a large store is quick), without any version ever seeing
 * another's changes. Reads the history ring through ks_store_int.h. */
#include "ks_store_int.h"
#include "ks_store_test.h"

static ks_store *st;
static kst_types ty;

static void setup(void)
{
    st = ks_store_new(1000);
    cr_assert_not_null(st);
    kst_register_all(st, &ty);
}

static void teardown(void)
{
    ks_store_free(st);
    st = NULL;
}

TestSuite(share, .init = setup, .fini = teardown);

/* The history entry i events back from the newest. */
static ks_hist *hist_back(size_t i)
{
    cr_assert_lt(i, st->hlen);
    return &st->hist[(st->hhead + st->hlen - 1 - i) % st->hcap];
}

static kc_code set_status(void *ud, json_t *obj, kc_err *err)
{
    json_object_set_new(obj, "status",
                        json_pack("{s:s, s:[{s:s, s:s}]}", "phase", (char *)ud, "conditions",
                                  "type", "Ready", "status", "True"));
    return KC_OK;
}

static kc_code relabel(void *ud, json_t *obj, kc_err *err)
{
    kst_set_label(obj, "tier", ud);
    return KC_OK;
}

Test(share, status_write_shares_spec_and_metadata_parts)
{
    json_t *pod = kst_pod("default", "p", "n1");
    kst_set_label(pod, "app", "web");
    kst_create_free(st, ty.pods, "default", pod);
    kc_err err = {0};
    cr_assert_eq(
        ks_mutate(st, ty.pods, "default", "p", KS_WRITE_STATUS, set_status, "Running", NULL, &err),
        KC_OK, "%s", err.msg);
    ks_hist *added = hist_back(1), *mod = hist_back(0);
    cr_assert_eq(added->type, KS_ADDED);
    cr_assert_eq(mod->type, KS_MODIFIED);
    cr_assert_eq(mod->old, added->obj, "the event's old state is the previous version");
    /* The spec and the labels are the previous version's values, not copies. */
    cr_assert_eq(json_object_get(mod->obj, "spec"), json_object_get(added->obj, "spec"));
    json_t *om = json_object_get(added->obj, "metadata"),
           *nm = json_object_get(mod->obj, "metadata");
    cr_assert_neq(om, nm, "metadata changed (resourceVersion)");
    cr_assert_eq(json_object_get(nm, "labels"), json_object_get(om, "labels"));
    cr_assert_eq(json_object_get(nm, "uid"), json_object_get(om, "uid"));
    /* Each version keeps its own resourceVersion and status. */
    cr_assert_str_neq(kst_meta(mod->obj, "resourceVersion"),
                      kst_meta(added->obj, "resourceVersion"));
    cr_assert_null(json_object_get(json_object_get(added->obj, "status"), "phase"));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(mod->obj, "status"), "phase")),
        "Running");
    /* A second status write shares the unchanged condition entry of the first. */
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_STATUS, set_status, "Succeeded",
                           NULL, &err),
                 KC_OK, "%s", err.msg);
    ks_hist *mod2 = hist_back(0);
    json_t *c1 = json_object_get(json_object_get(mod->obj, "status"), "conditions");
    json_t *c2 = json_object_get(json_object_get(mod2->obj, "status"), "conditions");
    cr_assert_eq(c1, c2, "an equal conditions array is shared whole");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(mod->obj, "status"), "phase")), "Running",
        "the older version is untouched");
}

Test(share, label_change_shares_spec_not_labels)
{
    json_t *pod = kst_pod("default", "p", "n1");
    kst_set_label(pod, "tier", "a");
    kst_create_free(st, ty.pods, "default", pod);
    kc_err err = {0};
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, relabel, "b", NULL, &err),
                 KC_OK, "%s", err.msg);
    ks_hist *added = hist_back(1), *mod = hist_back(0);
    cr_assert_eq(json_object_get(mod->obj, "spec"), json_object_get(added->obj, "spec"));
    json_t *ol = json_object_get(json_object_get(added->obj, "metadata"), "labels");
    json_t *nl = json_object_get(json_object_get(mod->obj, "metadata"), "labels");
    cr_assert_neq(ol, nl);
    cr_assert_str_eq(json_string_value(json_object_get(ol, "tier")), "a");
    cr_assert_str_eq(json_string_value(json_object_get(nl, "tier")), "b");
    /* What readers get is a private copy: changing it changes nothing stored. */
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, ty.pods, "default", "p", &got, NULL), KC_OK);
    json_object_set_new(json_object_get(got, "spec"), "nodeName", json_string("elsewhere"));
    json_decref(got);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(added->obj, "spec"), "nodeName")), "n1");
}

Test(share, deleted_state_shares_all_but_metadata)
{
    kst_create_free(st, ty.configmaps, "default",
                    kst_obj("default", "c", json_pack("{s:s}", "k", "v")));
    json_t *last = json_incref(hist_back(0)->obj);
    json_t *out = NULL;
    kc_err err = {0};
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", NULL, &out, &err), KC_OK, "%s",
                 err.msg);
    ks_hist *del = hist_back(0);
    cr_assert_eq(del->type, KS_DELETED);
    cr_assert_eq(json_object_get(del->obj, "spec"), json_object_get(last, "spec"));
    cr_assert_neq(json_object_get(del->obj, "metadata"), json_object_get(last, "metadata"));
    /* The DELETED state carries the deletion's RV; the last stored state keeps its own. */
    cr_assert_eq(kst_rv(del->obj), ks_store_rv(st));
    cr_assert_eq(kst_rv(last), ks_store_rv(st) - 1);
    cr_assert_eq(kst_rv(out), ks_store_rv(st));
    json_decref(out);
    json_decref(last);
}

Test(share, equal_numbers_of_another_type_are_not_shared)
{
    /* 1 and 1.0 are different JSON values to jansson: a write turning one into the other is a
     * change, and the new version must keep its own representation. */
    kst_create_free(st, ty.widgets, NULL,
                    kst_obj(NULL, "w", json_pack("{s:i, s:s}", "size", 1, "mode", "a")));
    json_t *w = NULL;
    cr_assert_eq(ks_get(st, ty.widgets, NULL, "w", &w, NULL), KC_OK);
    json_object_set_new(json_object_get(w, "spec"), "size", json_real(1.0));
    json_object_set_new(json_object_get(w, "spec"), "mode", json_string("b"));
    json_t *out = NULL;
    cr_assert_eq(ks_update(st, ty.widgets, NULL, w, KS_WRITE_MAIN, &out, NULL), KC_OK);
    cr_assert(json_is_real(json_object_get(json_object_get(out, "spec"), "size")));
    cr_assert(json_is_integer(json_object_get(json_object_get(hist_back(1)->obj, "spec"), "size")));
    json_decref(out);
}

Test(share, many_versions_free_cleanly)
{
    /* A few thousand versions sharing parts: freed with the store (valgrind checks the counts). */
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof(name), "p%d", i);
        kst_create_free(st, ty.pods, "default", kst_pod("default", name, "n1"));
        for (int k = 0; k < 5; k++)
            cr_assert_eq(ks_mutate(st, ty.pods, "default", name, KS_WRITE_STATUS, set_status,
                                   k % 2 ? "Running" : "Pending", NULL, NULL),
                         KC_OK);
        ks_delete_opts now = {.grace_period_seconds = 0};
        if (i % 3 == 0)
            cr_assert_eq(ks_delete(st, ty.pods, "default", name, &now, NULL, NULL), KC_OK);
    }
    cr_assert_eq(ks_count(st, ty.pods), 200 - 67);
}

/* A mutate function that links in a value it keeps, and changes it after the write. */
static kc_code link_kept(void *ud, json_t *obj, kc_err *err)
{
    json_object_set(json_object_get(obj, "metadata"), "annotations", ud);
    return KC_OK;
}

Test(share, values_a_mutate_function_keeps_are_copied)
{
    kst_create_free(st, ty.pods, "default", kst_pod("default", "p", "n1"));
    json_t *ann = json_pack("{s:s}", "a", "1");
    kc_err err = {0};
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, link_kept, ann, NULL, &err),
                 KC_OK, "%s", err.msg);
    json_t *stored_ann =
        json_object_get(json_object_get(hist_back(0)->obj, "metadata"), "annotations");
    cr_assert_neq(stored_ann, ann, "the store holds a copy of what the function still holds");
    json_object_set_new(ann, "a", json_string("changed later"));
    json_decref(ann);
    cr_assert_str_eq(json_string_value(json_object_get(stored_ann, "a")), "1");
}

/* A status write whose function also changed the spec, the labels and added a field. */
static kc_code status_and_more(void *ud, json_t *obj, kc_err *err)
{
    json_object_set_new(json_object_get(obj, "spec"), "nodeName", json_string("elsewhere"));
    kst_set_label(obj, "tier", "z");
    json_object_set_new(obj, "extra", json_true());
    return set_status(ud, obj, err);
}

Test(share, status_write_keeps_only_the_status_of_what_the_function_changed)
{
    json_t *pod = kst_pod("default", "p", "n1");
    kst_set_label(pod, "tier", "a");
    kst_create_free(st, ty.pods, "default", pod);
    kc_err err = {0};
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_STATUS, status_and_more, "Running",
                           NULL, &err),
                 KC_OK, "%s", err.msg);
    ks_hist *added = hist_back(1), *mod = hist_back(0);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(mod->obj, "spec"), "nodeName")), "n1");
    cr_assert_eq(json_object_get(mod->obj, "spec"), json_object_get(added->obj, "spec"));
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(mod->obj, "metadata"), "labels"), "tier")),
                     "a");
    cr_assert_null(json_object_get(mod->obj, "extra"));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(mod->obj, "status"), "phase")),
        "Running");
    /* The top-level fields keep the stored order. */
    void *x = json_object_iter(added->obj), *y = json_object_iter(mod->obj);
    for (; x && y; x = json_object_iter_next(added->obj, x), y = json_object_iter_next(mod->obj, y))
        cr_assert_str_eq(json_object_iter_key(x), json_object_iter_key(y));
    cr_assert_null(x);
    cr_assert_str_eq(json_object_iter_key(y), "status", "the write added the status, last");
    cr_assert_null(json_object_iter_next(mod->obj, y), "and nothing else");
}
