/* Tests for kc_selector: label and field selector parsing, matching, errors and canonical form. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_selector.h"

static kc_label_selector *lparse(const char *s)
{
    kc_label_selector *sel = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_label_selector_parse(s, &sel, &e);
    cr_assert_eq(rc, KC_OK, "parse \"%s\": %s", s, e.msg);
    cr_assert_not_null(sel);
    return sel;
}

/* Parses s expecting failure and returns the message (static buffer). */
static const char *lparse_err(const char *s)
{
    static kc_err e;
    kc_label_selector *sel = (kc_label_selector *)0x1;
    kc_err_clear(&e);
    kc_code rc = kc_label_selector_parse(s, &sel, &e);
    cr_assert_eq(rc, KC_EPARSE, "expected \"%s\" to fail, got %d", s, rc);
    cr_assert_null(sel);
    cr_assert_eq(e.code, KC_EPARSE);
    return e.msg;
}

static json_t *J(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    cr_assert_not_null(j, "bad test JSON: %s", je.text);
    return j;
}

static bool lmatch(const char *sel_s, const char *labels_json)
{
    kc_label_selector *sel = lparse(sel_s);
    json_t *labels = labels_json ? J(labels_json) : NULL;
    bool m = kc_label_selector_matches(sel, labels);
    json_decref(labels);
    kc_label_selector_free(sel);
    return m;
}

static void assert_canon(const char *in, const char *want)
{
    kc_label_selector *sel = lparse(in);
    char *s = kc_label_selector_string(sel);
    cr_assert_str_eq(s, want, "canonical of \"%s\"", in);
    /* The canonical form reads back to the same canonical form. */
    kc_label_selector *again = lparse(s);
    char *s2 = kc_label_selector_string(again);
    cr_assert_str_eq(s2, s);
    free(s2);
    kc_label_selector_free(again);
    free(s);
    kc_label_selector_free(sel);
}

Test(label_selector, parses_every_operator)
{
    kc_label_selector *sel = lparse(" tier in (web, api ) , env!=prod,app==x,!legacy,zone,"
                                    "k notin (a,b),ver=1.2");
    cr_assert_eq(kc_label_selector_count(sel), 7);
    /* Sorted by key. */
    const kc_label_requirement *r = kc_label_selector_at(sel, 0);
    cr_assert_str_eq(r->key, "app");
    cr_assert_eq(r->op, KC_LABEL_EQ);
    cr_assert_eq(r->nvalues, 1);
    cr_assert_str_eq(r->values[0], "x");
    r = kc_label_selector_at(sel, 1);
    cr_assert_str_eq(r->key, "env");
    cr_assert_eq(r->op, KC_LABEL_NEQ);
    r = kc_label_selector_at(sel, 2);
    cr_assert_str_eq(r->key, "k");
    cr_assert_eq(r->op, KC_LABEL_NOTIN);
    cr_assert_eq(r->nvalues, 2);
    r = kc_label_selector_at(sel, 3);
    cr_assert_str_eq(r->key, "legacy");
    cr_assert_eq(r->op, KC_LABEL_NOTEXISTS);
    cr_assert_eq(r->nvalues, 0);
    r = kc_label_selector_at(sel, 4);
    cr_assert_str_eq(r->key, "tier");
    cr_assert_eq(r->op, KC_LABEL_IN);
    cr_assert_str_eq(r->values[0], "api");
    cr_assert_str_eq(r->values[1], "web");
    r = kc_label_selector_at(sel, 6);
    cr_assert_str_eq(r->key, "zone");
    cr_assert_eq(r->op, KC_LABEL_EXISTS);
    cr_assert_null(kc_label_selector_at(sel, 7));
    cr_assert_not(kc_label_selector_empty(sel));
    kc_label_selector_free(sel);
}

