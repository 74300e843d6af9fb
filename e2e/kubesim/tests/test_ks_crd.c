/* Tests for ks_crd: structural-schema validation of custom objects with the API server's messages,
 * pruning and defaults, the CRD's own admission, and ks_crd_sync against a real store (served
 * types, printer columns, status conditions, version changes, conflicts, deletion). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"
#include "ks_crd.h"
#include "ks_sim.h"

static json_t *J(const char *text)
{
    char *s = strdup(text);
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
    "'metadata':{'type':'object'},'spec':{'type':'object','required':['driver'],'properties':{"    \
    "'driver':{'type':'object','properties':{'enabled':{'type':'boolean','default':true},"         \
    "'version':{'type':'string','pattern':'^[0-9]+\\\\.[0-9]+$'},'repository':{'type':'string',"   \
    "'minLength':1,'maxLength':10}}},'mig':{'type':'object','properties':{'strategy':{'type':"     \
    "'string','enum':['none','single','mixed'],'default':'single'}}},'replicas':{'type':"          \
    "'integer','minimum':1,'maximum':10},'ratio':{'type':'number','maximum':1,"                    \
    "'exclusiveMaximum':true},'port':{'x-kubernetes-int-or-string':true},'tags':{'type':'array',"  \
    "'minItems':1,'maxItems':2,'items':{'type':'string'}},'labels':{'type':'object',"              \
    "'additionalProperties':{'type':'string'}},'extra':{'type':'object',"                          \
    "'x-kubernetes-preserve-unknown-fields':true,'properties':{'known':{'type':'integer'}}},"      \
    "'opt':{'type':'string','nullable':true},'nonnull':{'type':'string'},'digits':{'type':"        \
    "'string','pattern':'^\\\\d+$'},'look':{'type':'string','pattern':'^(?=a)b'}}},'status':{"     \
    "'type':'object','properties':{'state':{'type':'string'}}}}}"

static json_t *cr(const char *spec)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{'apiVersion':'nvidia.com/v1','kind':'ClusterPolicy','metadata':{'name':"
             "'cluster-policy'},'spec':%s}",
             spec);
    return J(buf);
}

/* Validates spec against SCHEMA: the full message ("" when valid). */
static const char *check(const char *spec)
{
    static char msg[8192];
    json_t *schema = J(SCHEMA), *obj = cr(spec);
    kc_err e;
    kc_err_clear(&e);
    kc_code rc = ks_crd_validate(schema, obj, &e);
    snprintf(msg, sizeof(msg), "%s", rc == KC_OK ? "" : ks_admit_message(&e));
    if (rc != KC_OK)
        cr_assert_eq(rc, KC_EINVALID, "%s", e.msg);
    json_decref(schema);
    json_decref(obj);
    return msg;
}

#define PFX "ClusterPolicy.nvidia.com \"cluster-policy\" is invalid: "

