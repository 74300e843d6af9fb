/* Tests for ks_auth / ks_rbac: admin and ServiceAccount tokens, RBAC over Roles, ClusterRoles and
 * their bindings (resourceNames, subresources, wildcards, namespace limits), deny reasons and the
 * decision log. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ks_auth.h"
#include "ks_pki.h"
#include "ks_sim.h"

static char tdir[64];
static ks_sim sim;

static void setup(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/ksauth.XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
    memset(&sim, 0, sizeof(sim));
    sim.opts.dir = tdir;
    sim.opts.rbac = true;
    sim.store = ks_store_new(0);
    cr_assert_not_null(sim.store);
    kc_err e = {0};
    cr_assert_eq(ks_types_register_builtin(sim.store, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(ks_auth_new(&sim, &e), KC_OK, "%s", e.msg);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void teardown(void)
{
    ks_auth_free(&sim);
    ks_store_free(sim.store);
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(auth, .init = setup, .fini = teardown);
TestSuite(rbac, .init = setup, .fini = teardown);

static void ensure_ns(const char *ns)
{
    const ks_rtype *t = ks_store_type(sim.store, "", "v1", "namespaces");
    cr_assert_not_null(t);
    json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                          "metadata", "name", ns);
    kc_code rc = ks_create(sim.store, t, NULL, o, NULL, NULL);
    cr_assert(rc == KC_OK || rc == KC_EALREADYEXISTS);
}

/* Creates an rbac.authorization.k8s.io object from JSON text. */
static void rbac_create(const char *resource, const char *ns, const char *text)
{
    const ks_rtype *t = ks_store_type(sim.store, "rbac.authorization.k8s.io", "v1", resource);
    cr_assert_not_null(t, "type %s", resource);
    if (ns)
        ensure_ns(ns);
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    cr_assert_not_null(o, "bad test JSON: %s", je.text);
    kc_err e = {0};
    cr_assert_eq(ks_create(sim.store, t, ns, o, NULL, &e), KC_OK, "%s", e.msg);
}

static void rbac_delete(const char *resource, const char *ns, const char *name)
{
    const ks_rtype *t = ks_store_type(sim.store, "rbac.authorization.k8s.io", "v1", resource);
    kc_err e = {0};
    cr_assert_eq(ks_delete(sim.store, t, ns, name, NULL, NULL, &e), KC_OK, "%s", e.msg);
}

static ks_user sa_user(const char *ns, const char *name)
{
    char *tok = ks_auth_sa_token(&sim, ns, name);
    cr_assert_not_null(tok);
    char hdr[300];
    snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
    free(tok);
    ks_user u;
    kc_err e = {0};
    cr_assert_eq(ks_auth_authenticate(&sim, hdr, &u, &e), KC_OK, "%s", e.msg);
    return u;
}

static bool allowed(const ks_user *u, const char *verb, const char *group, const char *res,
                    const char *sub, const char *ns, const char *name)
{
    char reason[1024];
    return ks_auth_allowed(&sim, u, verb, group, res, sub, ns, name, reason, sizeof(reason));
}

/* ---- authentication ---- */

Test(auth, admin_token_is_random_hex_written_to_the_dir)
{
    const char *tok = ks_auth_admin_token(&sim);
    cr_assert_eq(strlen(tok), 32);
    cr_assert_eq(strspn(tok, "0123456789abcdef"), 32);
    char path[128], *file = NULL;
    snprintf(path, sizeof(path), "%s/admin.token", tdir);
    cr_assert_eq(ks_pki_read_file(path, &file, NULL, NULL), KC_OK);
    cr_assert_str_eq(file, tok);
    free(file);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    /* A second simulator (a restart) gets another token. */
    ks_sim other = {.store = sim.store};
    cr_assert_eq(ks_auth_new(&other, NULL), KC_OK);
    cr_assert_str_neq(ks_auth_admin_token(&other), tok);
    ks_auth_free(&other);
}

Test(auth, admin_bearer_authenticates_as_a_master)
{
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "bearer   %s", ks_auth_admin_token(&sim));
    ks_user u;
    cr_assert_eq(ks_auth_authenticate(&sim, hdr, &u, NULL), KC_OK);
    cr_assert_str_eq(u.name, "admin");
    cr_assert(u.admin);
    cr_assert_str_eq(u.groups[0], "system:masters");
    cr_assert(allowed(&u, "delete", "", "nodes", NULL, NULL, "n1"));
}

