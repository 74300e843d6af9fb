/* Tests for the custom-object schema rules of ks_crd_schema that the ClusterPolicy CRD relies on:
 * non-nullable nulls pruned before defaulting, the date and date-time string formats, the
 * uniqueness of x-kubernetes-list-type set and map lists, and the API server's error order. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"
#include "ks_crd.h"

static json_t *J(const char *text)
{
    char *s = strdup(text);
    cr_assert_not_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    cr_assert_not_null(j, "bad test JSON: %s: %s", je.text, s);
    free(s);
    return j;
}

#define SCHEMA                                                                                     \
    "{'type':'object','properties':{'apiVersion':{'type':'string'},'kind':{'type':'string'},"      \
    "'metadata':{'type':'object'},'spec':{'type':'object',"                                        \
    "'x-kubernetes-preserve-unknown-fields':true,'properties':{"                                   \
    "'driver':{'type':'object','properties':{'version':{'type':'string'},'kind':{'type':"          \
    "'string','default':'auto'},'note':{'type':'string','nullable':true},'cfg':{'type':"           \
    "'object','properties':{'name':{'type':'string'}}},'port':{'x-kubernetes-int-or-string':"      \
    "true},'args':{'type':'array','items':{'type':'string','nullable':true}}}},"                   \
    "'labels':{'type':'object','additionalProperties':{'type':'string'}},"                         \
    "'counts':{'type':'object','additionalProperties':{'type':'integer','default':7}},"            \
    "'mode':{'type':'string','pattern':'^[a-z]+$','enum':['single','mixed']},"                     \
    "'step':{'type':'integer','multipleOf':5,'minimum':10,'maximum':100},"                         \
    "'since':{'type':'string','format':'date-time'},'day':{'type':'string','format':'date'},"      \
    "'id':{'type':'string','format':'uuid'},"                                                      \
    "'tags':{'type':'array','x-kubernetes-list-type':'set','items':{'type':'string'}},"            \
    "'ports':{'type':'array','x-kubernetes-list-type':'map','x-kubernetes-list-map-keys':"         \
    "['port','protocol'],'items':{'type':'object','properties':{'port':{'type':'integer'},"        \
    "'protocol':{'type':'string'}}}}}},"                                                           \
    "'status':{'type':'object','properties':{'conditions':{'type':'array',"                        \
    "'x-kubernetes-list-type':'map','x-kubernetes-list-map-keys':['type'],'items':{'type':"        \
    "'object','properties':{'type':{'type':'string'},'status':{'type':'string'},"                  \
    "'lastTransitionTime':{'type':'string','format':'date-time'}}}}}}}}"

static json_t *object(const char *spec, const char *status)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{'apiVersion':'nvidia.com/v1','kind':'ClusterPolicy','metadata':{'name':"
             "'cluster-policy'},'spec':%s%s%s}",
             spec, status ? ",'status':" : "", status ? status : "");
    return J(buf);
}

/* Prunes, defaults and validates as admission does: the full message ("" when valid). */
static const char *admit(const char *spec, const char *status)
{
    static char msg[8192];
    json_t *schema = J(SCHEMA), *obj = object(spec, status);
    ks_crd_prune(schema, obj, NULL);
    ks_crd_default(schema, obj);
    kc_err e;
    kc_err_clear(&e);
    kc_code rc = ks_crd_validate(schema, obj, &e);
    if (rc != KC_OK)
        cr_assert_eq(rc, KC_EINVALID, "%s", e.msg);
    snprintf(msg, sizeof(msg), "%s", rc == KC_OK ? "" : ks_admit_message(&e));
    json_decref(schema);
    json_decref(obj);
    return msg;
}

