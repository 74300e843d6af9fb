/* Tests for kc_jsonpatch: RFC 6901 pointers and RFC 6902 operations, atomicity, error codes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_patch.h"

static json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
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

static void ok(const char *doc, const char *ops, const char *want)
{
    json_t *d = J(doc), *o = J(ops), *before = json_deep_copy(d), *out = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_json_patch_apply(d, o, &out, &e);
    cr_assert_eq(rc, KC_OK, "patch %s failed: %s", ops, e.msg);
    assert_json_eq(out, want);
    cr_assert(json_equal(d, before), "input document modified");
    json_decref(out);
    json_decref(before);
    json_decref(d);
    json_decref(o);
}

static void fails(const char *doc, const char *ops, kc_code code, const char *msg)
{
    json_t *d = J(doc), *o = J(ops), *before = json_deep_copy(d), *out = (json_t *)0x1;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_json_patch_apply(d, o, &out, &e);
    cr_assert_eq(rc, code, "patch %s: rc %d (%s)", ops, rc, e.msg);
    cr_assert_eq(e.code, code);
    cr_assert_null(out);
    cr_assert(json_equal(d, before), "input document modified on failure");
    cr_assert(strstr(e.msg, msg), "message \"%s\" lacks \"%s\"", e.msg, msg);
    json_decref(before);
    json_decref(d);
    json_decref(o);
}

Test(jsonpatch, add)
{
    ok("{'foo':'bar'}", "[{'op':'add','path':'/baz','value':'qux'}]", "{'foo':'bar','baz':'qux'}");
    ok("{'foo':['bar','baz']}", "[{'op':'add','path':'/foo/1','value':'qux'}]",
       "{'foo':['bar','qux','baz']}");
    ok("{'foo':[1]}", "[{'op':'add','path':'/foo/-','value':2}]", "{'foo':[1,2]}");
    ok("{'foo':[1]}", "[{'op':'add','path':'/foo/1','value':2}]", "{'foo':[1,2]}");
    ok("{'foo':'bar'}", "[{'op':'add','path':'/foo','value':{'x':null}}]", "{'foo':{'x':null}}");
    ok("{'a':1}", "[{'op':'add','path':'','value':[1]}]", "[1]");
    ok("{}", "[{'op':'add','path':'/','value':1}]", "{'':1}");
    fails("{'foo':[1]}", "[{'op':'add','path':'/foo/2','value':2}]", KC_EINVALID,
          "operation 0 (add) path \"/foo/2\": index 2 is out of range for the array at \"/foo\"");
    fails("{'a':1}", "[{'op':'add','path':'/x/y','value':2}]", KC_EINVALID,
          "no member \"x\" in the object at \"\"");
    fails("{'a':1}", "[{'op':'add','path':'/a/y','value':2}]", KC_EINVALID,
          "\"/a\" is not an object or array");
}

Test(jsonpatch, remove_and_replace)
{
    ok("{'baz':'qux','foo':'bar'}", "[{'op':'remove','path':'/baz'}]", "{'foo':'bar'}");
    ok("{'foo':['bar','qux','baz']}", "[{'op':'remove','path':'/foo/1'}]", "{'foo':['bar','baz']}");
    ok("{'baz':'qux','foo':'bar'}", "[{'op':'replace','path':'/baz','value':'boo'}]",
       "{'baz':'boo','foo':'bar'}");
    ok("{'l':[1,2]}", "[{'op':'replace','path':'/l/0','value':9}]", "{'l':[9,2]}");
    ok("{'a':1}", "[{'op':'replace','path':'','value':'s'}]", "'s'");
    fails("{'spec':{}}",
          "[{'op':'remove','path':'/spec'},{'op':'replace','path':'/spec/x','value':1}]",
          KC_EINVALID, "operation 1 (replace) path \"/spec/x\": no member \"spec\"");
    fails("{'spec':{}}", "[{'op':'replace','path':'/spec/x','value':1}]", KC_EINVALID,
          "operation 0 (replace) path \"/spec/x\": no member \"x\" in the object at \"/spec\"");
    fails("{'l':[1]}", "[{'op':'replace','path':'/l/-','value':1}]", KC_EINVALID,
          "index \"-\" (past the end) can only be used to add");
    fails("{'l':[1]}", "[{'op':'remove','path':'/l/1'}]", KC_EINVALID, "out of range");
    fails("{'a':1}", "[{'op':'remove','path':''}]", KC_EINVALID, "cannot remove the whole");
}

Test(jsonpatch, move_and_copy)
{
    ok("{'foo':{'bar':'baz','waldo':'fred'},'qux':{'corge':'grault'}}",
       "[{'op':'move','from':'/foo/waldo','path':'/qux/thud'}]",
       "{'foo':{'bar':'baz'},'qux':{'corge':'grault','thud':'fred'}}");
    ok("{'foo':['all','grass','cows','eat']}", "[{'op':'move','from':'/foo/1','path':'/foo/3'}]",
       "{'foo':['all','cows','eat','grass']}");
    ok("{'a':{'b':1}}", "[{'op':'move','from':'/a','path':'/a'}]", "{'a':{'b':1}}");
    ok("{'a':{'b':[1]}}", "[{'op':'copy','from':'/a/b','path':'/c'}]", "{'a':{'b':[1]},'c':[1]}");
    fails("{'a':{'b':1}}", "[{'op':'move','from':'/a','path':'/a/b/c'}]", KC_EINVALID,
          "cannot move \"/a\" into one of its own children");
    fails("{'a':1}", "[{'op':'copy','from':'/nope','path':'/b'}]", KC_EINVALID,
          "from \"/nope\": no member \"nope\"");
    fails("{'a':1}", "[{'op':'move','path':'/b'}]", KC_EPARSE, "missing \"from\"");
    /* A copy is independent of its source: later operations on one leave the other alone. */
    ok("{'a':{'x':1}}",
       "[{'op':'copy','from':'/a','path':'/b'},{'op':'replace','path':'/b/x','value':2}]",
       "{'a':{'x':1},'b':{'x':2}}");
}