Test(label_selector, empty_selects_everything)
{
    kc_label_selector *sel = lparse("");
    cr_assert(kc_label_selector_empty(sel));
    cr_assert(kc_label_selector_matches(sel, NULL));
    json_t *l = J("{\"a\":\"b\"}");
    cr_assert(kc_label_selector_matches(sel, l));
    json_decref(l);
    char *s = kc_label_selector_string(sel);
    cr_assert_str_eq(s, "");
    free(s);
    kc_label_selector_free(sel);
    sel = lparse("   \t ");
    cr_assert(kc_label_selector_empty(sel));
    kc_label_selector_free(sel);
    cr_assert(kc_label_selector_empty(NULL));
    cr_assert(kc_label_selector_matches(NULL, NULL));
}

Test(label_selector, equality_matching)
{
    cr_assert(lmatch("app=web", "{\"app\":\"web\",\"x\":\"y\"}"));
    cr_assert_not(lmatch("app=web", "{\"app\":\"api\"}"));
    cr_assert_not(lmatch("app=web", "{}"));
    cr_assert_not(lmatch("app=web", NULL));
    cr_assert(lmatch("app==web", "{\"app\":\"web\"}"));
    cr_assert(lmatch("app=web,tier=fe", "{\"app\":\"web\",\"tier\":\"fe\"}"));
    cr_assert_not(lmatch("app=web,tier=fe", "{\"app\":\"web\",\"tier\":\"be\"}"));
    /* != matches when the key is absent. */
    cr_assert(lmatch("app!=web", "{}"));
    cr_assert(lmatch("app!=web", NULL));
    cr_assert(lmatch("app!=web", "{\"app\":\"api\"}"));
    cr_assert_not(lmatch("app!=web", "{\"app\":\"web\"}"));
    /* Empty value: k= requires the key with an empty value. */
    cr_assert(lmatch("k=", "{\"k\":\"\"}"));
    cr_assert_not(lmatch("k=", "{}"));
    cr_assert(lmatch("k=,j=x", "{\"k\":\"\",\"j\":\"x\"}"));
}

Test(label_selector, set_and_existence_matching)
{
    cr_assert(lmatch("env in (prod,staging)", "{\"env\":\"staging\"}"));
    cr_assert_not(lmatch("env in (prod,staging)", "{\"env\":\"dev\"}"));
    cr_assert_not(lmatch("env in (prod,staging)", "{}"));
    cr_assert(lmatch("env notin (prod)", "{\"env\":\"dev\"}"));
    cr_assert(lmatch("env notin (prod)", "{}"));
    cr_assert_not(lmatch("env notin (prod, dev)", "{\"env\":\"dev\"}"));
    cr_assert(lmatch("gpu", "{\"gpu\":\"\"}"));
    cr_assert_not(lmatch("gpu", "{\"cpu\":\"1\"}"));
    cr_assert(lmatch("!gpu", "{\"cpu\":\"1\"}"));
    cr_assert(lmatch("!gpu", NULL));
    cr_assert_not(lmatch("!gpu", "{\"gpu\":\"x\"}"));
    /* Empty elements are allowed inside a set. */
    cr_assert(lmatch("k in (a,)", "{\"k\":\"\"}"));
    cr_assert(lmatch("k in (,a)", "{\"k\":\"a\"}"));
    /* A non-string label value is present but equals nothing. */
    cr_assert(lmatch("k", "{\"k\":1}"));
    cr_assert_not(lmatch("k=1", "{\"k\":1}"));
    cr_assert(lmatch("k!=1", "{\"k\":1}"));
    /* A labels argument that is not an object is the same as no labels. */
    cr_assert(lmatch("!k", "[1]"));
}

Test(label_selector, prefixed_keys)
{
    cr_assert(lmatch("nvidia.com/gpu.present=true", "{\"nvidia.com/gpu.present\":\"true\"}"));
    cr_assert(lmatch("!node-role.kubernetes.io/control-plane", "{}"));
    kc_label_selector *sel = lparse("a.b-c.d/N_a.m-e=V.a_l-1");
    kc_label_selector_free(sel);
}

Test(label_selector, matches_object_metadata_labels)
{
    kc_label_selector *sel = lparse("app=web");
    json_t *o = J("{\"metadata\":{\"name\":\"x\",\"labels\":{\"app\":\"web\"}}}");
    cr_assert(kc_label_selector_matches_object(sel, o));
    json_decref(o);
    o = J("{\"metadata\":{\"name\":\"x\"}}");
    cr_assert_not(kc_label_selector_matches_object(sel, o));
    json_decref(o);
    kc_label_selector_free(sel);
}