Test(ks_crd, validation_messages)
{
    cr_assert_str_eq(check("{'driver':{},'mig':{'strategy':'bogus'}}"),
                     PFX "spec.mig.strategy: Unsupported value: \"bogus\": supported values: "
                         "\"none\", \"single\", \"mixed\"");
    cr_assert_str_eq(check("{'driver':{},'replicas':'x'}"),
                     PFX "spec.replicas: Invalid value: \"string\": spec.replicas in body must be "
                         "of type integer: \"string\"");
    cr_assert_str_eq(check("{}"), PFX "spec.driver: Required value");
    cr_assert_str_eq(check("{'driver':{},'replicas':0}"),
                     PFX "spec.replicas: Invalid value: 0: spec.replicas in body should be greater "
                         "than or equal to 1");
    cr_assert_str_eq(check("{'driver':{},'replicas':11}"),
                     PFX "spec.replicas: Invalid value: 11: spec.replicas in body should be less "
                         "than or equal to 10");
    cr_assert_str_eq(check("{'driver':{},'ratio':1}"),
                     PFX "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1");
    cr_assert_str_eq(check("{'driver':{'version':'v1'}}"),
                     PFX "spec.driver.version: Invalid value: \"v1\": spec.driver.version in body "
                         "should match '^[0-9]+\\.[0-9]+$'");
    cr_assert_str_eq(check("{'driver':{'repository':''}}"),
                     PFX "spec.driver.repository: Invalid value: \"\": spec.driver.repository in "
                         "body should be at least 1 chars long");
    cr_assert_str_eq(check("{'driver':{'repository':'abcdefghijk'}}"),
                     PFX "spec.driver.repository: Too long: may not be more than 10 bytes");
    cr_assert_str_eq(check("{'driver':{},'tags':[]}"),
                     PFX "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 "
                         "items");
    cr_assert_str_eq(check("{'driver':{},'tags':['a','b','c']}"),
                     PFX "spec.tags: Too many: 3: must have at most 2 items");
    cr_assert_str_eq(check("{'driver':{},'tags':['a',5]}"),
                     PFX "spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be "
                         "of type string: \"integer\"");
    cr_assert_str_eq(check("{'driver':{},'labels':{'x':5}}"),
                     PFX "spec.labels.x: Invalid value: \"integer\": spec.labels.x in body must "
                         "be of type string: \"integer\"");
    cr_assert_str_eq(check("{'driver':{},'port':true}"),
                     PFX "spec.port: Invalid value: \"boolean\": spec.port in body must be of type "
                         "integer,string: \"boolean\"");
    cr_assert_str_eq(check("{'driver':{},'nonnull':null}"),
                     PFX "spec.nonnull: Invalid value: \"null\": spec.nonnull in body must be of "
                         "type string: \"null\"");
    cr_assert_str_eq(check("{'driver':{},'replicas':2.5}"),
                     PFX "spec.replicas: Invalid value: \"number\": spec.replicas in body must be "
                         "of type integer: \"number\"");
    cr_assert_str_eq(check("{'driver':{},'digits':'12a'}"),
                     PFX "spec.digits: Invalid value: \"12a\": spec.digits in body should match "
                         "'^\\d+$'");
    cr_assert_str_eq(check("{'driver':{},'extra':{'known':'x'}}"),
                     PFX "spec.extra.known: Invalid value: \"string\": spec.extra.known in body "
                         "must be of type integer: \"string\"");
    /* accepted: integral reals as integers, int-or-string, nullable, unsupported patterns */
    cr_assert_str_eq(check("{'driver':{'version':'1.2','enabled':false},'replicas':2.0,'port':"
                           "'http','opt':null,'digits':'123','look':'anything','extra':{'x':{}}"
                           ",'labels':{'a':'b'},'tags':['a'],'ratio':0.5}"),
                     "");
    cr_assert_str_eq(check("{'driver':{},'port':8080}"), "");
}

Test(ks_crd, collects_every_error_with_causes)
{
    json_t *schema = J(SCHEMA);
    json_t *obj = cr("{'mig':{'strategy':'bogus'},'replicas':'x'}");
    kc_err e;
    cr_assert_eq(ks_crd_validate(schema, obj, &e), KC_EINVALID);
    cr_assert_str_eq(ks_admit_message(&e),
                     PFX "[spec.driver: Required value, spec.mig.strategy: Unsupported value: "
                         "\"bogus\": supported values: \"none\", \"single\", \"mixed\", "
                         "spec.replicas: Invalid value: \"string\": spec.replicas in body must be "
                         "of type integer: \"string\"]");
    json_t *causes = ks_admit_causes(&e);
    cr_assert_eq(json_array_size(causes), 3);
    static const char *const reasons[] = {"FieldValueRequired", "FieldValueNotSupported",
                                          "FieldValueTypeInvalid"};
    static const char *const fields[] = {"spec.driver", "spec.mig.strategy", "spec.replicas"};
    for (size_t i = 0; i < 3; i++) {
        json_t *c = json_array_get(causes, i);
        cr_assert_str_eq(json_string_value(json_object_get(c, "reason")), reasons[i]);
        cr_assert_str_eq(json_string_value(json_object_get(c, "field")), fields[i]);
    }
    json_decref(causes);
    json_decref(obj);
    /* no schema, no checks; a non-object is an argument error */
    obj = cr("{'anything':1}");
    cr_assert_eq(ks_crd_validate(NULL, obj, &e), KC_OK);
    json_decref(obj);
    json_t *arr = json_array();
    cr_assert_eq(ks_crd_validate(schema, arr, &e), KC_EARG);
    json_decref(arr);
    json_decref(schema);
}