Test(auth, bad_credentials_are_unauthorized)
{
    ks_user u;
    kc_err e = {0};
    cr_assert_eq(ks_auth_authenticate(&sim, NULL, &u, &e), KC_EUNAUTHORIZED);
    cr_assert_str_eq(e.msg, "Unauthorized");
    cr_assert_eq(ks_auth_authenticate(&sim, "Bearer nope", &u, NULL), KC_EUNAUTHORIZED);
    cr_assert_eq(ks_auth_authenticate(&sim, "Bearer ", &u, NULL), KC_EUNAUTHORIZED);
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Basic %s", ks_auth_admin_token(&sim));
    cr_assert_eq(ks_auth_authenticate(&sim, hdr, &u, NULL), KC_EUNAUTHORIZED);
    /* A prefix of the admin token is not the admin token. */
    snprintf(hdr, sizeof(hdr), "Bearer %.31s", ks_auth_admin_token(&sim));
    cr_assert_eq(ks_auth_authenticate(&sim, hdr, &u, NULL), KC_EUNAUTHORIZED);
}

Test(auth, service_account_tokens_are_stable_per_account)
{
    char *a1 = ks_auth_sa_token(&sim, "ns1", "op");
    char *a2 = ks_auth_sa_token(&sim, "ns1", "op");
    char *b = ks_auth_sa_token(&sim, "ns2", "op");
    cr_assert_str_eq(a1, a2);
    cr_assert_str_neq(a1, b);
    cr_assert_null(ks_auth_sa_token(&sim, "", "op"));
    ks_user u = sa_user("ns1", "op");
    cr_assert_str_eq(u.name, "system:serviceaccount:ns1:op");
    cr_assert_not(u.admin);
    cr_assert_str_eq(u.groups[0], "system:serviceaccounts");
    cr_assert_str_eq(u.groups[1], "system:serviceaccounts:ns1");
    cr_assert_str_eq(u.groups[2], "system:authenticated");
    free(a1);
    free(a2);
    free(b);
}

Test(auth, long_namespace_group_is_whole_and_bindable)
{
    /* The longest namespace (a 63-character DNS label): its group must not be cut, or a binding
     * to Group system:serviceaccounts:<ns> would never match. */
    char ns[64], group[128];
    memset(ns, 'n', 63);
    ns[0] = 'a';
    ns[62] = 'z';
    ns[63] = '\0';
    snprintf(group, sizeof(group), "system:serviceaccounts:%s", ns);
    ks_user u = sa_user(ns, "op");
    cr_assert_str_eq(u.groups[1], group);
    cr_assert_eq(strlen(u.groups[1]), 86);
    cr_assert_not(allowed(&u, "list", "", "pods", NULL, ns, NULL));
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":[\"\"],"
             "\"resources\":[\"pods\"],\"verbs\":[\"list\"]}]}");
    rbac_create("roles", ns, text);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":"
             "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"r\"},"
             "\"subjects\":[{\"kind\":\"Group\",\"apiGroup\":\"rbac.authorization.k8s.io\","
             "\"name\":\"%s\"}]}",
             group);
    rbac_create("rolebindings", ns, text);
    cr_assert(allowed(&u, "list", "", "pods", NULL, ns, NULL), "bound through the full group");
    /* A group cut at 63 characters (the old limit) does not match. */
    ks_user cut = u;
    cut.groups[1][63] = '\0';
    cr_assert_not(allowed(&cut, "list", "", "pods", NULL, ns, NULL));
}

Test(auth, rbac_off_allows_and_records)
{
    sim.opts.rbac = false;
    ks_user u = sa_user("ns1", "op");
    cr_assert(allowed(&u, "list", "", "pods", NULL, "ns1", NULL));
    cr_assert(allowed(&u, "list", "", "pods", NULL, "ns1", NULL));
    json_t *d = ks_auth_decisions(&sim);
    cr_assert_eq(json_array_size(d), 1);
    json_t *e = json_array_get(d, 0);
    cr_assert_str_eq(json_string_value(json_object_get(e, "user")), "system:serviceaccount:ns1:op");
    cr_assert_str_eq(json_string_value(json_object_get(e, "verb")), "list");
    cr_assert_str_eq(json_string_value(json_object_get(e, "namespace")), "ns1");
    cr_assert(json_is_true(json_object_get(e, "allowed")));
    cr_assert_eq(json_integer_value(json_object_get(e, "count")), 2);
    json_decref(d);
}

