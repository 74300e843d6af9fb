/* Tests for kc_mergepatch: RFC 7386 apply (including the RFC's examples), create, round trips. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_patch.h"

/* Parses JSON written with single quotes for readability. */
static json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    cr_assert_not_null(v, "bad test JSON %s: %s", text, e.text);
    free(s);
    return v;
}

static void assert_json_eq(json_t *got, const char *want)
{
    json_t *w = J(want);
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    cr_assert(json_equal(got, w), "got %s, want %s", g, want);
    free(g);
    json_decref(w);
}

static void check_apply(const char *target, const char *patch, const char *want)
{
    json_t *t = J(target), *p = J(patch);
    json_t *before = json_deep_copy(t);
    json_t *r = kc_merge_patch_apply(t, p);
    cr_assert_not_null(r);
    assert_json_eq(r, want);
    cr_assert(json_equal(t, before), "target was modified");
    json_decref(r);
    json_decref(before);
    json_decref(t);
    json_decref(p);
}

/* The test cases of RFC 7386 appendix A. */
Test(mergepatch, rfc7386_examples)
{
    check_apply("{'a':'b'}", "{'a':'c'}", "{'a':'c'}");
    check_apply("{'a':'b'}", "{'b':'c'}", "{'a':'b','b':'c'}");
    check_apply("{'a':'b'}", "{'a':null}", "{}");
    check_apply("{'a':'b','b':'c'}", "{'a':null}", "{'b':'c'}");
    check_apply("{'a':['b']}", "{'a':'c'}", "{'a':'c'}");
    check_apply("{'a':'c'}", "{'a':['b']}", "{'a':['b']}");
    check_apply("{'a':{'b':'c'}}", "{'a':{'b':'d','c':null}}", "{'a':{'b':'d'}}");
    check_apply("{'a':[{'b':'c'}]}", "{'a':[1]}", "{'a':[1]}");
    check_apply("['a','b']", "['c','d']", "['c','d']");
    check_apply("{'a':'b'}", "['c']", "['c']");
    check_apply("{'a':'foo'}", "null", "null");
    check_apply("{'a':'foo'}", "'bar'", "'bar'");
    check_apply("{'e':null}", "{'a':1}", "{'e':null,'a':1}");
    check_apply("[1,2]", "{'a':'b','c':null}", "{'a':'b'}");
    check_apply("{}", "{'a':{'bb':{'ccc':null}}}", "{'a':{'bb':{}}}");
}

Test(mergepatch, null_target_and_patch)
{
    json_t *p = J("{'a':{'b':null,'c':1}}");
    json_t *r = kc_merge_patch_apply(NULL, p);
    assert_json_eq(r, "{'a':{'c':1}}");
    json_decref(r);
    json_decref(p);
    json_t *t = J("{'a':1}");
    r = kc_merge_patch_apply(t, NULL);
    cr_assert(json_is_null(r));
    json_decref(r);
    json_decref(t);
}

Test(mergepatch, result_shares_nothing_with_inputs)
{
    json_t *t = J("{'keep':{'x':1}}"), *p = J("{'new':{'y':2}}");
    json_t *r = kc_merge_patch_apply(t, p);
    json_object_set_new(json_object_get(r, "keep"), "x", json_integer(9));
    json_object_set_new(json_object_get(r, "new"), "y", json_integer(9));
    assert_json_eq(t, "{'keep':{'x':1}}");
    assert_json_eq(p, "{'new':{'y':2}}");
    json_decref(r);
    json_decref(t);
    json_decref(p);
}

static void check_create(const char *orig, const char *mod, const char *want)
{
    json_t *o = J(orig), *m = J(mod);
    json_t *p = kc_merge_patch_create(o, m);
    cr_assert_not_null(p);
    assert_json_eq(p, want);
    json_t *back = kc_merge_patch_apply(o, p);
    cr_assert(json_equal(back, m), "round trip of %s -> %s failed", orig, mod);
    json_decref(back);
    json_decref(p);
    json_decref(o);
    json_decref(m);
}