Test(label_selector, error_messages_give_position)
{
    cr_assert_str_eq(lparse_err("a in (b"),
                     "label selector \"a in (b\": expected ',' or ')' at position 8");
    cr_assert_str_eq(
        lparse_err("a in (b c)"),
        "label selector \"a in (b c)\": expected ',' or ')', found \"c\" at position 9");
    cr_assert_str_eq(
        lparse_err("a in b"),
        "label selector \"a in b\": expected '(' after 'in' or 'notin', found \"b\" at "
        "position 6");
    cr_assert_str_eq(lparse_err("a=b,"),
                     "label selector \"a=b,\": expected a label key at position 5");
    cr_assert_str_eq(lparse_err("a=b c"),
                     "label selector \"a=b c\": expected ',' or end of selector, found \"c\" at "
                     "position 5");
    cr_assert_str_eq(
        lparse_err("a foo b"),
        "label selector \"a foo b\": expected '=', '==', '!=', 'in', 'notin', ',' or end "
        "of selector, found \"foo\" at position 3");
    cr_assert_str_eq(lparse_err("a=(b)"),
                     "label selector \"a=(b)\": expected a value, found \"(\" at position 3");
    cr_assert_str_eq(lparse_err("!"),
                     "label selector \"!\": expected a label key after '!' at position 2");
    cr_assert_str_eq(lparse_err("!a=b"),
                     "label selector \"!a=b\": expected ',' or end of selector after a '!key' "
                     "requirement, found \"=\" at position 3");
    cr_assert_str_eq(lparse_err(","),
                     "label selector \",\": expected a label key, found \",\" at position 1");
    cr_assert_str_eq(lparse_err("a>1"),
                     "label selector \"a>1\": operator '>' is not supported in label selectors at "
                     "position 2");
}

Test(label_selector, empty_set_holds_the_empty_value)
{
    /* Kubernetes reads "()" as {""}: `in ()` selects an empty value, `notin ()` the rest. */
    cr_assert(lmatch("k in ()", "{\"k\":\"\"}"));
    cr_assert_not(lmatch("k in ()", "{\"k\":\"a\"}"));
    cr_assert_not(lmatch("k in ( )", "{}"));
    cr_assert(lmatch("k notin ()", "{\"k\":\"a\"}"));
    cr_assert(lmatch("k notin ()", "{}"));
    cr_assert_not(lmatch("k notin ()", "{\"k\":\"\"}"));
    cr_assert(strstr(lparse_err("k in ("), "position"));
}

Test(label_selector, invalid_keys_and_values)
{
    cr_assert_str_eq(
        lparse_err("-a=b"),
        "label selector \"-a=b\": invalid key \"-a\": name part must start and end with "
        "an alphanumeric character at position 1");
    cr_assert(strstr(lparse_err("a/b/c=d"), "at most one '/'"));
    cr_assert(strstr(lparse_err("/b=d"), "prefix part must not be empty"));
    cr_assert(strstr(lparse_err("a/=d"), "name part must not be empty"));
    cr_assert(strstr(lparse_err("Example.com/b=d"), "lowercase DNS subdomain"));
    cr_assert(strstr(lparse_err("a..b/c=d"), "start and end with an alphanumeric"));
    cr_assert(strstr(lparse_err("a=b_"), "invalid value \"b_\" for key \"a\""));
    cr_assert(strstr(lparse_err("a=b_"), "at position 3"));
    cr_assert(strstr(lparse_err("a in (x, -y)"), "invalid value \"-y\" for key \"a\""));
    cr_assert(strstr(lparse_err("a in (x, -y)"), "at position 10"));
    cr_assert(strstr(lparse_err("a=b/c"), "may only contain alphanumerics"));
    char key[80], sel[200];
    memset(key, 'k', 64);
    key[64] = '\0';
    snprintf(sel, sizeof(sel), "%s=v", key);
    cr_assert(strstr(lparse_err(sel), "name part must be no more than 63 characters"));
    key[63] = '\0';
    snprintf(sel, sizeof(sel), "%s=v", key);
    kc_label_selector_free(lparse(sel));
    snprintf(sel, sizeof(sel), "k=%s", key);
    kc_label_selector_free(lparse(sel));
    snprintf(sel, sizeof(sel), "k=%sx", key);
    cr_assert(strstr(lparse_err(sel), "value must be no more than 63 characters"));
    char prefix[300];
    memset(prefix, 'p', 254);
    prefix[254] = '\0';
    char *big = malloc(400);
    snprintf(big, 400, "%s/n", prefix);
    cr_assert(strstr(lparse_err(big), "no more than 253 characters"));
    /* Long selectors are shortened in the message but the position survives. */
    cr_assert(strstr(lparse_err(big), "...\": invalid key"));
    prefix[253] = '\0';
    snprintf(big, 400, "%s/n", prefix);
    kc_label_selector_free(lparse(big));
    free(big);
}