/* ---- RBAC ---- */

Test(rbac, nothing_bound_is_denied_with_the_api_servers_message)
{
    ks_user u = sa_user("ns1", "op");
    char reason[512];
    cr_assert_not(
        ks_auth_allowed(&sim, &u, "list", "", "pods", NULL, "ns1", NULL, reason, sizeof(reason)));
    cr_assert_str_eq(reason, "User \"system:serviceaccount:ns1:op\" cannot list resource \"pods\" "
                             "in API group \"\" in the namespace \"ns1\"");
    cr_assert_not(ks_auth_allowed(&sim, &u, "get", "apps", "deployments", "scale", NULL, NULL,
                                  reason, sizeof(reason)));
    cr_assert_str_eq(reason, "User \"system:serviceaccount:ns1:op\" cannot get resource "
                             "\"deployments/scale\" in API group \"apps\" at the cluster scope");
}

Test(rbac, role_binding_grants_in_its_namespace_only)
{
    rbac_create("roles", "ns1",
                "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":[\"\"],"
                "\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\"]}]}");
    rbac_create("rolebindings", "ns1",
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":"
                "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"r\"},"
                "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\"}]}");
    ks_user u = sa_user("ns1", "op");
    ks_user other = sa_user("ns2", "op");
    cr_assert(allowed(&u, "list", "", "configmaps", NULL, "ns1", NULL));
    cr_assert(allowed(&u, "get", "", "configmaps", NULL, "ns1", "x"));
    cr_assert_not(allowed(&u, "delete", "", "configmaps", NULL, "ns1", "x"));
    cr_assert_not(allowed(&u, "list", "", "configmaps", NULL, "ns2", NULL));
    cr_assert_not(allowed(&u, "list", "", "configmaps", NULL, NULL, NULL));
    cr_assert_not(allowed(&u, "list", "", "secrets", NULL, "ns1", NULL));
    cr_assert_not(allowed(&u, "list", "apps", "configmaps", NULL, "ns1", NULL));
    /* The subject's namespace defaulted to the binding's: ns2's "op" is someone else. */
    cr_assert_not(allowed(&other, "list", "", "configmaps", NULL, "ns1", NULL));
}

Test(rbac, role_binding_to_a_cluster_role_is_namespace_limited)
{
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"reader\"},\"rules\":[{\"apiGroups\":[\"*\"],"
                "\"resources\":[\"*\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}");
    rbac_create("rolebindings", "ns1",
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                "\"name\":\"reader\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\","
                "\"namespace\":\"ns1\"}]}");
    ks_user u = sa_user("ns1", "op");
    cr_assert(allowed(&u, "watch", "apps", "daemonsets", NULL, "ns1", NULL));
    cr_assert_not(allowed(&u, "watch", "apps", "daemonsets", NULL, "ns2", NULL));
    cr_assert_not(allowed(&u, "list", "", "nodes", NULL, NULL, NULL));
    cr_assert_not(allowed(&u, "create", "", "pods", NULL, "ns1", NULL));
}

Test(rbac, cluster_role_binding_grants_everywhere)
{
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"nodes\"},\"rules\":[{\"apiGroups\":[\"\"],"
                "\"resources\":[\"nodes\",\"pods\"],\"verbs\":[\"*\"]}]}");
    rbac_create("clusterrolebindings", NULL,
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                "\"name\":\"nodes\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\","
                "\"namespace\":\"ns1\"}]}");
    ks_user u = sa_user("ns1", "op");
    cr_assert(allowed(&u, "patch", "", "nodes", NULL, NULL, "n1"));
    cr_assert(allowed(&u, "deletecollection", "", "pods", NULL, "anywhere", NULL));
    /* "pods" alone does not cover a subresource. */
    cr_assert_not(allowed(&u, "get", "", "pods", "log", "ns1", "p"));
    cr_assert_not(allowed(&u, "patch", "", "pods", "status", "ns1", "p"));
}

