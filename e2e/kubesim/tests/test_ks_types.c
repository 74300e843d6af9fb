/* Tests for ks_types_register_builtin: every built-in type the clients use, with the names,
 * scope, subresources, categories and Table columns of a real API server, and printer columns
 * that follow the convention documented in ks_types.h. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ks_sim.h"
#include "ks_types.h"

static ks_store *st;

static void setup(void)
{
    st = ks_store_new(0);
    cr_assert_not_null(st);
    kc_err e;
    cr_assert_eq(ks_types_register_builtin(st, &e), KC_OK, "%s", e.msg);
}

static void teardown(void)
{
    ks_store_free(st);
}

TestSuite(ks_types, .init = setup, .fini = teardown);

typedef struct want {
    const char *group, *resource, *kind, *short_name;
    bool namespaced, status, scale, all;
} want;

static const want WANT[] = {
    {"", "namespaces", "Namespace", "ns", false, true, false, false},
    {"", "nodes", "Node", "no", false, true, false, false},
    {"", "pods", "Pod", "po", true, true, false, true},
    {"", "services", "Service", "svc", true, true, false, true},
    {"", "endpoints", "Endpoints", "ep", true, false, false, false},
    {"", "configmaps", "ConfigMap", "cm", true, false, false, false},
    {"", "secrets", "Secret", NULL, true, false, false, false},
    {"", "serviceaccounts", "ServiceAccount", "sa", true, false, false, false},
    {"", "events", "Event", "ev", true, false, false, false},
    {"", "persistentvolumeclaims", "PersistentVolumeClaim", "pvc", true, true, false, false},
    {"apps", "daemonsets", "DaemonSet", "ds", true, true, false, true},
    {"apps", "deployments", "Deployment", "deploy", true, true, true, true},
    {"apps", "replicasets", "ReplicaSet", "rs", true, true, true, true},
    {"apps", "statefulsets", "StatefulSet", "sts", true, true, true, true},
    {"apps", "controllerrevisions", "ControllerRevision", NULL, true, false, false, false},
    {"batch", "jobs", "Job", NULL, true, true, false, true},
    {"coordination.k8s.io", "leases", "Lease", NULL, true, false, false, false},
    {"rbac.authorization.k8s.io", "roles", "Role", NULL, true, false, false, false},
    {"rbac.authorization.k8s.io", "rolebindings", "RoleBinding", NULL, true, false, false, false},
    {"rbac.authorization.k8s.io", "clusterroles", "ClusterRole", NULL, false, false, false, false},
    {"rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", NULL, false, false,
     false, false},
    {"scheduling.k8s.io", "priorityclasses", "PriorityClass", "pc", false, false, false, false},
    {"node.k8s.io", "runtimeclasses", "RuntimeClass", NULL, false, false, false, false},
    {"policy", "poddisruptionbudgets", "PodDisruptionBudget", "pdb", true, true, false, false},
    {"apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", "crd", false,
     true, false, false},
    {"events.k8s.io", "events", "Event", "ev", true, false, false, false},
};

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

Test(ks_types, names_scope_and_subresources)
{
    for (size_t i = 0; i < sizeof(WANT) / sizeof(WANT[0]); i++) {
        const want *w = &WANT[i];
        const ks_rtype *t = ks_store_type(st, w->group, "v1", w->resource);
        cr_assert_not_null(t, "%s/%s", w->group, w->resource);
        cr_assert_str_eq(t->kind, w->kind);
        cr_assert_str_eq(t->version, "v1");
        cr_assert_null(t->crd_name);
        cr_assert_eq(t->namespaced, w->namespaced, "%s", w->resource);
        cr_assert_eq(t->has_status, w->status, "%s", w->resource);
        cr_assert_eq(t->has_scale, w->scale, "%s", w->resource);
        cr_assert_eq(in_list(t->categories, "all"), w->all, "%s", w->resource);
        /* singular is the lower-case kind, and both find the type */
        char lower[64];
        size_t k = 0;
        for (; w->kind[k]; k++)
            lower[k] =
                (char)(w->kind[k] >= 'A' && w->kind[k] <= 'Z' ? w->kind[k] + 32 : w->kind[k]);
        lower[k] = '\0';
        cr_assert_str_eq(t->singular, lower);
        cr_assert_eq(ks_store_type(st, w->group, "v1", lower), t);
        if (w->short_name) {
            cr_assert(in_list(t->short_names, w->short_name), "%s", w->resource);
            cr_assert_eq(ks_store_type(st, w->group, NULL, w->short_name), t);
        }
        cr_assert_eq(ks_store_type_by_kind(st, w->group, "v1", w->kind), t);
    }
    const ks_rtype *crd = ks_store_type(st, "apiextensions.k8s.io", "v1", "crds");
    cr_assert_not_null(crd);
    cr_assert(in_list(crd->categories, "api-extensions"));
    /* ServiceMonitor comes from a CRD, never built in */
    cr_assert_null(ks_store_type(st, "monitoring.coreos.com", NULL, "servicemonitors"));
}