Test(ks_crd, prune_and_default)
{
    json_t *schema = J(SCHEMA);
    json_t *obj = J("{'apiVersion':'nvidia.com/v1','kind':'ClusterPolicy','metadata':{'name':'x',"
                    "'labels':{'a':'b'}},'other':1,'spec':{'unknown':true,'driver':{'zzz':1},"
                    "'extra':{'free':{'form':1},'known':3},'labels':{'k':'v'},'mig':{}},"
                    "'status':{'state':'ok','junk':2}}");
    json_t *paths = json_array();
    cr_assert_eq(ks_crd_prune(schema, obj, paths), 4);
    json_t *want_paths = J("['other','spec.unknown','spec.driver.zzz','status.junk']");
    /* order follows the object's keys; compare as sets */
    for (size_t i = 0; i < json_array_size(want_paths); i++) {
        bool found = false;
        for (size_t j = 0; j < json_array_size(paths); j++)
            found |= json_equal(json_array_get(paths, j), json_array_get(want_paths, i));
        cr_assert(found, "missing %s", json_string_value(json_array_get(want_paths, i)));
    }
    json_decref(want_paths);
    json_decref(paths);
    ks_crd_default(schema, obj);
    json_t *want = J("{'apiVersion':'nvidia.com/v1','kind':'ClusterPolicy','metadata':{'name':'x',"
                     "'labels':{'a':'b'}},'spec':{'driver':{'enabled':true},'extra':{'free':{"
                     "'form':1},'known':3},'labels':{'k':'v'},'mig':{'strategy':'single'}},"
                     "'status':{'state':'ok'}}");
    char *got = json_dumps(obj, JSON_SORT_KEYS);
    cr_assert(json_equal(obj, want), "%s", got);
    free(got);
    /* pruning again changes nothing */
    cr_assert_eq(ks_crd_prune(schema, obj, NULL), 0);
    json_decref(want);
    json_decref(obj);

    /* defaults only fill fields whose parent exists */
    obj = cr("{}");
    ks_crd_default(schema, obj);
    cr_assert_null(json_object_get(json_object_get(obj, "spec"), "driver"));
    json_decref(obj);
    json_decref(schema);
}

/* ---- the CRD object and ks_crd_sync ------------------------------------------------------- */

static const char CRD[] =
    "{'apiVersion':'apiextensions.k8s.io/v1','kind':'CustomResourceDefinition','metadata':{"
    "'name':'clusterpolicies.nvidia.com'},'spec':{'group':'nvidia.com','scope':'Cluster',"
    "'names':{'plural':'clusterpolicies','kind':'ClusterPolicy','shortNames':['cp'],"
    "'categories':['gpu']},'versions':[{'name':'v1','served':true,'storage':true,"
    "'subresources':{'status':{}},'additionalPrinterColumns':[{'name':'Status','type':'string',"
    "'jsonPath':'.status.state'},{'name':'Age','type':'date','jsonPath':"
    "'.metadata.creationTimestamp'}],'schema':{'openAPIV3Schema':" SCHEMA "}}]}}";

typedef struct env {
    ks_sim sim;
    const ks_rtype *crd_t;
} env;

static void env_init(env *v)
{
    memset(v, 0, sizeof(*v));
    v->sim.store = ks_store_new(0);
    cr_assert_not_null(v->sim.store);
    kc_err e;
    cr_assert_eq(ks_types_register_builtin(v->sim.store, &e), KC_OK, "%s", e.msg);
    ks_store_set_admission(v->sim.store, ks_admit, &v->sim);
    v->crd_t =
        ks_store_type(v->sim.store, "apiextensions.k8s.io", "v1", "customresourcedefinitions");
    cr_assert_not_null(v->crd_t);
}

static void env_free(env *v)
{
    ks_store_free(v->sim.store);
    ks_admit_free(&v->sim);
}

static json_t *create_crd(env *v, const char *text)
{
    json_t *out = NULL;
    kc_err e;
    cr_assert_eq(ks_create(v->sim.store, v->crd_t, NULL, J(text), &out, &e), KC_OK, "%s",
                 ks_admit_message(&e));
    return out;
}

static json_t *condition(const json_t *crd, const char *type)
{
    json_t *conds = json_object_get(json_object_get(crd, "status"), "conditions");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        json_t *c = json_array_get(conds, i);
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return c;
    }
    return NULL;
}