Test(rbac, resource_names_limit_named_requests)
{
    rbac_create(
        "roles", "ns1",
        "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":[\"coordination.k8s.io\"],"
        "\"resources\":[\"leases\"],\"resourceNames\":[\"lock\"],\"verbs\":[\"get\","
        "\"update\"]}]}");
    rbac_create("rolebindings", "ns1",
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"Role\",\"name\":\"r\"},"
                "\"subjects\":[{\"kind\":\"User\",\"name\":\"system:serviceaccount:ns1:op\"}]}");
    ks_user u = sa_user("ns1", "op");
    cr_assert(allowed(&u, "update", "coordination.k8s.io", "leases", NULL, "ns1", "lock"));
    cr_assert_not(allowed(&u, "update", "coordination.k8s.io", "leases", NULL, "ns1", "other"));
    cr_assert_not(allowed(&u, "list", "coordination.k8s.io", "leases", NULL, "ns1", NULL));
    cr_assert_not(allowed(&u, "get", "coordination.k8s.io", "leases", NULL, "ns1", ""));
}

Test(rbac, subresource_and_wildcard_forms)
{
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"c\"},\"rules\":["
                "{\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"],\"verbs\":[\"get\"]},"
                "{\"apiGroups\":[\"apps\"],\"resources\":[\"*/scale\"],\"verbs\":[\"update\"]},"
                "{\"apiGroups\":[\"nvidia.com\"],\"resources\":[\"*\"],\"verbs\":[\"*\"]}]}");
    rbac_create("clusterrolebindings", NULL,
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                "\"name\":\"c\"},\"subjects\":[{\"kind\":\"Group\",\"name\":"
                "\"system:serviceaccounts:ns1\"}]}");
    ks_user u = sa_user("ns1", "anyone");
    cr_assert(allowed(&u, "get", "", "pods", "log", "ns1", "p"));
    cr_assert_not(allowed(&u, "get", "", "pods", NULL, "ns1", "p"));
    cr_assert(allowed(&u, "update", "apps", "deployments", "scale", "ns1", "d"));
    cr_assert(allowed(&u, "update", "apps", "replicasets", "scale", "ns1", "d"));
    cr_assert_not(allowed(&u, "update", "apps", "deployments", NULL, "ns1", "d"));
    cr_assert_not(allowed(&u, "update", "apps", "deployments", "status", "ns1", "d"));
    cr_assert(allowed(&u, "delete", "nvidia.com", "clusterpolicies", NULL, NULL, "x"));
    cr_assert(allowed(&u, "patch", "nvidia.com", "clusterpolicies", "status", NULL, "x"));
    /* The group binding does not reach another namespace's accounts. */
    ks_user v = sa_user("ns2", "anyone");
    cr_assert_not(allowed(&v, "get", "", "pods", "log", "ns1", "p"));
}

Test(rbac, rule_matching_unit)
{
    json_t *rule = json_pack("{s:[s], s:[s,s], s:[s]}", "apiGroups", "", "resources", "pods",
                             "*/status", "verbs", "get");
    cr_assert(ks_rbac_rule_allows(rule, "get", "", "pods", NULL, "x"));
    cr_assert(ks_rbac_rule_allows(rule, "get", "", "nodes", "status", "x"));
    cr_assert_not(ks_rbac_rule_allows(rule, "get", "", "nodes", NULL, "x"));
    cr_assert_not(ks_rbac_rule_allows(rule, "get", "", "nodes", "proxy", "x"));
    cr_assert_not(ks_rbac_rule_allows(rule, "list", "", "pods", NULL, NULL));
    cr_assert_not(ks_rbac_rule_allows(rule, "get", "apps", "pods", NULL, NULL));
    cr_assert_not(ks_rbac_rule_allows(NULL, "get", "", "pods", NULL, NULL));
    json_decref(rule);
    /* A nonResourceURLs rule grants no resource. */
    rule = json_pack("{s:[s], s:[s]}", "nonResourceURLs", "*", "verbs", "*");
    cr_assert_not(ks_rbac_rule_allows(rule, "get", "", "pods", NULL, NULL));
    json_decref(rule);
}

Test(rbac, missing_role_is_named_in_the_reason)
{
    rbac_create("rolebindings", "ns1",
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"Role\",\"name\":"
                "\"gone\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\"}]}");
    ks_user u = sa_user("ns1", "op");
    char reason[1024];
    cr_assert_not(
        ks_auth_allowed(&sim, &u, "get", "", "pods", NULL, "ns1", "p", reason, sizeof(reason)));
    cr_assert_not_null(strstr(reason, ": RBAC: role.rbac.authorization.k8s.io \"gone\" not found"),
                       "%s", reason);
}