Test(label_selector, key_and_value_validators)
{
    char why[128];
    cr_assert(kc_label_key_valid("app.kubernetes.io/name", why, sizeof(why)));
    cr_assert_not(kc_label_key_valid("", why, sizeof(why)));
    cr_assert_str_eq(why, "name part must not be empty");
    cr_assert_not(kc_label_key_valid(NULL, NULL, 0));
    cr_assert_not(kc_label_key_valid("a-/b", why, sizeof(why)));
    cr_assert(kc_label_value_valid("", why, sizeof(why)));
    cr_assert(kc_label_value_valid(NULL, why, sizeof(why)));
    cr_assert_not(kc_label_value_valid("a b", why, sizeof(why)));
    cr_assert_str_eq(why, "value may only contain alphanumerics, '-', '_' and '.' (found ' ')");
    cr_assert_not(kc_label_value_valid("a\tb", why, sizeof(why)));
    cr_assert(strstr(why, "byte 0x09"));
}

Test(label_selector, canonical_string)
{
    assert_canon("b==2, a=1", "a=1,b=2");
    assert_canon("x notin (c, a, b, a)", "x notin (a,b,c)");
    assert_canon("!z,y,  k in ( v )", "k in (v),y,!z");
    assert_canon("k in (a,)", "k in (,a)");
    assert_canon("k in (,)", "k in (,)");
    assert_canon("k=,j!=", "j!=,k=");
    assert_canon("in=notin", "in=notin");
    assert_canon("a=1,a!=2", "a=1,a!=2");
}

Test(label_selector, from_json)
{
    json_t *j = J("{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
                  "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"fe\",\"be\"]},"
                  "{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"prod\"]},"
                  "{\"key\":\"gpu\",\"operator\":\"Exists\"},"
                  "{\"key\":\"old\",\"operator\":\"DoesNotExist\",\"values\":[]}]}");
    kc_label_selector *sel = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_label_selector_from_json(j, &sel, &e), KC_OK, "%s", e.msg);
    json_decref(j);
    char *s = kc_label_selector_string(sel);
    cr_assert_str_eq(s, "app=web,env notin (prod),gpu,!old,tier in (be,fe)");
    free(s);
    json_t *l = J("{\"app\":\"web\",\"tier\":\"fe\",\"gpu\":\"1\"}");
    cr_assert(kc_label_selector_matches(sel, l));
    json_object_set_new(l, "old", json_string("x"));
    cr_assert_not(kc_label_selector_matches(sel, l));
    json_decref(l);
    kc_label_selector_free(sel);

    /* NULL, null and {} select everything. */
    cr_assert_eq(kc_label_selector_from_json(NULL, &sel, &e), KC_OK);
    cr_assert(kc_label_selector_empty(sel));
    kc_label_selector_free(sel);
    j = json_null();
    cr_assert_eq(kc_label_selector_from_json(j, &sel, &e), KC_OK);
    cr_assert(kc_label_selector_empty(sel));
    kc_label_selector_free(sel);
    j = J("{\"matchLabels\":null,\"matchExpressions\":[]}");
    cr_assert_eq(kc_label_selector_from_json(j, &sel, &e), KC_OK);
    cr_assert(kc_label_selector_matches(sel, NULL));
    kc_label_selector_free(sel);
    json_decref(j);
}

