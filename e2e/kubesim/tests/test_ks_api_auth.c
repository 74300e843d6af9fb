/* Tests of kubesim's TokenRequest (serviceaccounts/NAME/token) and SelfSubjectAccessReview
 * endpoints over HTTPS, with JSON and protobuf bodies, RBAC on and off. */
#include "ks_api_test.h"

#include <time.h>

TestSuite(api_auth, .fini = ka_stop, .timeout = 60);

/* TokenRequest{spec{audiences [a1], expirationSeconds 7200}} as client-go encodes it. */
static const char TOKEN_PB[] = {
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x28,       0x0a, 0x18, 0x61, 0x75, 0x74, 0x68, 0x65,
    0x6e, 0x74, 0x69, 0x63, 0x61, 0x74,       0x69, 0x6f, 0x6e, 0x2e, 0x6b, 0x38, 0x73,
    0x2e, 0x69, 0x6f, 0x2f, 0x76, 0x31,       0x12, 0x0c, 0x54, 0x6f, 0x6b, 0x65, 0x6e,
    0x52, 0x65, 0x71, 0x75, 0x65, 0x73,       0x74, 0x12, 0x0b, 0x0a, 0x00, 0x12, 0x07,
    0x0a, 0x02, 0x61, 0x31, 0x20, (char)0xa0, 0x38, 0x22, 0x00};
/* SelfSubjectAccessReview{spec{resourceAttributes{namespace default, verb list, resource pods}}}.
 */
static const char SSAR_PB[] = {
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x32, 0x0a, 0x17, 0x61, 0x75, 0x74, 0x68, 0x6f, 0x72, 0x69,
    0x7a, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2e, 0x6b, 0x38, 0x73, 0x2e, 0x69, 0x6f, 0x2f, 0x76,
    0x31, 0x12, 0x17, 0x53, 0x65, 0x6c, 0x66, 0x53, 0x75, 0x62, 0x6a, 0x65, 0x63, 0x74, 0x41,
    0x63, 0x63, 0x65, 0x73, 0x73, 0x52, 0x65, 0x76, 0x69, 0x65, 0x77, 0x12, 0x19, 0x12, 0x17,
    0x0a, 0x15, 0x0a, 0x07, 0x64, 0x65, 0x66, 0x61, 0x75, 0x6c, 0x74, 0x12, 0x04, 0x6c, 0x69,
    0x73, 0x74, 0x2a, 0x04, 0x70, 0x6f, 0x64, 0x73, 0x22, 0x00};

static const char TOKEN_PATH[] = "/api/v1/namespaces/default/serviceaccounts/robot/token";
static const char SSAR_PATH[] = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

static ka_resp post(const char *path, const char *token, const char *ctype, const char *body,
                    size_t len)
{
    char ct[200];
    snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
    const char *hs[] = {ct, NULL};
    return ka_http_bin("POST", ka.sim.server_url, path, token, hs, body, len, 0);
}

static ka_resp post_json(const char *path, const char *token, const char *body)
{
    return post(path, token, "application/json", body, strlen(body));
}

static void admin_create(const char *path, const char *body)
{
    ka_resp r = post_json(path, ka.token, body);
    cr_assert_eq(r.status, 201, "POST %s: %ld %s", path, r.status, r.body);
    ka_resp_free(&r);
}

static void create_sa(const char *ns, const char *name)
{
    char path[200], body[300];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/serviceaccounts", ns);
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{"
             "\"name\":\"%s\"}}",
             name);
    admin_create(path, body);
}

/* A Role in ns granting verbs on resources (JSON arrays as text), bound to default/robot. */
static void grant(const char *ns, const char *name, const char *resources, const char *verbs)
{
    char path[200], body[1000];
    snprintf(path, sizeof(path), "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles", ns);
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":%s,"
             "\"verbs\":%s}]}",
             name, resources, verbs);
    admin_create(path, body);
    snprintf(path, sizeof(path), "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings",
             ns);
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\"},\"roleRef\":{\"apiGroup\":"
             "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"%s\"},\"subjects\":[{"
             "\"kind\":\"ServiceAccount\",\"name\":\"robot\",\"namespace\":\"default\"}]}",
             name, name);
    admin_create(path, body);
}