Test(rbac, changes_apply_to_the_next_request)
{
    ks_user u = sa_user("ns1", "op");
    cr_assert_not(allowed(&u, "list", "", "nodes", NULL, NULL, NULL));
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"n\"},\"rules\":[{\"apiGroups\":[\"\"],"
                "\"resources\":[\"nodes\"],\"verbs\":[\"list\"]}]}");
    cr_assert_not(allowed(&u, "list", "", "nodes", NULL, NULL, NULL));
    rbac_create("clusterrolebindings", NULL,
                "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                "\"name\":\"n\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\","
                "\"namespace\":\"ns1\"}]}");
    cr_assert(allowed(&u, "list", "", "nodes", NULL, NULL, NULL));
    rbac_delete("clusterrolebindings", NULL, "b");
    cr_assert_not(allowed(&u, "list", "", "nodes", NULL, NULL, NULL));
}

Test(rbac, bootstrap_cluster_admin_and_masters)
{
    kc_err e = {0};
    cr_assert_eq(ks_auth_bootstrap(&sim, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(ks_auth_bootstrap(&sim, &e), KC_OK, "idempotent: %s", e.msg);
    ks_user u = sa_user("ns1", "op");
    cr_assert_not(allowed(&u, "delete", "", "namespaces", NULL, NULL, "x"));
    rbac_create("clusterrolebindings", NULL,
                "{\"metadata\":{\"name\":\"op-admin\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                "\"name\":\"cluster-admin\"},\"subjects\":[{\"kind\":\"ServiceAccount\","
                "\"name\":\"op\",\"namespace\":\"ns1\"}]}");
    cr_assert(allowed(&u, "delete", "", "namespaces", NULL, NULL, "x"));
    ks_user m = {.name = "someone"};
    snprintf(m.groups[0], sizeof(m.groups[0]), "system:masters");
    cr_assert(allowed(&m, "delete", "", "nodes", NULL, NULL, "x"));
}

Test(rbac, decisions_are_logged_in_memory_and_on_disk)
{
    ks_user u = sa_user("ns1", "op");
    cr_assert_not(allowed(&u, "get", "", "secrets", NULL, "ns1", "s"));
    cr_assert_not(allowed(&u, "get", "", "secrets", NULL, "ns1", "s"));
    cr_assert_not(allowed(&u, "list", "apps", "daemonsets", NULL, NULL, NULL));
    json_t *d = ks_auth_decisions(&sim);
    cr_assert_eq(json_array_size(d), 2);
    json_t *first = json_array_get(d, 0);
    cr_assert_eq(json_integer_value(json_object_get(first, "count")), 2);
    cr_assert(json_is_false(json_object_get(first, "allowed")));
    cr_assert_str_eq(json_string_value(json_object_get(first, "resource")), "secrets");
    cr_assert_str_eq(json_string_value(json_object_get(first, "name")), "s");
    cr_assert_not_null(strstr(json_string_value(json_object_get(first, "reason")), "cannot get"));
    json_decref(d);
    char path[128], *file = NULL;
    snprintf(path, sizeof(path), "%s/auth-decisions.jsonl", tdir);
    cr_assert_eq(ks_pki_read_file(path, &file, NULL, NULL), KC_OK);
    int lines = 0;
    for (char *p = file; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 2, "%s", file);
    cr_assert_not_null(strstr(file, "\"resource\":\"daemonsets\""));
    free(file);
    ks_auth_decisions_clear(&sim);
    d = ks_auth_decisions(&sim);
    cr_assert_eq(json_array_size(d), 0);
    json_decref(d);
    cr_assert_not(allowed(&u, "get", "", "secrets", NULL, "ns1", "s"));
    d = ks_auth_decisions(&sim);
    cr_assert_eq(json_array_size(d), 1);
    cr_assert_null(json_object_get(json_array_get(d, 0), "review"));
    json_decref(d);
    /* A SelfSubjectAccessReview's answer is the same, recorded apart as a review. */
    cr_assert_not(ks_auth_review(&sim, &u, "get", "", "secrets", NULL, "ns1", "s", NULL, 0));
    d = ks_auth_decisions(&sim);
    cr_assert_eq(json_array_size(d), 2);
    cr_assert(json_is_true(json_object_get(json_array_get(d, 1), "review")));
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(d, 0), "count")), 1);
    json_decref(d);
}