static const char *json_err(const char *text)
{
    static kc_err e;
    kc_err_clear(&e);
    json_t *j = J(text);
    kc_label_selector *sel = NULL;
    cr_assert_eq(kc_label_selector_from_json(j, &sel, &e), KC_EPARSE, "%s should fail", text);
    cr_assert_null(sel);
    json_decref(j);
    return e.msg;
}

Test(label_selector, from_json_errors)
{
    cr_assert_str_eq(json_err("[]"), "label selector: expected an object, got an array");
    cr_assert_str_eq(json_err("{\"matchLabels\":[]}"),
                     "label selector: matchLabels: expected an object, got an array");
    cr_assert_str_eq(json_err("{\"matchLabels\":{\"a\":1}}"),
                     "label selector: matchLabels.a: expected a string, got a number");
    cr_assert(strstr(json_err("{\"matchLabels\":{\"-a\":\"b\"}}"), "invalid key \"-a\""));
    cr_assert(
        strstr(json_err("{\"matchLabels\":{\"a\":\"b c\"}}"), "matchLabels.a: invalid value"));
    cr_assert_str_eq(json_err("{\"matchExpressions\":{}}"),
                     "label selector: matchExpressions: expected an array, got an object");
    cr_assert_str_eq(json_err("{\"matchExpressions\":[1]}"),
                     "label selector: matchExpressions[0]: expected an object, got a number");
    cr_assert_str_eq(json_err("{\"matchExpressions\":[{\"operator\":\"Exists\"}]}"),
                     "label selector: matchExpressions[0].key: expected a string, got none");
    cr_assert_str_eq(
        json_err("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"},"
                 "{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}"),
        "label selector: matchExpressions[1].operator: \"Gt\" is not one of In, NotIn, Exists, "
        "DoesNotExist");
    cr_assert(strstr(json_err("{\"matchExpressions\":[{\"key\":\"a\"}]}"),
                     "a missing operator is not one of"));
    cr_assert_str_eq(
        json_err("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}"),
        "label selector: matchExpressions[0] (key \"a\"): values must be non-empty for "
        "In");
    cr_assert_str_eq(
        json_err(
            "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}"),
        "label selector: matchExpressions[0] (key \"a\"): values must be empty for Exists");
    cr_assert_str_eq(
        json_err(
            "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x\",2]}]}"),
        "label selector: matchExpressions[0].values[1]: expected a string, got a number");
    cr_assert(strstr(json_err("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\","
                              "\"values\":\"x\"}]}"),
                     "values: expected an array, got a string"));
}

Test(label_selector, null_arguments)
{
    kc_label_selector *sel = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_label_selector_parse(NULL, &sel, &e), KC_EARG);
    cr_assert_eq(kc_label_selector_parse("a", NULL, NULL), KC_EARG);
    cr_assert_eq(kc_label_selector_from_json(NULL, NULL, NULL), KC_EARG);
    kc_label_selector_free(NULL);
    char *s = kc_label_selector_string(NULL);
    cr_assert_str_eq(s, "");
    free(s);
}

/* ---- field selectors ---------------------------------------------------------------------- */

static kc_field_selector *fparse(const char *s)
{
    kc_field_selector *sel = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    cr_assert_eq(kc_field_selector_parse(s, &sel, &e), KC_OK, "parse \"%s\": %s", s, e.msg);
    return sel;
}

static const char *fparse_err(const char *s)
{
    static kc_err e;
    kc_field_selector *sel = (kc_field_selector *)0x1;
    kc_err_clear(&e);
    cr_assert_eq(kc_field_selector_parse(s, &sel, &e), KC_EPARSE, "expected \"%s\" to fail", s);
    cr_assert_null(sel);
    return e.msg;
}

static bool fmatch(const char *sel_s, const char *obj_json)
{
    kc_field_selector *sel = fparse(sel_s);
    json_t *o = obj_json ? J(obj_json) : NULL;
    bool m = kc_field_selector_matches(sel, o);
    json_decref(o);
    kc_field_selector_free(sel);
    return m;
}

