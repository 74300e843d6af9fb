/* Tests for ks_list: namespace/name order, label and field selectors (including the name and
 * node fast paths), limit with continue tokens, and expired or malformed tokens. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

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

TestSuite(list, .init = setup, .fini = teardown);

Test(list, list_order_and_selectors)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "a", NULL));
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "a-b", NULL));
    const char *names[][2] = {{"a-b", "x"}, {"a", "z"}, {"default", "m"}, {"a", "y"}};
    for (size_t i = 0; i < 4; i++) {
        json_t *p = kst_pod(NULL, names[i][1], i % 2 ? "n1" : "n2");
        kst_set_label(p, "app", i < 2 ? "web" : "db");
        kst_create_free(st, ty.pods, names[i][0], p);
    }
    json_t *items = NULL;
    uint64_t rv = 0;
    cr_assert_eq(ks_list(st, ty.pods, NULL, NULL, &items, &rv, NULL, NULL), KC_OK);
    cr_assert_eq(rv, ks_store_rv(st));
    const char *want[][2] = {{"a", "y"}, {"a", "z"}, {"a-b", "x"}, {"default", "m"}};
    cr_assert_eq(json_array_size(items), 4);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(kst_meta(json_array_get(items, i), "namespace"), want[i][0]);
        cr_assert_str_eq(kst_meta(json_array_get(items, i), "name"), want[i][1]);
    }
    json_decref(items);
    cr_assert_eq(ks_list(st, ty.pods, "a", NULL, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 2);
    json_decref(items);
    kc_label_selector *ls = NULL;
    cr_assert_eq(kc_label_selector_parse("app in (web)", &ls, NULL), KC_OK);
    kc_field_selector *fs = NULL;
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=n1", &fs, NULL), KC_OK);
    ks_list_opts o = {.labels = ls};
    cr_assert_eq(ks_list(st, ty.pods, NULL, &o, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 2);
    json_decref(items);
    o.fields = fs;
    cr_assert_eq(ks_list(st, ty.pods, NULL, &o, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 1);
    cr_assert_str_eq(kst_meta(json_array_get(items, 0), "name"), "z");
    json_decref(items);
    kc_field_selector *byname = NULL;
    cr_assert_eq(
        kc_field_selector_parse("metadata.name=m,metadata.namespace=default", &byname, NULL),
        KC_OK);
    ks_list_opts o2 = {.fields = byname};
    cr_assert_eq(ks_list(st, ty.pods, NULL, &o2, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 1);
    json_decref(items);
    cr_assert_eq(ks_list(st, ty.pods, "a", &o2, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 0, "two different namespaces select nothing");
    json_decref(items);
    kc_label_selector_free(ls);
    kc_field_selector_free(fs);
    kc_field_selector_free(byname);
}

Test(list, list_pages_with_continue)
{
    char name[16];
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof(name), "c%02d", i);
        kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, name, NULL));
    }
    uint64_t first_rv = 0;
    char *tok = NULL;
    int seen = 0, pages = 0;
    do {
        ks_list_opts o = {.limit = 10, .continue_token = tok};
        json_t *items = NULL;
        char *next = NULL;
        uint64_t rv = 0;
        cr_assert_eq(ks_list(st, ty.configmaps, "default", &o, &items, &rv, &next, NULL), KC_OK);
        if (pages == 0) {
            first_rv = rv;
            /* A write between pages does not change the list's RV. */
            kst_create_free(st, ty.configmaps, "kube-system", kst_obj(NULL, "other", NULL));
        } else {
            cr_assert_eq(rv, first_rv, "every page reports the first page's RV");
        }
        for (size_t i = 0; i < json_array_size(items); i++) {
            snprintf(name, sizeof(name), "c%02d", seen++);
            cr_assert_str_eq(kst_meta(json_array_get(items, i), "name"), name);
        }
        json_decref(items);
        free(tok);
        tok = next;
        pages++;
    } while (tok);
    cr_assert_eq(seen, 25);
    cr_assert_eq(pages, 3);
    /* Exactly limit items: no continue token for an empty page. */
    ks_list_opts exact = {.limit = 25};
    json_t *items = NULL;
    char *next = NULL;
    cr_assert_eq(ks_list(st, ty.configmaps, "default", &exact, &items, NULL, &next, NULL), KC_OK);
    cr_assert_null(next);
    json_decref(items);
}