Test(mergepatch, create_is_minimal)
{
    check_create("{'a':1,'b':2}", "{'a':1,'b':2}", "{}");
    check_create("{'a':1,'b':2}", "{'a':1}", "{'b':null}");
    check_create("{'a':1}", "{'a':1,'c':{'d':[1]}}", "{'c':{'d':[1]}}");
    check_create("{'m':{'x':1,'y':2,'z':{'q':1}}}", "{'m':{'x':1,'y':3,'z':{'q':1}}}",
                 "{'m':{'y':3}}");
    /* Arrays are replaced whole. */
    check_create("{'l':[1,2,3]}", "{'l':[1,2]}", "{'l':[1,2]}");
    check_create("{'l':[1]}", "{'l':{'a':1}}", "{'l':{'a':1}}");
    check_create("{'o':{'a':1}}", "{'o':'s'}", "{'o':'s'}");
    /* Non-object documents: the patch is the new document. */
    check_create("[1]", "[2]", "[2]");
    check_create("{'a':1}", "3", "3");
    /* Equal numbers of different types need no patch. */
    json_t *o = J("{'n':1}"), *m = J("{'n':1.0}");
    json_t *p = kc_merge_patch_create(o, m);
    assert_json_eq(p, "{}");
    json_decref(p);
    json_decref(o);
    json_decref(m);
}

/* A tiny deterministic generator of null-free JSON values for the round-trip property. */
static unsigned rng = 12345;
static unsigned next_rand(void)
{
    rng = rng * 1103515245u + 12345u;
    return (rng >> 16) & 0x7fff;
}

static json_t *gen(int depth)
{
    unsigned r = next_rand() % (depth > 3 ? 3 : 6);
    static const char *const keys[] = {"a", "b", "c", "d"};
    switch (r) {
    case 0:
        return json_integer(next_rand() % 4);
    case 1:
        return json_string(keys[next_rand() % 4]);
    case 2:
        return json_boolean(next_rand() % 2);
    case 3: {
        json_t *a = json_array();
        for (unsigned i = next_rand() % 3; i > 0; i--)
            json_array_append_new(a, gen(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (unsigned i = next_rand() % 4; i > 0; i--)
            json_object_set_new(o, keys[next_rand() % 4], gen(depth + 1));
        return o;
    }
    }
}

Test(mergepatch, round_trip_property)
{
    for (int i = 0; i < 2000; i++) {
        json_t *o = gen(0), *m = gen(0);
        json_t *p = kc_merge_patch_create(o, m);
        json_t *back = kc_merge_patch_apply(o, p);
        char *os = json_dumps(o, JSON_ENCODE_ANY | JSON_COMPACT);
        char *ms = json_dumps(m, JSON_ENCODE_ANY | JSON_COMPACT);
        cr_assert(kc_json_equal(back, m), "case %d: %s -> %s", i, os, ms);
        /* A patch between equal objects is empty. */
        json_t *same = kc_merge_patch_create(m, m);
        if (json_is_object(m))
            cr_assert_eq(json_object_size(same), 0);
        free(os);
        free(ms);
        json_decref(same);
        json_decref(back);
        json_decref(p);
        json_decref(o);
        json_decref(m);
    }
}

Test(mergepatch, json_equal_compares_numbers_by_value)
{
    json_t *a = J("{'x':[1,2.5,{'y':3}]}"), *b = J("{'x':[1.0,2.5,{'y':3.0}]}");
    cr_assert(kc_json_equal(a, b));
    json_t *c = J("{'x':[1,2.5,{'y':3.5}]}");
    cr_assert_not(kc_json_equal(a, c));
    json_t *big = json_integer(9007199254740993LL), *bigr = json_real(9007199254740992.0);
    cr_assert_not(kc_json_equal(big, bigr));
    json_t *maxi = json_integer(INT64_MAX), *huge = json_real(9.3e18);
    cr_assert_not(kc_json_equal(maxi, huge));
    cr_assert(kc_json_equal(NULL, NULL));
    cr_assert_not(kc_json_equal(a, NULL));
    json_t *s1 = J("'x'"), *n1 = J("1");
    cr_assert_not(kc_json_equal(s1, n1));
    json_decref(s1);
    json_decref(n1);
    json_decref(maxi);
    json_decref(huge);
    json_decref(big);
    json_decref(bigr);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}