static const char *jstr(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

Test(api_auth, token_request_issues_the_service_account_token)
{
    ka_start_opts(false, false);
    create_sa("default", "robot");
    ka_resp r = post_json(TOKEN_PATH, ka.token,
                          "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                          "\"spec\":{}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    json_t *tr = ka_json(&r);
    char *want = ks_auth_sa_token(&ka.sim, "default", "robot");
    cr_assert_str_eq(jstr(tr, "status", "token"), want);
    cr_assert_str_eq(jstr(tr, "kind", NULL), "TokenRequest");
    cr_assert_str_eq(jstr(tr, "apiVersion", NULL), "authentication.k8s.io/v1");
    cr_assert_str_eq(jstr(tr, "metadata", "name"), "robot");
    cr_assert_str_eq(jstr(tr, "metadata", "namespace"), "default");
    json_t *spec = json_object_get(tr, "spec");
    cr_assert_eq(json_integer_value(json_object_get(spec, "expirationSeconds")), 3600);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(spec, "audiences"), 0)),
                     "https://kubernetes.default.svc.cluster.local");
    /* expirationTimestamp is an hour from now. */
    struct tm tm = {0};
    const char *exp = jstr(tr, "status", "expirationTimestamp");
    cr_assert_not_null(strptime(exp, "%Y-%m-%dT%H:%M:%SZ", &tm), "%s", exp);
    long long delta = (long long)timegm(&tm) - (long long)time(NULL);
    cr_assert(delta > 3590 && delta <= 3600, "expires in %lld s", delta);
    json_decref(tr);
    ka_resp_free(&r);
    /* The token authenticates as the ServiceAccount. */
    r = ka_http_ex("GET", ka.sim.server_url, "/api", want, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    ka_resp_free(&r);
    /* A protobuf body (kubectl create token --duration=2h --audience=a1) and no body at all. */
    r = post(TOKEN_PATH, ka.token, "application/vnd.kubernetes.protobuf", TOKEN_PB,
             sizeof(TOKEN_PB));
    cr_assert_eq(r.status, 201, "%s", r.body);
    tr = ka_json(&r);
    cr_assert_str_eq(jstr(tr, "status", "token"), want);
    spec = json_object_get(tr, "spec");
    cr_assert_eq(json_integer_value(json_object_get(spec, "expirationSeconds")), 7200);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(spec, "audiences"), 0)),
                     "a1");
    json_decref(tr);
    ka_resp_free(&r);
    r = post(TOKEN_PATH, ka.token, "application/json", NULL, 0);
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    free(want);
}

Test(api_auth, token_request_errors)
{
    ka_start_opts(false, false);
    ka_resp r = post_json("/api/v1/namespaces/default/serviceaccounts/nosuch/token", ka.token,
                          "{\"spec\":{}}");
    cr_assert_eq(r.status, 404, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 404, "NotFound"), "serviceaccounts \"nosuch\" not found");
    json_decref(st);
    ka_resp_free(&r);
    create_sa("default", "robot");
    r = post_json(TOKEN_PATH, ka.token, "{\"spec\":{\"expirationSeconds\":60}}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 422, "Invalid"),
                     "TokenRequest.authentication.k8s.io \"robot\" is invalid: "
                     "spec.expirationSeconds: Invalid value: 60: may not specify a duration less "
                     "than 10 minutes");
    json_t *cause = json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0);
    cr_assert_str_eq(jstr(cause, "field", NULL), "spec.expirationSeconds");
    json_decref(st);
    ka_resp_free(&r);
    r = post_json(TOKEN_PATH, ka.token, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\"}");
    cr_assert_eq(r.status, 400, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("GET", TOKEN_PATH, NULL, NULL, NULL);
    cr_assert_eq(r.status, 405, "%s", r.body);
    ka_resp_free(&r);
    /* Only serviceaccounts have /token. */
    r = post_json("/api/v1/namespaces/default/configmaps/x/token", ka.token, "{}");
    cr_assert_eq(r.status, 404, "%s", r.body);
    ka_resp_free(&r);
}

Test(api_auth, token_request_needs_create_on_serviceaccounts_token)
{
    ka_start_opts(true, false);
    create_sa("default", "robot");
    char *tok = ks_auth_sa_token(&ka.sim, "default", "robot");
    ka_resp r = post_json(TOKEN_PATH, tok, "{\"spec\":{}}");
    cr_assert_eq(r.status, 403, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 403, "Forbidden"),
                     "serviceaccounts \"robot\" is forbidden: User "
                     "\"system:serviceaccount:default:robot\" cannot create resource "
                     "\"serviceaccounts/token\" in API group \"\" in the namespace \"default\"");
    cr_assert_str_eq(jstr(st, "details", "name"), "robot");
    json_decref(st);
    ka_resp_free(&r);
    grant("default", "tokens", "[\"serviceaccounts/token\"]", "[\"create\"]");
    r = post_json(TOKEN_PATH, tok, "{\"spec\":{}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    free(tok);
}