/* ---- escalation prevention ---- */

static json_t *jl(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    cr_assert_not_null(o, "bad test JSON: %s", je.text);
    return o;
}

static const char *const writer_rules =
    "{\"metadata\":{\"name\":\"rbac-writer\"},\"rules\":[{\"apiGroups\":[\"rbac.authorization.k8s."
    "io\"],\"resources\":[\"roles\",\"rolebindings\",\"clusterroles\",\"clusterrolebindings\"],"
    "\"verbs\":[\"create\",\"update\"]}]}";

static void bind_cluster(const char *name, const char *role, const char *sa_ns, const char *sa)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"%s\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
             "io\",\"kind\":\"ClusterRole\",\"name\":\"%s\"},\"subjects\":[{\"kind\":"
             "\"ServiceAccount\",\"name\":\"%s\",\"namespace\":\"%s\"}]}",
             name, role, sa, sa_ns);
    rbac_create("clusterrolebindings", NULL, text);
}

static const char *const sa_groups =
    "(groups=[\"system:serviceaccounts\" \"system:serviceaccounts:ra\" "
    "\"system:authenticated\"])";

Test(rbac, escalation_role_needs_held_permissions_or_escalate)
{
    ks_user u = sa_user("ra", "mgr");
    rbac_create("clusterroles", NULL, writer_rules);
    bind_cluster("mgr-writer", "rbac-writer", "ra", "mgr");
    json_t *role = jl("{\"metadata\":{\"name\":\"c1\"},\"rules\":[{\"apiGroups\":[\"\"],"
                      "\"resources\":[\"pods\",\"configmaps\"],\"verbs\":[\"get\",\"list\"]},"
                      "{\"apiGroups\":[\"\"],\"resources\":[\"nodes\"],\"resourceNames\":[\"a\"],"
                      "\"verbs\":[\"get\"]},{\"nonResourceURLs\":[\"/metrics\"],\"verbs\":"
                      "[\"get\"]}]}");
    char *msg = NULL;
    cr_assert_eq(ks_auth_escalation(&sim, &u, "clusterroles", NULL, NULL, role, NULL, &msg), 403);
    char want[2048];
    snprintf(want, sizeof(want),
             "clusterroles.rbac.authorization.k8s.io \"c1\" is forbidden: user "
             "\"system:serviceaccount:ra:mgr\" %s is attempting to grant RBAC permissions not "
             "currently held:\n"
             "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\" \"list\"]}\n"
             "{APIGroups:[\"\"], Resources:[\"nodes\"], ResourceNames:[\"a\"], Verbs:[\"get\"]}\n"
             "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}\n"
             "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
             sa_groups);
    cr_assert_str_eq(msg, want);
    free(msg);
    /* Held permissions pass: grant pods only, then only configmaps etc. are missing. */
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"pods-all\"},\"rules\":[{\"apiGroups\":[\"*\"],"
                "\"resources\":[\"pods\",\"nodes\"],\"verbs\":[\"*\"]},{\"nonResourceURLs\":"
                "[\"/met*\"],\"verbs\":[\"get\"]}]}");
    bind_cluster("mgr-pods", "pods-all", "ra", "mgr");
    cr_assert_eq(ks_auth_escalation(&sim, &u, "clusterroles", NULL, NULL, role, NULL, &msg), 403);
    cr_assert(strstr(msg, "not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], "
                          "Verbs:[\"get\" \"list\"]}") &&
                  !strstr(msg, "pods") && !strstr(msg, "metrics"),
              "%s", msg);
    free(msg);
    /* The escalate verb lets anything through. */
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"esc\"},\"rules\":[{\"apiGroups\":[\"rbac.authorization."
                "k8s.io\"],\"resources\":[\"clusterroles\"],\"verbs\":[\"escalate\"]}]}");
    bind_cluster("mgr-esc", "esc", "ra", "mgr");
    cr_assert_eq(ks_auth_escalation(&sim, &u, "clusterroles", NULL, NULL, role, NULL, &msg), 0);
    cr_assert_null(msg);
    /* Masters bypass. */
    ks_user m = {0};
    snprintf(m.name, sizeof(m.name), "someone");
    snprintf(m.groups[0], sizeof(m.groups[0]), "system:masters");
    cr_assert_eq(ks_auth_escalation(&sim, &m, "roles", "ra", NULL, role, NULL, &msg), 0);
    /* An update touching only GC fields passes. */
    json_t *old = json_deep_copy(role);
    json_object_set_new(json_object_get(role, "metadata"), "finalizers", json_pack("[s]", "x"));
    ks_user other = sa_user("ra", "nobody");
    cr_assert_eq(ks_auth_escalation(&sim, &other, "clusterroles", NULL, "c1", role, old, &msg), 0);
    json_decref(old);
    json_decref(role);
}