static const char *POD = "{\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns\"},"
                         "\"spec\":{\"nodeName\":\"n1\",\"replicas\":3,\"ratio\":1.5,"
                         "\"host\":true,\"list\":[1],\"nil\":null},"
                         "\"status\":{\"phase\":\"Running\"},\"involvedObject\":{\"kind\":\"Node\","
                         "\"uid\":\"u-1\"}}";

Test(field_selector, parse_and_enumerate)
{
    kc_field_selector *sel = fparse("status.phase!=Failed, spec.nodeName==n1,metadata.name=p1");
    cr_assert_eq(kc_field_selector_count(sel), 3);
    const char *f, *v;
    kc_field_op op;
    cr_assert(kc_field_selector_term(sel, 0, &f, &op, &v));
    cr_assert_str_eq(f, "metadata.name");
    cr_assert_eq(op, KC_FIELD_EQ);
    cr_assert_str_eq(v, "p1");
    cr_assert(kc_field_selector_term(sel, 1, &f, NULL, NULL));
    cr_assert_str_eq(f, "spec.nodeName");
    cr_assert(kc_field_selector_term(sel, 2, &f, &op, &v));
    cr_assert_str_eq(f, "status.phase");
    cr_assert_eq(op, KC_FIELD_NEQ);
    cr_assert_str_eq(v, "Failed");
    cr_assert_not(kc_field_selector_term(sel, 3, &f, &op, &v));
    cr_assert_str_eq(kc_field_selector_equals_value(sel, "spec.nodeName"), "n1");
    cr_assert_null(kc_field_selector_equals_value(sel, "status.phase"));
    cr_assert_null(kc_field_selector_equals_value(sel, "nope"));
    kc_field_selector_free(sel);
}

Test(field_selector, matching)
{
    cr_assert(fmatch("metadata.name=p1", POD));
    cr_assert(fmatch("metadata.name=p1,metadata.namespace=ns,spec.nodeName=n1", POD));
    cr_assert_not(fmatch("metadata.name=p1,metadata.namespace=other", POD));
    cr_assert(fmatch("status.phase!=Pending", POD));
    cr_assert_not(fmatch("status.phase!=Running", POD));
    cr_assert(fmatch("involvedObject.kind=Node,involvedObject.uid=u-1", POD));
    /* Missing fields and null compare as "". */
    cr_assert(fmatch("spec.missing=", POD));
    cr_assert(fmatch("spec.nil=", POD));
    cr_assert(fmatch("spec.missing!=x", POD));
    cr_assert_not(fmatch("spec.missing=x", POD));
    cr_assert(fmatch("metadata.name.deeper=", POD));
    cr_assert(fmatch("metadata..name=", POD));
    /* Non-string leaves compare by their JSON text. */
    cr_assert(fmatch("spec.replicas=3", POD));
    cr_assert(fmatch("spec.ratio=1.5", POD));
    cr_assert(fmatch("spec.host=true", POD));
    cr_assert(fmatch("spec.host!=false", POD));
    /* Structures equal nothing. */
    cr_assert_not(fmatch("spec.list=", POD));
    cr_assert(fmatch("spec.list!=[1]", POD));
    /* Empty and absent objects. */
    cr_assert(fmatch("", POD));
    cr_assert(fmatch("metadata.name=", NULL));
    cr_assert_not(fmatch("metadata.name=x", NULL));
}

Test(field_selector, escapes)
{
    kc_field_selector *sel = fparse("a=x\\,y\\=z\\\\w,b==");
    const char *v;
    cr_assert_eq(kc_field_selector_count(sel), 2);
    cr_assert(kc_field_selector_term(sel, 0, NULL, NULL, &v));
    cr_assert_str_eq(v, "x,y=z\\w");
    cr_assert(kc_field_selector_term(sel, 1, NULL, NULL, &v));
    cr_assert_str_eq(v, "");
    char *s = kc_field_selector_string(sel);
    cr_assert_str_eq(s, "a=x\\,y\\=z\\\\w,b=");
    free(s);
    kc_field_selector_free(sel);
    cr_assert(fmatch("metadata.name=p\\,1", "{\"metadata\":{\"name\":\"p,1\"}}"));
    cr_assert_not(fmatch("metadata.name=p\\,1", "{\"metadata\":{\"name\":\"p\"}}"));
}