static const char *col_name(const ks_rtype *t, size_t i)
{
    return json_string_value(json_object_get(json_array_get(t->printer_columns, i), "name"));
}

static void assert_columns(const char *group, const char *resource, const char *const *names,
                           int wide_from)
{
    const ks_rtype *t = ks_store_type(st, group, "v1", resource);
    cr_assert_not_null(t);
    size_t n = 0;
    while (names[n])
        n++;
    cr_assert_eq(json_array_size(t->printer_columns), n, "%s: %zu columns", resource,
                 json_array_size(t->printer_columns));
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(col_name(t, i), names[i], "%s column %zu", resource, i);
        json_int_t prio =
            json_integer_value(json_object_get(json_array_get(t->printer_columns, i), "priority"));
        cr_assert_eq(prio, wide_from >= 0 && (int)i >= wide_from ? 1 : 0, "%s %s", resource,
                     names[i]);
    }
}

Test(ks_types, kubectl_get_columns)
{
    assert_columns("", "pods",
                   (const char *const[]){"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                                         "Nominated Node", "Readiness Gates", NULL},
                   5);
    assert_columns("", "nodes",
                   (const char *const[]){"Name", "Status", "Roles", "Age", "Version", "Internal-IP",
                                         "External-IP", "OS-Image", "Kernel-Version",
                                         "Container-Runtime", NULL},
                   5);
    assert_columns("", "services",
                   (const char *const[]){"Name", "Type", "Cluster-IP", "External-IP", "Port(s)",
                                         "Age", "Selector", NULL},
                   6);
    assert_columns("apps", "deployments",
                   (const char *const[]){"Name", "Ready", "Up-to-date", "Available", "Age",
                                         "Containers", "Images", "Selector", NULL},
                   5);
    assert_columns("apps", "daemonsets",
                   (const char *const[]){"Name", "Desired", "Current", "Ready", "Up-to-date",
                                         "Available", "Node Selector", "Age", "Containers",
                                         "Images", "Selector", NULL},
                   8);
    assert_columns("", "namespaces", (const char *const[]){"Name", "Status", "Age", NULL}, -1);
    assert_columns("", "secrets", (const char *const[]){"Name", "Type", "Data", "Age", NULL}, -1);
    assert_columns("apiextensions.k8s.io", "customresourcedefinitions",
                   (const char *const[]){"Name", "Created At", NULL}, -1);
    /* events have no leading Name: it is a wide column at the end */
    const ks_rtype *ev = ks_store_type(st, "", "v1", "events");
    cr_assert_str_eq(col_name(ev, 0), "Last Seen");
    cr_assert_str_eq(col_name(ev, json_array_size(ev->printer_columns) - 1), "Name");
}

/* The computed names ks_types.h documents. */
static bool documented(const char *path)
{
    static const char *const exact[] = {"@age",
                                        "@created",
                                        "@owner",
                                        "@pod.ready",
                                        "@pod.status",
                                        "@pod.restarts",
                                        "@pod.readinessgates",
                                        "@node.status",
                                        "@node.roles",
                                        "@node.internalip",
                                        "@node.externalip",
                                        "@svc.externalip",
                                        "@svc.ports",
                                        "@endpoints",
                                        "@event.lastseen",
                                        "@event.firstseen",
                                        "@event.object",
                                        "@event.subobject",
                                        "@event.source",
                                        "@event.count",
                                        "@binding.role",
                                        "@job.status",
                                        "@job.completions",
                                        "@job.duration",
                                        "@pvc.accessmodes",
                                        "@quota.request",
                                        "@quota.limit",
                                        NULL};
    static const char *const prefixed[] = {"@map:.",   "@selector:.",        "@join:.", "@count:.",
                                           "@ratio:.", "@binding.subjects:", NULL};
    for (size_t i = 0; exact[i]; i++)
        if (strcmp(path, exact[i]) == 0)
            return true;
    for (size_t i = 0; prefixed[i]; i++)
        if (strncmp(path, prefixed[i], strlen(prefixed[i])) == 0)
            return true;
    return false;
}

Test(ks_types, columns_follow_the_convention)
{
    const ks_rtype **types = NULL;
    size_t n = ks_store_types(st, &types);
    cr_assert_geq(n, sizeof(WANT) / sizeof(WANT[0]));
    static const char *const col_types[] = {"string", "integer", "number", "boolean", "date", NULL};
    for (size_t i = 0; i < n; i++) {
        const ks_rtype *t = types[i];
        cr_assert(json_array_size(t->printer_columns) >= 2, "%s", t->resource);
        bool has_name = false;
        for (size_t c = 0; c < json_array_size(t->printer_columns); c++) {
            json_t *col = json_array_get(t->printer_columns, c);
            const char *path = json_string_value(json_object_get(col, "jsonPath"));
            const char *type = json_string_value(json_object_get(col, "type"));
            cr_assert_not_null(path);
            cr_assert(in_list(col_types, type), "%s: type %s", t->resource, type);
            cr_assert(json_is_string(json_object_get(col, "format")));
            cr_assert(json_is_string(json_object_get(col, "description")));
            cr_assert(json_is_integer(json_object_get(col, "priority")));
            cr_assert(path[0] == '.' || documented(path), "%s: undocumented %s", t->resource, path);
            if (strcmp(path, ".metadata.name") == 0) {
                has_name = true;
                cr_assert_str_eq(json_string_value(json_object_get(col, "format")), "name");
            }
            json_t *d = json_object_get(col, "default");
            if (d && strcmp(type, "integer") == 0)
                cr_assert(json_is_integer(d));
        }
        cr_assert(has_name, "%s has no Name column", t->resource);
    }
    free(types);
    /* registering again replaces rather than duplicates */
    uint64_t gen = ks_store_types_generation(st);
    kc_err e;
    cr_assert_eq(ks_types_register_builtin(st, &e), KC_OK);
    const ks_rtype **again = NULL;
    cr_assert_eq(ks_store_types(st, &again), n);
    free(again);
    cr_assert_geq(ks_store_types_generation(st), gen);
    cr_assert_eq(ks_types_register_builtin(NULL, &e), KC_EARG);
}

/* ---- metadata.generation ---- */

static json_t *create(const char *group, const char *resource, const char *ns, const char *text)
{
    const ks_rtype *t = ks_store_type(st, group, "v1", resource);
    cr_assert_not_null(t, "%s", resource);
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je), *out = NULL;
    cr_assert_not_null(obj, "%s", je.text);
    kc_err e = {0};
    cr_assert_eq(ks_create(st, t, ns, obj, &out, &e), KC_OK, "%s: %s", resource, e.msg);
    return out;
}