/* The spec after pruning and defaulting, compact JSON with sorted keys. */
static char *defaulted_spec(const char *spec)
{
    json_t *schema = J(SCHEMA), *obj = object(spec, NULL);
    ks_crd_prune(schema, obj, NULL);
    ks_crd_default(schema, obj);
    char *out = json_dumps(json_object_get(obj, "spec"), JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_not_null(out);
    json_decref(schema);
    json_decref(obj);
    return out;
}

#define PFX "ClusterPolicy.nvidia.com \"cluster-policy\" is invalid: "

Test(ks_crd_schema_rules, non_nullable_nulls_are_pruned_before_defaulting)
{
    char *got = defaulted_spec("{'driver':{'version':null,'kind':null,'note':null,'cfg':null,"
                               "'port':null,'args':['a',null]},'labels':{'a':null,'b':'x'},"
                               "'counts':{'n':null,'m':3},'future':{'k':null}}");
    cr_assert_str_eq(got, "{\"counts\":{\"m\":3,\"n\":7},\"driver\":{\"args\":[\"a\",null],"
                          "\"kind\":\"auto\",\"note\":null},\"future\":{\"k\":null},"
                          "\"labels\":{\"b\":\"x\"}}");
    free(got);
    got = defaulted_spec("{'driver':null}");
    cr_assert_str_eq(got, "{}");
    free(got);
    /* nothing is left for validation to refuse */
    cr_assert_str_eq(admit("{'driver':{'version':null,'cfg':null},'labels':{'a':null}}", NULL), "");
}

Test(ks_crd_schema_rules, validation_alone_still_refuses_nulls)
{
    json_t *schema = J(SCHEMA), *obj = object("{'driver':{'version':null}}", NULL);
    kc_err e;
    cr_assert_eq(ks_crd_validate(schema, obj, &e), KC_EINVALID);
    cr_assert_str_eq(ks_admit_message(&e),
                     PFX "spec.driver.version: Invalid value: \"null\": spec.driver.version in "
                         "body must be of type string: \"null\"");
    json_decref(schema);
    json_decref(obj);
}

Test(ks_crd_schema_rules, date_time_format)
{
    static const char *const good[] = {
        "2026-01-01T00:00:00Z",        "2026-01-01t10:20:30z",      "2024-02-29T23:59:59Z",
        "2026-06-30T12:00:00.123456Z", "2026-06-30T12:00:00+02:00", "2026-06-30T12:00:00-11:30",
        "2026-06-30T12:00:00,5Z",
    };
    static const char *const bad[] = {
        "yesterday",
        "2026-01-01",
        "2026-01-01 00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T10:60:00Z",
        "2026-01-01T10:00:61Z",
        "2026-01-01T10:00:00",
        "2026-01-01T10:00:00+2",
        "26-01-01T10:00:00Z",
        "2026-1-01T10:00:00Z",
        "2026-01-01T10:00Z",
    };
    char spec[256], want[1024];
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        snprintf(spec, sizeof(spec), "{'since':'%s'}", good[i]);
        cr_assert_str_eq(admit(spec, NULL), "", "%s should be a valid date-time", good[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(spec, sizeof(spec), "{'since':'%s'}", bad[i]);
        snprintf(want, sizeof(want),
                 PFX "spec.since: Invalid value: \"%s\": spec.since in body must be of type "
                     "date-time: \"%s\"",
                 bad[i], bad[i]);
        cr_assert_str_eq(admit(spec, NULL), want);
    }
}

Test(ks_crd_schema_rules, date_format_and_unchecked_formats)
{
    cr_assert_str_eq(admit("{'day':'2024-02-29'}", NULL), "");
    cr_assert_str_eq(admit("{'day':'2026-02-29'}", NULL),
                     PFX "spec.day: Invalid value: \"2026-02-29\": spec.day in body must be of "
                         "type date: \"2026-02-29\"");
    cr_assert_str_eq(admit("{'day':'2026-02-01T00:00:00Z'}", NULL),
                     PFX "spec.day: Invalid value: \"2026-02-01T00:00:00Z\": spec.day in body must "
                         "be of type date: \"2026-02-01T00:00:00Z\"");
    /* formats kubesim does not check are left alone; a wrong type is a type error only */
    cr_assert_str_eq(admit("{'id':'not-a-uuid'}", NULL), "");
    cr_assert_str_eq(admit("{'since':5}", NULL),
                     PFX "spec.since: Invalid value: \"integer\": spec.since in body must be of "
                         "type string: \"integer\"");
}

Test(ks_crd_schema_rules, condition_time_in_status)
{
    cr_assert_str_eq(
        admit("{}", "{'conditions':[{'type':'Ready','status':'True','lastTransitionTime':'now'}]}"),
        PFX "status.conditions[0].lastTransitionTime: Invalid value: \"now\": "
            "status.conditions[0].lastTransitionTime in body must be of type date-time: \"now\"");
}

Test(ks_crd_schema_rules, list_map_with_one_key)
{
    cr_assert_str_eq(admit("{}", "{'conditions':[{'type':'Ready','status':'True'},{'type':"
                                 "'Error','status':'False'}]}"),
                     "");
    /* the first repetition of a key is reported, once, with the key as Go prints a map */
    cr_assert_str_eq(admit("{}", "{'conditions':[{'type':'Ready','status':'True'},{'type':'Ready',"
                                 "'status':'False'},{'type':'Ready'},{'type':'Error'}]}"),
                     PFX "status.conditions[1]: Duplicate value: map[string]interface "
                         "{}{\"type\":\"Ready\"}");
    cr_assert_str_eq(admit("{}", "{'conditions':[{'status':'True'},{'status':'False'}]}"),
                     PFX "status.conditions[1]: Duplicate value: map[string]interface {}{}");
    /* a null element has no key: it repeats an element without the key field (and, not being
     * nullable, is a type error first: nulls in arrays are not pruned) */
    cr_assert_str_eq(admit("{}", "{'conditions':[{'status':'True'},null]}"),
                     PFX "[status.conditions[1]: Invalid value: \"null\": status.conditions[1] in "
                         "body must be of type object: \"null\", status.conditions[1]: Duplicate "
                         "value: map[string]interface {}{}]");
}

Test(ks_crd_schema_rules, list_map_with_two_keys)
{
    cr_assert_str_eq(
        admit("{'ports':[{'port':80,'protocol':'TCP'},{'port':80,'protocol':'UDP'},{'port':81}]}",
              NULL),
        "");
    cr_assert_str_eq(
        admit("{'ports':[{'port':80,'protocol':'TCP'},{'protocol':'TCP','port':80}]}", NULL),
        PFX "spec.ports[1]: Duplicate value: map[string]interface {}{\"port\":80, "
            "\"protocol\":\"TCP\"}");
    cr_assert_str_eq(admit("{'ports':[{'port':80},{'port':80}]}", NULL),
                     PFX "spec.ports[1]: Duplicate value: map[string]interface {}{\"port\":80}");
}

Test(ks_crd_schema_rules, list_map_items_must_be_objects)
{
    /* the schema's type error first, then the list-type rule */
    cr_assert_str_eq(admit("{'ports':[{'port':80},'http']}", NULL),
                     PFX "[spec.ports[1]: Invalid value: \"string\": spec.ports[1] in body must be "
                         "of type object: \"string\", spec.ports[1]: Invalid value: \"http\": must "
                         "be an object for an array of list-type map]");
}

Test(ks_crd_schema_rules, list_set)
{
    cr_assert_str_eq(admit("{'tags':['a','b','c']}", NULL), "");
    cr_assert_str_eq(admit("{'tags':['a','b','a','a','b']}", NULL),
                     PFX "[spec.tags[2]: Duplicate value: \"a\", spec.tags[4]: Duplicate value: "
                         "\"b\"]");
}

Test(ks_crd_schema_rules, error_order_follows_the_api_server)
{
    /* pattern before enum */
    cr_assert_str_eq(admit("{'mode':'Bogus'}", NULL),
                     PFX "[spec.mode: Invalid value: \"Bogus\": spec.mode in body should match "
                         "'^[a-z]+$', spec.mode: Unsupported value: \"Bogus\": supported values: "
                         "\"single\", \"mixed\"]");
    /* multipleOf, then minimum */
    cr_assert_str_eq(admit("{'step':7}", NULL),
                     PFX "[spec.step: Invalid value: 7: spec.step in body should be a multiple of "
                         "5, spec.step: Invalid value: 7: spec.step in body should be greater than "
                         "or equal to 10]");
    cr_assert_str_eq(admit("{'step':101}", NULL),
                     PFX "[spec.step: Invalid value: 101: spec.step in body should be a multiple "
                         "of 5, spec.step: Invalid value: 101: spec.step in body should be less "
                         "than or equal to 100]");
}