Test(field_selector, empty_terms_and_whitespace)
{
    kc_field_selector *sel = fparse(",, a.b =x y ,");
    cr_assert_eq(kc_field_selector_count(sel), 1);
    const char *f, *v;
    cr_assert(kc_field_selector_term(sel, 0, &f, NULL, &v));
    cr_assert_str_eq(f, "a.b");
    cr_assert_str_eq(v, "x y ");
    kc_field_selector_free(sel);
    sel = fparse("");
    cr_assert(kc_field_selector_empty(sel));
    char *s = kc_field_selector_string(sel);
    cr_assert_str_eq(s, "");
    free(s);
    kc_field_selector_free(sel);
    cr_assert(kc_field_selector_empty(NULL));
}

Test(field_selector, errors)
{
    cr_assert_str_eq(fparse_err("a=b,c"), "field selector \"a=b,c\": term \"c\" has no operator "
                                          "(expected field=value, field==value or field!=value) at "
                                          "position 5");
    cr_assert_str_eq(
        fparse_err("a=b=c"),
        "field selector \"a=b=c\": unescaped '=' in a value (write '\\=') at position 4");
    cr_assert_str_eq(
        fparse_err("a===b"),
        "field selector \"a===b\": unescaped '=' in a value (write '\\=') at position 4");
    cr_assert_str_eq(fparse_err("a=b\\"),
                     "field selector \"a=b\\\": unterminated escape '\\' at the "
                     "end of a value at position 4");
    cr_assert_str_eq(
        fparse_err("a=b\\n"),
        "field selector \"a=b\\n\": invalid escape sequence '\\n'; only \\\\, \\, and \\= "
        "are allowed at position 4");
    cr_assert_str_eq(
        fparse_err(" =b"),
        "field selector \" =b\": missing field name before the operator at position 2");
    cr_assert_str_eq(
        fparse_err("!=b"),
        "field selector \"!=b\": missing field name before the operator at position 1");
    cr_assert(strstr(fparse_err("a b=c"), "invalid character in field name \"a b\" at position 2"));
    cr_assert(strstr(fparse_err("a! =c"), "invalid character in field name \"a!\""));
    cr_assert(strstr(fparse_err("a\\=b=c"), "invalid character in field name"));
    kc_err e = {0};
    cr_assert_eq(kc_field_selector_parse(NULL, NULL, &e), KC_EARG);
}

Test(field_selector, unsupported_fields)
{
    static const char *const supported[] = {"metadata.name", "metadata.namespace", NULL};
    kc_field_selector *sel = fparse("metadata.name=a,metadata.namespace!=b");
    cr_assert_null(kc_field_selector_unsupported(sel, supported));
    kc_err e = {0};
    kc_err_clear(&e);
    cr_assert_eq(kc_field_selector_require(sel, supported, &e), KC_OK);
    kc_field_selector_free(sel);
    sel = fparse("metadata.name=a,spec.nodeName=n");
    cr_assert_str_eq(kc_field_selector_unsupported(sel, supported), "spec.nodeName");
    cr_assert_eq(kc_field_selector_require(sel, supported, &e), KC_EBADREQUEST);
    cr_assert_str_eq(e.msg, "field label not supported: spec.nodeName");
    cr_assert_str_eq(kc_field_selector_unsupported(sel, NULL), "metadata.name");
    kc_field_selector_free(sel);
}

Test(field_selector, canonical_string_round_trips)
{
    const char *cases[][2] = {
        {"b==1,a!=2", "a!=2,b=1"},
        {"x=a\\,b", "x=a\\,b"},
        {"y= lead", "y= lead"},
        {"z!=\\\\", "z!=\\\\"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kc_field_selector *sel = fparse(cases[i][0]);
        char *s = kc_field_selector_string(sel);
        cr_assert_str_eq(s, cases[i][1]);
        kc_field_selector *again = fparse(s);
        char *s2 = kc_field_selector_string(again);
        cr_assert_str_eq(s2, s);
        free(s2);
        free(s);
        kc_field_selector_free(again);
        kc_field_selector_free(sel);
    }
}