Test(list, continue_token_errors)
{
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, name, NULL));
    }
    ks_list_opts o = {.limit = 1};
    json_t *items = NULL;
    char *next = NULL;
    cr_assert_eq(ks_list(st, ty.configmaps, NULL, &o, &items, NULL, &next, NULL), KC_OK);
    cr_assert_not_null(next);
    json_decref(items);
    kc_err err;
    ks_list_opts bad = {.limit = 1, .continue_token = "%%%"};
    cr_assert_eq(ks_list(st, ty.configmaps, NULL, &bad, &items, NULL, NULL, &err), KC_EBADREQUEST);
    cr_assert_null(items);
    cr_assert(strstr(err.msg, "continue key is not valid") != NULL, "%s", err.msg);
    bad.continue_token = "e30="; /* {} */
    cr_assert_eq(ks_list(st, ty.configmaps, NULL, &bad, &items, NULL, NULL, &err), KC_EBADREQUEST);
    /* Still served while the history holds every write since the token's RV. */
    o.continue_token = next;
    cr_assert_eq(ks_list(st, ty.configmaps, NULL, &o, &items, NULL, NULL, &err), KC_OK);
    json_decref(items);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "after", NULL));
    ks_store_compact(st);
    o.continue_token = next;
    cr_assert_eq(ks_list(st, ty.configmaps, NULL, &o, &items, NULL, NULL, &err), KC_EEXPIRED);
    cr_assert_eq(err.http_status, 410);
    cr_assert(strncmp(err.msg,
                      "The provided continue parameter is too old to display a consistent list "
                      "result.",
                      77) == 0,
              "%s", err.msg);
    free(next);
}

Test(list, node_index_pages_in_order)
{
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "p%02d", (i * 7) % 40);
        kst_create_free(st, ty.pods, i % 2 ? "kube-system" : "default",
                        kst_pod(NULL, name, i % 4 == 3 ? "n2" : "n1"));
    }
    kc_field_selector *fs = NULL;
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=n1", &fs, NULL), KC_OK);
    char *tok = NULL;
    char prev[64] = "";
    size_t seen = 0;
    do {
        ks_list_opts o = {.fields = fs, .limit = 7, .continue_token = tok};
        json_t *items = NULL;
        char *next = NULL;
        cr_assert_eq(ks_list(st, ty.pods, NULL, &o, &items, NULL, &next, NULL), KC_OK);
        for (size_t i = 0; i < json_array_size(items); i++) {
            json_t *p = json_array_get(items, i);
            char key[64];
            snprintf(key, sizeof(key), "%s/%s", kst_meta(p, "namespace"), kst_meta(p, "name"));
            cr_assert_gt(strcmp(key, prev), 0, "%s after %s", key, prev);
            snprintf(prev, sizeof(prev), "%s", key);
            cr_assert_str_eq(
                json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")), "n1");
            seen++;
        }
        json_decref(items);
        free(tok);
        tok = next;
    } while (tok);
    cr_assert_eq(seen, 30);
    json_t *items = NULL;
    ks_list_opts in_ns = {.fields = fs};
    cr_assert_eq(ks_list(st, ty.pods, "kube-system", &in_ns, &items, NULL, NULL, NULL), KC_OK);
    cr_assert_eq(json_array_size(items), 10, "odd i in kube-system, of which 10 on n1");
    json_decref(items);
    kc_field_selector_free(fs);
}

Test(list, unserved_type)
{
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w", NULL));
    ks_store_unregister(st, ty.widgets);
    json_t *items = NULL;
    kc_err err;
    cr_assert_eq(ks_list(st, ty.widgets, NULL, NULL, &items, NULL, NULL, &err), KC_ENOTFOUND);
    cr_assert_null(items);
    cr_assert_eq(ks_count(st, ty.widgets), 0);
}