/* POSTs a review for (verb, resource, ns) as token; returns status.allowed. */
static bool can_i(const char *token, const char *verb, const char *resource, const char *ns)
{
    char body[600];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectAccessReview\","
             "\"spec\":{\"resourceAttributes\":{\"namespace\":\"%s\",\"verb\":\"%s\","
             "\"resource\":\"%s\"}}}",
             ns, verb, resource);
    ka_resp r = post_json(SSAR_PATH, token, body);
    cr_assert_eq(r.status, 201, "%s", r.body);
    json_t *o = ka_json(&r);
    cr_assert_str_eq(jstr(o, "kind", NULL), "SelfSubjectAccessReview");
    cr_assert_str_eq(jstr(json_object_get(o, "spec"), "resourceAttributes", "verb"), verb);
    json_t *allowed = json_object_get(json_object_get(o, "status"), "allowed");
    cr_assert(json_is_boolean(allowed), "%s", r.body);
    bool yes = json_is_true(allowed);
    json_decref(o);
    ka_resp_free(&r);
    return yes;
}

Test(api_auth, self_subject_access_review_follows_rbac)
{
    ka_start_opts(true, false);
    char *tok = ks_auth_sa_token(&ka.sim, "default", "robot");
    cr_assert(can_i(ka.token, "delete", "nodes", ""), "the admin may do anything");
    cr_assert_not(can_i(tok, "list", "pods", "default"));
    grant("default", "pods", "[\"pods\"]", "[\"list\",\"get\"]");
    cr_assert(can_i(tok, "list", "pods", "default"));
    cr_assert_not(can_i(tok, "list", "pods", "kube-system"), "the Role is namespace-scoped");
    cr_assert_not(can_i(tok, "delete", "pods", "default"));
    /* The protobuf body kubectl auth can-i sends. */
    ka_resp r =
        post(SSAR_PATH, tok, "application/vnd.kubernetes.protobuf", SSAR_PB, sizeof(SSAR_PB));
    cr_assert_eq(r.status, 201, "%s", r.body);
    json_t *o = ka_json(&r);
    cr_assert(json_is_true(json_object_get(json_object_get(o, "status"), "allowed")), "%s", r.body);
    json_decref(o);
    ka_resp_free(&r);
    /* Non-resource URLs: the admin's. */
    const char *nr = "{\"spec\":{\"nonResourceAttributes\":{\"path\":\"/healthz\","
                     "\"verb\":\"get\"}}}";
    r = post_json(SSAR_PATH, tok, nr);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert(strstr(r.body, "\"allowed\":false"), "%s", r.body);
    ka_resp_free(&r);
    r = post_json(SSAR_PATH, ka.token, nr);
    cr_assert(strstr(r.body, "\"allowed\":true"), "%s", r.body);
    ka_resp_free(&r);
    free(tok);
}