Test(rbac, escalation_binding_needs_bind_or_the_roles_permissions)
{
    ks_user u = sa_user("ra", "mgr");
    rbac_create("clusterroles", NULL, writer_rules);
    bind_cluster("mgr-writer", "rbac-writer", "ra", "mgr");
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"pod-reader\"},\"rules\":[{\"apiGroups\":[\"\"],"
                "\"resources\":[\"pods\"],\"verbs\":[\"get\",\"list\"]}]}");
    json_t *b =
        jl("{\"metadata\":{\"name\":\"b1\",\"namespace\":\"ra\"},\"roleRef\":{\"apiGroup\":"
           "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"pod-reader\"},"
           "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"mgr\",\"namespace\":"
           "\"ra\"}]}");
    char *msg = NULL;
    cr_assert_eq(ks_auth_escalation(&sim, &u, "rolebindings", "ra", NULL, b, NULL, &msg), 403);
    char want[1024];
    snprintf(want, sizeof(want),
             "rolebindings.rbac.authorization.k8s.io \"b1\" is forbidden: user "
             "\"system:serviceaccount:ra:mgr\" %s is attempting to grant RBAC permissions not "
             "currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}",
             sa_groups);
    cr_assert_str_eq(msg, want);
    free(msg);
    /* A missing role: 404 naming the binding's resource and the role. */
    json_t *nb =
        jl("{\"metadata\":{\"name\":\"b2\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization."
           "k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"nosuch\"},\"subjects\":[]}");
    cr_assert_eq(ks_auth_escalation(&sim, &u, "clusterrolebindings", NULL, NULL, nb, NULL, &msg),
                 404);
    cr_assert_str_eq(msg, "clusterrolebindings.rbac.authorization.k8s.io \"nosuch\" not found");
    free(msg);
    json_decref(nb);
    /* bind on that role by name, in ra only (a RoleBinding grants it there). */
    rbac_create("clusterroles", NULL,
                "{\"metadata\":{\"name\":\"bindpr\"},\"rules\":[{\"apiGroups\":[\"rbac."
                "authorization.k8s.io\"],\"resources\":[\"clusterroles\"],\"resourceNames\":"
                "[\"pod-reader\"],\"verbs\":[\"bind\"]}]}");
    rbac_create("rolebindings", "ra",
                "{\"metadata\":{\"name\":\"mgr-bind\"},\"roleRef\":{\"apiGroup\":\"rbac."
                "authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"bindpr\"},"
                "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"mgr\"}]}");
    cr_assert_eq(ks_auth_escalation(&sim, &u, "rolebindings", "ra", NULL, b, NULL, &msg), 0);
    cr_assert_eq(ks_auth_escalation(&sim, &u, "clusterrolebindings", NULL, NULL, b, NULL, &msg),
                 403);
    free(msg);
    json_decref(b);
}

Test(rbac, uncovered_rules_compaction_unit)
{
    json_t *owner = jl("[{\"apiGroups\":[\"\"],\"resources\":[\"*/log\"],\"verbs\":[\"get\"]}]");
    json_t *rules = jl("[{\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"],\"verbs\":[\"get\"]}]");
    cr_assert_null(ks_rbac_uncovered(owner, rules));
    json_decref(rules);
    rules = jl("[{\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"],\"verbs\":[\"get\",\"list\"]},"
               "{\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"],\"verbs\":[\"watch\"]}]");
    char *s = ks_rbac_uncovered(owner, rules);
    cr_assert_str_eq(s, "{APIGroups:[\"\"], Resources:[\"pods/log\"], Verbs:[\"list\" \"watch\"]}");
    free(s);
    json_decref(rules);
    json_decref(owner);
}