Test(jsonpatch, test_op)
{
    ok("{'baz':'qux','foo':['a',2,'c']}",
       "[{'op':'test','path':'/baz','value':'qux'},{'op':'test','path':'/foo/1','value':2}]",
       "{'baz':'qux','foo':['a',2,'c']}");
    ok("{'n':1}", "[{'op':'test','path':'/n','value':1.0}]", "{'n':1}");
    fails("{'baz':'qux'}", "[{'op':'test','path':'/baz','value':'bar'}]", KC_EPATCHTEST,
          "operation 0 (test) path \"/baz\": value is \"qux\", expected \"bar\"");
    fails("{'a':1}", "[{'op':'test','path':'/b','value':1}]", KC_EPATCHTEST, "no member \"b\"");
    fails("{'a':1}", "[{'op':'test','path':'/a'}]", KC_EPARSE, "missing \"value\"");
    /* null is a value to compare, not an absent one. */
    fails("{'a':1}", "[{'op':'test','path':'/a','value':null}]", KC_EPATCHTEST, "expected null");
}

/* A patch of n operations copying the whole document to /a0, /a1, ...: it doubles each time. */
static void doubling_ops(char *buf, int n)
{
    strcpy(buf, "[");
    for (int i = 0; i < n; i++)
        sprintf(buf + strlen(buf), "%s{'op':'copy','from':'','path':'/a%d'}", i ? "," : "", i);
    strcat(buf, "]");
}

Test(jsonpatch, copy_bomb_is_refused)
{
    char ops[4096];
    doubling_ops(ops, 40);
    fails("{'x':[1,2,3]}", ops, KC_EINVALID,
          "copy operations would create more than 1000000 values in all");
    /* Ten doublings are fine. */
    doubling_ops(ops, 10);
    json_t *d = J("{'x':1}"), *o = J(ops), *out = NULL, *v = NULL;
    cr_assert_eq(kc_json_patch_apply(d, o, &out, NULL), KC_OK);
    cr_assert_eq(kc_json_pointer_resolve(out, "/a9/a8/a0/x", &v, NULL), KC_OK);
    cr_assert_eq(json_integer_value(v), 1);
    json_decref(out);
    json_decref(d);
    json_decref(o);
}

Test(jsonpatch, atomic_on_failure)
{
    /* The first two operations succeed on the working copy; the third fails; nothing changes. */
    fails("{'a':1,'l':[1]}",
          "[{'op':'add','path':'/b','value':2},{'op':'remove','path':'/a'},"
          "{'op':'test','path':'/l/0','value':5}]",
          KC_EPATCHTEST, "operation 2 (test)");
}

Test(jsonpatch, pointer_escapes_and_index_rules)
{
    ok("{'a/b':1,'m~n':2}",
       "[{'op':'replace','path':'/a~1b','value':10},{'op':'replace','path':'/m~0n','value':20}]",
       "{'a/b':10,'m~n':20}");
    ok("{'~1':1}", "[{'op':'remove','path':'/~01'}]", "{}");
    fails("{'l':[1,2]}", "[{'op':'replace','path':'/l/01','value':0}]", KC_EINVALID,
          "\"01\" is not a valid array index (leading zero)");
    fails("{'l':[1,2]}", "[{'op':'replace','path':'/l/x','value':0}]", KC_EINVALID,
          "\"x\" is not a valid array index");
    fails("{'l':[1,2]}", "[{'op':'replace','path':'/l/+1','value':0}]", KC_EINVALID,
          "not a valid array index");
    fails("{'l':[1]}", "[{'op':'add','path':'/l/99999999999999999999999','value':0}]", KC_EINVALID,
          "out of range");
    fails("{'a':1}", "[{'op':'add','path':'/a~2','value':0}]", KC_EPARSE,
          "\"~\" must be followed by 0 or 1");
    fails("{'a':1}", "[{'op':'add','path':'a','value':0}]", KC_EPARSE,
          "operation 0 (add) path \"a\": a pointer must be empty or start with \"/\"");
    /* Object keys that look like indexes are plain keys. */
    ok("{'0':{'01':1}}", "[{'op':'replace','path':'/0/01','value':2}]", "{'0':{'01':2}}");
}