Test(api_auth, self_subject_access_review_errors)
{
    ka_start_opts(false, false);
    cr_assert(can_i(ka.token, "list", "pods", "default"));
    ka_resp r = post_json(SSAR_PATH, ka.token, "{\"spec\":{}}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 422, "Invalid"),
                     "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: "
                     "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
                     "nonResourceAttributes or resourceAttributes must be specified");
    json_decref(st);
    ka_resp_free(&r);
    r = post_json(SSAR_PATH, ka.token,
                  "{\"spec\":{\"resourceAttributes\":{},\"nonResourceAttributes\":{}}}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("GET", SSAR_PATH, NULL, NULL, NULL);
    cr_assert_eq(r.status, 405, "%s", r.body);
    ka_resp_free(&r);
    r = post_json(SSAR_PATH, NULL, "{\"spec\":{}}");
    cr_assert_eq(r.status, 401, "%s", r.body);
    ka_resp_free(&r);
    r = post_json(SSAR_PATH, ka.token, "not json");
    cr_assert_eq(r.status, 400, "%s", r.body);
    ka_resp_free(&r);
}

static ka_resp get_as(const char *path, const char *token, const char *const *headers)
{
    return ka_http_bin("GET", ka.sim.server_url, path, token, headers, NULL, 0, 0);
}

Test(api_auth, impersonation_needs_the_impersonate_verb)
{
    ka_start_opts(true, false);
    create_sa("default", "robot");
    char *tok = ks_auth_sa_token(&ka.sim, "default", "robot");
    const char *as_foo[] = {"Impersonate-User: foo", NULL};
    ka_resp r = get_as("/api/v1/namespaces/default/pods", tok, as_foo);
    cr_assert_eq(r.status, 403, "%s", r.body);
    json_t *o = ka_json(&r);
    cr_assert_str_eq(
        jstr(o, "message", NULL),
        "users \"foo\" is forbidden: User \"system:serviceaccount:default:robot\" "
        "cannot impersonate resource \"users\" in API group \"\" at the cluster scope");
    cr_assert_str_eq(jstr(o, "details", "kind"), "users");
    cr_assert_str_eq(jstr(o, "details", "name"), "foo");
    json_decref(o);
    ka_resp_free(&r);
    /* A ServiceAccount user is impersonated as serviceaccounts in its namespace. */
    const char *as_sa[] = {"Impersonate-User: system:serviceaccount:kube-system:x", NULL};
    r = get_as("/api/v1/namespaces/default/pods", tok, as_sa);
    cr_assert_eq(r.status, 403, "%s", r.body);
    cr_assert(strstr(r.body, "serviceaccounts \\\"x\\\" is forbidden: User "
                             "\\\"system:serviceaccount:default:robot\\\" cannot impersonate "
                             "resource \\\"serviceaccounts\\\" in API group \\\"\\\" in the "
                             "namespace \\\"kube-system\\\""),
              "%s", r.body);
    ka_resp_free(&r);
    /* Groups without a user: the API server's 500. */
    const char *group_only[] = {"Impersonate-Group: g1", NULL};
    r = get_as("/api/v1/namespaces/default/pods", tok, group_only);
    cr_assert_eq(r.status, 500, "%s", r.body);
    cr_assert_str_eq(r.body, "Internal Server Error: \"/api/v1/namespaces/default/pods\": "
                             "requested [{Group  g1    }] without impersonating a user\n");
    ka_resp_free(&r);
    /* The admin may impersonate: the request then runs as foo, who may not list pods... */
    r = get_as("/api/v1/namespaces/default/pods", ka.token, as_foo);
    cr_assert_eq(r.status, 403, "%s", r.body);
    cr_assert(strstr(r.body, "User \\\"foo\\\" cannot list resource \\\"pods\\\""), "%s", r.body);
    ka_resp_free(&r);
    /* ...unless a group it is given grants it (system:masters). */
    const char *as_master[] = {"Impersonate-User: foo", "Impersonate-Group: system:masters", NULL};
    r = get_as("/api/v1/namespaces/default/pods", ka.token, as_master);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    /* A grant of impersonate on users/foo (resourceNames) lets the robot be foo, not bar. */
    admin_create("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                 "{\"metadata\":{\"name\":\"imp\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":"
                 "[\"users\"],\"resourceNames\":[\"foo\"],\"verbs\":[\"impersonate\"]}]}");
    admin_create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                 "{\"metadata\":{\"name\":\"imp\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization."
                 "k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"imp\"},\"subjects\":[{\"kind\":"
                 "\"ServiceAccount\",\"name\":\"robot\",\"namespace\":\"default\"}]}");
    admin_create("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                 "{\"metadata\":{\"name\":\"lister\"},\"rules\":[{\"apiGroups\":[\"\"],"
                 "\"resources\":[\"pods\"],\"verbs\":[\"list\"]}]}");
    admin_create("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                 "{\"metadata\":{\"name\":\"foo-edit\"},\"roleRef\":{\"apiGroup\":\"rbac."
                 "authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"lister\"},"
                 "\"subjects\":[{\"kind\":\"User\",\"name\":\"foo\"}]}");
    r = get_as("/api/v1/namespaces/default/pods", tok, as_foo);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    const char *as_bar[] = {"Impersonate-User: bar", NULL};
    r = get_as("/api/v1/namespaces/default/pods", tok, as_bar);
    cr_assert_eq(r.status, 403, "%s", r.body);
    ka_resp_free(&r);
    /* SelfSubjectAccessReview answers for the impersonated user. */
    char ct[] = "Content-Type: application/json";
    const char *ssar_h[] = {ct, "Impersonate-User: foo", NULL};
    const char *body = "{\"spec\":{\"resourceAttributes\":{\"namespace\":\"default\",\"verb\":"
                       "\"list\",\"resource\":\"pods\"}}}";
    r = ka_http_bin("POST", ka.sim.server_url, SSAR_PATH, tok, ssar_h, body, strlen(body), 0);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert(strstr(r.body, "\"allowed\":true"), "%s", r.body);
    ka_resp_free(&r);
    cr_assert_not(can_i(tok, "list", "pods", "default"), "the robot itself may not");
    free(tok);
}