static const char *sv(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

Test(ks_crd, definition_admission)
{
    env v;
    env_init(&v);
    json_t *crd = create_crd(&v, CRD);
    json_t *names = json_object_get(json_object_get(crd, "spec"), "names");
    cr_assert_str_eq(sv(names, "singular"), "clusterpolicy");
    cr_assert_str_eq(sv(names, "listKind"), "ClusterPolicyList");
    cr_assert_str_eq(sv(json_object_get(json_object_get(crd, "spec"), "conversion"), "strategy"),
                     "None");
    /* As created, before the CRD controller runs: the API server's initial status. */
    json_t *st0 = json_object_get(crd, "status");
    cr_assert(json_is_null(json_object_get(st0, "conditions")));
    cr_assert_str_eq(sv(json_object_get(st0, "acceptedNames"), "kind"), "");
    cr_assert_str_eq(sv(json_object_get(st0, "acceptedNames"), "plural"), "");
    cr_assert_eq(json_array_size(json_object_get(st0, "storedVersions")), 1);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(st0, "storedVersions"), 0)),
                     "v1");
    json_decref(crd);

    kc_err e;
    json_t *bad = J("{'metadata':{'name':'wrong.nvidia.com'},'spec':{'group':'nvidia','scope':"
                    "'Global','names':{'plural':'things','kind':'Thing'},'versions':[{'name':"
                    "'v1','served':true,'storage':false}]}}");
    cr_assert_eq(ks_create(v.sim.store, v.crd_t, NULL, bad, NULL, &e), KC_EINVALID);
    cr_assert_str_eq(
        ks_admit_message(&e),
        "CustomResourceDefinition.apiextensions.k8s.io \"wrong.nvidia.com\" is invalid: "
        "[metadata.name: Invalid value: \"wrong.nvidia.com\": must be spec.names.plural+\".\"+"
        "spec.group, spec.group: Invalid value: \"nvidia\": should be a domain with at least one "
        "dot, spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", "
        "\"Namespaced\", spec.versions[0].schema.openAPIV3Schema: Required value: schemas are "
        "required, spec.versions: Invalid value: "
        "[]apiextensions.CustomResourceDefinitionVersion{apiextensions."
        "CustomResourceDefinitionVersion{Name:\"v1\", Served:true, Storage:false, ...}}: must "
        "have exactly one version marked as storage version]");
    bad = J("{'metadata':{'name':'xs.a.b'},'spec':{'group':'a.b','scope':'Cluster','names':{"
            "'plural':'xs','kind':'X'},'versions':[{'name':'v1','served':true,'storage':true,"
            "'schema':{'openAPIV3Schema':{'type':'object','properties':{'spec':{'properties':{"
            "'a':{'type':'strin'}}}}}}}]}}");
    cr_assert_eq(ks_create(v.sim.store, v.crd_t, NULL, bad, NULL, &e), KC_EINVALID);
    cr_assert_str_eq(
        ks_admit_message(&e),
        "CustomResourceDefinition.apiextensions.k8s.io \"xs.a.b\" is invalid: "
        "[spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must "
        "not be empty for specified object fields, "
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].type: "
        "Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", "
        "\"number\", \"object\", \"string\"]");
    env_free(&v);
}