Test(jsonpatch, malformed_operations)
{
    fails("{}", "{'op':'add'}", KC_EPARSE, "a JSON patch must be an array");
    fails("{}", "[1]", KC_EPARSE, "operation 0: must be an object");
    fails("{}", "[{'path':'/a'}]", KC_EPARSE, "operation 0: missing \"op\"");
    fails("{}", "[{'op':'add','path':'/a','value':1},{'op':'frob','path':'/a'}]", KC_EPARSE,
          "operation 1 (frob) path \"/a\": unknown operation");
    fails("{}", "[{'op':'add','value':1}]", KC_EPARSE, "missing \"path\"");
    fails("{}", "[{'op':'add','path':5,'value':1}]", KC_EPARSE, "\"path\" must be a string");
    fails("{}", "[{'op':'add','path':'/a\\u0000b','value':1}]", KC_EPARSE, "NUL byte");
    fails("{}", "[{'op':'add','path':'/a'}]", KC_EPARSE, "missing \"value\"");
    /* An empty patch is a no-op. */
    ok("{'a':1}", "[]", "{'a':1}");
}

Test(jsonpatch, bad_arguments)
{
    json_t *out;
    kc_err e = {0};
    json_t *ops = J("[]");
    cr_assert_eq(kc_json_patch_apply(NULL, ops, &out, &e), KC_EARG);
    cr_assert_eq(kc_json_patch_apply(ops, ops, NULL, &e), KC_EARG);
    /* Errors are still reported with a NULL err. */
    json_t *bad = J("[{'op':'remove','path':'/x'}]");
    cr_assert_eq(kc_json_patch_apply(ops, bad, &out, NULL), KC_EINVALID);
    json_decref(bad);
    json_decref(ops);
}

Test(jsonpatch, pointer_helpers)
{
    json_t *doc = J("{'spec':{'containers':[{'name':'a'},{'name':'b'}]},'a/b':{'~':1}}");
    json_t *v = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_json_pointer_resolve(doc, "/spec/containers/1/name", &v, &e), KC_OK);
    cr_assert_str_eq(json_string_value(v), "b");
    cr_assert_eq(kc_json_pointer_resolve(doc, "", &v, &e), KC_OK);
    cr_assert_eq(v, doc);
    cr_assert_eq(kc_json_pointer_resolve(doc, "/a~1b/~0", &v, &e), KC_OK);
    cr_assert_eq(json_integer_value(v), 1);
    cr_assert_eq(kc_json_pointer_resolve(doc, "/spec/containers/2", &v, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "pointer \"/spec/containers/2\": index 2 is out of range for the "
                            "array at \"/spec/containers\" (size 2)");
    cr_assert_eq(kc_json_pointer_resolve(doc, "/spec/containers/0/name/x", &v, NULL), KC_EINVALID);

    cr_assert_eq(kc_json_pointer_set(&doc, "/spec/replicas", json_integer(3), &e), KC_OK);
    cr_assert_eq(
        kc_json_pointer_set(&doc, "/spec/containers/0", json_pack("{s:s}", "name", "z"), &e),
        KC_OK);
    cr_assert_eq(kc_json_pointer_set(&doc, "/missing/x", json_integer(1), &e), KC_EINVALID);
    cr_assert_eq(kc_json_pointer_replace(&doc, "/spec/nope", json_integer(1), &e), KC_EINVALID);
    cr_assert_eq(kc_json_pointer_replace(&doc, "/spec/replicas", json_integer(4), &e), KC_OK);
    json_t *removed = NULL;
    cr_assert_eq(kc_json_pointer_remove(doc, "/a~1b", &removed, &e), KC_OK);
    assert_json_eq(removed, "{'~':1}");
    json_decref(removed);
    cr_assert_eq(kc_json_pointer_remove(doc, "/a~1b", &removed, &e), KC_EINVALID);
    cr_assert_null(removed);
    assert_json_eq(doc, "{'spec':{'containers':[{'name':'z'},{'name':'a'},{'name':'b'}],"
                        "'replicas':4}}");
    /* "" replaces the whole document. */
    cr_assert_eq(kc_json_pointer_set(&doc, "", json_string("new"), &e), KC_OK);
    cr_assert_str_eq(json_string_value(doc), "new");
    json_decref(doc);

    char *p = kc_json_pointer_append("/metadata/labels", "app.kubernetes.io/name~x");
    cr_assert_str_eq(p, "/metadata/labels/app.kubernetes.io~1name~0x");
    free(p);
    p = kc_json_pointer_append(NULL, "");
    cr_assert_str_eq(p, "/");
    free(p);
}