static json_t *meta_generation(const json_t *o)
{
    return json_object_get(json_object_get(o, "metadata"), "generation");
}

Test(ks_types, generation_only_where_the_api_server_keeps_it)
{
    static const struct {
        const char *group, *resource, *ns;
    } without[] = {
        {"", "configmaps", "default"},
        {"", "secrets", "default"},
        {"", "pods", "default"},
        {"", "nodes", NULL},
        {"", "namespaces", NULL},
        {"", "services", "default"},
        {"", "endpoints", "default"},
        {"", "serviceaccounts", "default"},
        {"", "events", "default"},
        {"coordination.k8s.io", "leases", "default"},
        {"rbac.authorization.k8s.io", "roles", "default"},
        {"rbac.authorization.k8s.io", "clusterrolebindings", NULL},
        {"scheduling.k8s.io", "priorityclasses", NULL},
        {"apps", "controllerrevisions", "default"},
    };
    for (size_t i = 0; i < sizeof(without) / sizeof(without[0]); i++) {
        /* Even a client-sent generation is dropped. */
        json_t *o = create(without[i].group, without[i].resource, without[i].ns,
                           "{\"metadata\":{\"name\":\"x\",\"generation\":5},\"spec\":{\"a\":1}}");
        cr_assert_null(meta_generation(o), "%s has no generation", without[i].resource);
        const ks_rtype *t = ks_store_type(st, without[i].group, "v1", without[i].resource);
        cr_assert(t->no_generation, "%s", without[i].resource);
        /* A spec change does not bring one either. */
        json_object_set_new(json_object_get(o, "spec") ? json_object_get(o, "spec") : o, "b",
                            json_integer(2));
        json_t *u = NULL;
        kc_err e = {0};
        cr_assert_eq(ks_update(st, t, without[i].ns, o, KS_WRITE_MAIN, &u, &e), KC_OK, "%s: %s",
                     without[i].resource, e.msg);
        cr_assert_null(meta_generation(u), "%s after an update", without[i].resource);
        json_decref(u);
    }
    /* The namespaces a store starts with have none either. */
    json_t *def = NULL;
    cr_assert_eq(ks_get(st, ks_store_type(st, "", "v1", "namespaces"), NULL, "default", &def, NULL),
                 KC_OK);
    cr_assert_null(meta_generation(def));
    json_decref(def);

    static const struct {
        const char *group, *resource;
    } with[] = {
        {"apps", "deployments"},  {"apps", "replicasets"}, {"apps", "daemonsets"},
        {"apps", "statefulsets"}, {"batch", "jobs"},       {"policy", "poddisruptionbudgets"},
    };
    for (size_t i = 0; i < sizeof(with) / sizeof(with[0]); i++) {
        json_t *o = create(with[i].group, with[i].resource, "default",
                           "{\"metadata\":{\"name\":\"x\",\"generation\":5},\"spec\":{\"a\":1}}");
        cr_assert_eq(json_integer_value(meta_generation(o)), 1, "%s", with[i].resource);
        const ks_rtype *t = ks_store_type(st, with[i].group, "v1", with[i].resource);
        cr_assert_not(t->no_generation);
        json_object_set_new(json_object_get(o, "spec"), "a", json_integer(2));
        json_t *u = NULL;
        cr_assert_eq(ks_update(st, t, "default", o, KS_WRITE_MAIN, &u, NULL), KC_OK);
        cr_assert_eq(json_integer_value(meta_generation(u)), 2, "%s", with[i].resource);
        json_decref(u);
    }
    json_t *crd = create("apiextensions.k8s.io", "customresourcedefinitions", NULL,
                         "{\"metadata\":{\"name\":\"things.example.com\"},\"spec\":{}}");
    cr_assert_eq(json_integer_value(meta_generation(crd)), 1);
    json_decref(crd);
    /* Types registered without the flag (custom resources) keep it. */
    ks_rtype cr = {.group = "example.com", .version = "v1", .resource = "things", .kind = "Thing"};
    cr_assert_not_null(ks_store_register(st, &cr));
    json_t *thing = create("example.com", "things", NULL, "{\"metadata\":{\"name\":\"t\"}}");
    cr_assert_eq(json_integer_value(meta_generation(thing)), 1);
    json_decref(thing);
}