Test(ks_crd, sync_serves_the_crd)
{
    env v;
    env_init(&v);
    ks_store *st = v.sim.store;
    json_t *crd = create_crd(&v, CRD);
    kc_err e;
    cr_assert_null(ks_store_type(st, "nvidia.com", "v1", "clusterpolicies"));
    cr_assert_eq(ks_crd_sync(&v.sim, crd, false, &e), KC_OK, "%s", e.msg);
    json_decref(crd);

    const ks_rtype *t = ks_store_type(st, "nvidia.com", "v1", "clusterpolicies");
    cr_assert_not_null(t);
    cr_assert_eq(ks_store_type(st, "nvidia.com", "v1", "cp"), t);
    cr_assert_str_eq(t->kind, "ClusterPolicy");
    cr_assert_str_eq(t->singular, "clusterpolicy");
    cr_assert_str_eq(t->crd_name, "clusterpolicies.nvidia.com");
    cr_assert(!t->namespaced);
    cr_assert(t->has_status);
    cr_assert(!t->has_scale);
    cr_assert_str_eq(t->categories[0], "gpu");
    cr_assert_null(t->categories[1]);
    cr_assert_not_null(t->schema);
    cr_assert_eq(json_array_size(t->printer_columns), 3);
    json_t *c0 = json_array_get(t->printer_columns, 0);
    cr_assert_str_eq(sv(c0, "name"), "Name");
    cr_assert_str_eq(sv(c0, "format"), "name");
    cr_assert_str_eq(sv(c0, "jsonPath"), ".metadata.name");
    cr_assert_str_eq(sv(json_array_get(t->printer_columns, 1), "jsonPath"), ".status.state");
    cr_assert_str_eq(sv(json_array_get(t->printer_columns, 2), "type"), "date");

    /* the CRD's status */
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, v.crd_t, NULL, "clusterpolicies.nvidia.com", &got, &e), KC_OK);
    json_t *est = condition(got, "Established"), *na = condition(got, "NamesAccepted");
    cr_assert_str_eq(sv(est, "status"), "True");
    cr_assert_str_eq(sv(est, "reason"), "InitialNamesAccepted");
    cr_assert_not_null(sv(est, "lastTransitionTime"));
    cr_assert_str_eq(sv(na, "reason"), "NoConflicts");
    json_t *acc = json_object_get(json_object_get(got, "status"), "acceptedNames");
    cr_assert_str_eq(sv(acc, "plural"), "clusterpolicies");
    cr_assert_str_eq(sv(acc, "listKind"), "ClusterPolicyList");
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(got, "status"), "storedVersions"), 0)),
                     "v1");
    /* a second sync changes nothing, so it writes nothing */
    uint64_t rv = ks_store_rv(st);
    cr_assert_eq(ks_crd_sync(&v.sim, got, false, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(ks_store_rv(st), rv);

    /* custom objects: validated, pruned and defaulted through admission */
    json_t *obj = cr("{'driver':{},'mig':{'strategy':'bogus'}}");
    cr_assert_eq(ks_create(st, t, NULL, obj, NULL, &e), KC_EINVALID);
    cr_assert_str_eq(ks_admit_message(&e),
                     PFX "spec.mig.strategy: Unsupported value: \"bogus\": supported values: "
                         "\"none\", \"single\", \"mixed\"");
    json_t *out = NULL;
    cr_assert_eq(ks_create(st, t, NULL, cr("{'driver':{},'nope':1}"), &out, &e), KC_OK, "%s",
                 e.msg);
    json_t *spec = json_object_get(out, "spec");
    cr_assert_null(json_object_get(spec, "nope"));
    cr_assert(json_is_true(json_object_get(json_object_get(spec, "driver"), "enabled")));
    /* /status writes are checked against the status schema, whose messages name the path from
     * the status root "in body", as the API server's do */
    json_object_set_new(out, "status", J("{'state':5}"));
    cr_assert_eq(ks_update(st, t, NULL, json_incref(out), KS_WRITE_STATUS, NULL, &e), KC_EINVALID);
    cr_assert_str_eq(ks_admit_message(&e),
                     PFX "status.state: Invalid value: \"integer\": state in body must be "
                         "of type string: \"integer\"");
    json_object_set_new(out, "status", J("{'state':'ready','junk':1}"));
    json_t *st_out = NULL;
    cr_assert_eq(ks_update(st, t, NULL, json_incref(out), KS_WRITE_STATUS, &st_out, &e), KC_OK,
                 "%s", e.msg);
    cr_assert_null(json_object_get(json_object_get(st_out, "status"), "junk"));
    json_decref(st_out);
    json_decref(out);

    /* v2 replaces v1: v1 stops being served */
    json_t *upd = json_deep_copy(got);
    json_t *vers = json_object_get(json_object_get(upd, "spec"), "versions");
    json_t *v2 = json_deep_copy(json_array_get(vers, 0));
    json_object_set_new(v2, "name", json_string("v2"));
    json_object_del(v2, "additionalPrinterColumns");
    json_object_set_new(json_array_get(vers, 0), "served", json_false());
    json_object_set_new(json_array_get(vers, 0), "storage", json_false());
    json_array_append_new(vers, v2);
    json_object_del(json_object_get(upd, "metadata"), "resourceVersion");
    cr_assert_eq(ks_update(st, v.crd_t, NULL, upd, KS_WRITE_MAIN, &out, &e), KC_OK, "%s",
                 ks_admit_message(&e));
    cr_assert_eq(ks_crd_sync(&v.sim, out, false, &e), KC_OK, "%s", e.msg);
    json_decref(out);
    cr_assert_null(ks_store_type(st, "nvidia.com", "v1", "clusterpolicies"));
    const ks_rtype *t2 = ks_store_type(st, "nvidia.com", "v2", "clusterpolicies");
    cr_assert_not_null(t2);
    /* without additionalPrinterColumns: Name and Age */
    cr_assert_eq(json_array_size(t2->printer_columns), 2);
    cr_assert_str_eq(sv(json_array_get(t2->printer_columns, 1), "name"), "Age");
    json_decref(got);
    cr_assert_eq(ks_get(st, v.crd_t, NULL, "clusterpolicies.nvidia.com", &got, &e), KC_OK);
    json_t *stored = json_object_get(json_object_get(got, "status"), "storedVersions");
    cr_assert_eq(json_array_size(stored), 2); /* v1 objects may still exist in storage */

    /* deletion unserves every version */
    cr_assert_eq(ks_crd_sync(&v.sim, got, true, &e), KC_OK, "%s", e.msg);
    cr_assert_null(ks_store_type(st, "nvidia.com", "v2", "clusterpolicies"));
    json_decref(got);
    env_free(&v);
}

Test(ks_crd, plural_conflict_with_a_builtin)
{
    env v;
    env_init(&v);
    json_t *crd = create_crd(
        &v, "{'metadata':{'name':'roles.rbac.authorization.k8s.io'},'spec':{'group':"
            "'rbac.authorization.k8s.io','scope':'Namespaced','names':{'plural':'roles','kind':"
            "'Role'},'versions':[{'name':'v1','served':true,'storage':true,'schema':{"
            "'openAPIV3Schema':{'type':'object'}}}]}}");
    kc_err e;
    cr_assert_eq(ks_crd_sync(&v.sim, crd, false, &e), KC_OK, "%s", e.msg);
    const ks_rtype *t = ks_store_type(v.sim.store, "rbac.authorization.k8s.io", "v1", "roles");
    cr_assert_not_null(t);
    cr_assert_null(t->crd_name, "the built-in type stays");
    json_t *got = NULL;
    cr_assert_eq(ks_get(v.sim.store, v.crd_t, NULL, "roles.rbac.authorization.k8s.io", &got, &e),
                 KC_OK);
    json_t *na = condition(got, "NamesAccepted");
    cr_assert_str_eq(sv(na, "status"), "False");
    cr_assert_str_eq(sv(na, "reason"), "PluralConflict");
    cr_assert_str_eq(sv(na, "message"), "\"roles\" is already in use");
    cr_assert_str_eq(sv(condition(got, "Established"), "status"), "False");
    json_decref(got);
    json_decref(crd);
    /* arguments */
    cr_assert_eq(ks_crd_sync(NULL, NULL, false, &e), KC_EARG);
    env_free(&v);
}

/* Whether value passes {type: string, pattern: pattern}. */
static bool matches(const char *pattern, const char *value)
{
    json_t *schema = json_pack("{s:s, s:{s:{s:s, s:s}}}", "type", "object", "properties", "v",
                               "type", "string", "pattern", pattern);
    json_t *obj = json_pack("{s:s}", "v", value);
    kc_err e;
    kc_code rc = ks_crd_validate(schema, obj, &e);
    cr_assert(rc == KC_OK || rc == KC_EINVALID);
    json_decref(schema);
    json_decref(obj);
    return rc == KC_OK;
}

Test(ks_crd, patterns_in_go_syntax)
{
    cr_assert(matches("^(?:ab)+$", "abab"));
    cr_assert(!matches("^(?:ab)+$", "aba"));
    cr_assert(matches("^[\\w.-]+$", "a_b.c-d"));
    cr_assert(!matches("^[\\w.-]+$", "a b"));
    cr_assert(matches("^a{,2}$", "aa"));
    cr_assert(!matches("^a{,2}$", "aaa"));
    cr_assert(matches("^\\d{3}\\s\\S$", "123 x"));
    cr_assert(!matches("^\\d{3}\\s\\S$", "12 x"));
    cr_assert(matches("^a\\.b$", "a.b"));
    cr_assert(!matches("^a\\.b$", "axb"));
    cr_assert(matches("^x{$", "x{"));
    cr_assert(!matches("^x{$", "x"));
    cr_assert(matches("^[]a]+$", "]a"));
    cr_assert(matches("^.*?z$", "abcz"));
    cr_assert(!matches("^\\D+$", "a1"));
    cr_assert(matches("\\Aab\\z", "ab"));
    /* not enforced: what POSIX EREs cannot say, or RE2 rejects */
    cr_assert(matches("(?i)abc", "zzz"));
    cr_assert(matches("a**", "zzz"));
    cr_assert(matches("\\bword\\b", "zzz"));
    cr_assert(matches("(a)\\1", "zzz"));
    cr_assert(matches("^(a{100}){100}$", "zzz"));
    cr_assert(matches("[a-", "zzz"));
}
