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
