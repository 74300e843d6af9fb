/* kubesim's API in protobuf, as client-go with ContentType application/vnd.kubernetes.protobuf
 * (controller-runtime's default for built-in kinds) speaks it: protobuf request bodies for every
 * built-in kind, protobuf answers (objects, lists, Status errors) chosen by Accept with q-values
 * and fallbacks, length-prefixed watch frames, and custom resources in JSON only (406 when the
 * client accepts nothing else). */
#include "ks_api_test.h"

TestSuite(apiproto, .init = ka_start, .fini = ka_stop, .timeout = 60);

static const char PB[] = "application/vnd.kubernetes.protobuf";
static const char PB_JSON[] = "application/vnd.kubernetes.protobuf, application/json";

/* POSTs obj encoded in protobuf to path, asking for protobuf back. */
static ka_resp post_pb(const char *path, json_t *obj)
{
    char *pb = NULL;
    size_t n = 0;
    kc_err e = {0};
    cr_assert_eq(ks_proto_encode(obj, &pb, &n, &e), KC_OK, "%s", e.msg);
    const char *hs[] = {"Content-Type: application/vnd.kubernetes.protobuf",
                        "Accept: application/vnd.kubernetes.protobuf, application/json", NULL};
    ka_resp r = ka_http_bin("POST", ka.sim.server_url, path, ka.token, hs, pb, n, 0);
    free(pb);
    return r;
}

static json_t *pb_body(const ka_resp *r)
{
    cr_assert_str_eq(r->ctype, PB, "status %ld: %.*s", r->status, (int)r->len, r->body);
    json_t *out = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_proto_decode(r->body, r->len, &out, &e), KC_OK, "%s", e.msg);
    return out;
}

static const char *str_at(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

Test(apiproto, create_get_list_delete_in_protobuf)
{
    json_t *rc = json_pack("{s:s, s:s, s:{s:s}, s:s, s:{s:{s:s}}}", "apiVersion", "node.k8s.io/v1",
                           "kind", "RuntimeClass", "metadata", "name", "nvidia", "handler",
                           "nvidia", "overhead", "podFixed", "cpu", "250m");
    ka_resp r = post_pb("/apis/node.k8s.io/v1/runtimeclasses", rc);
    cr_assert_eq(r.status, 201, "%.*s", (int)r.len, r.body);
    json_t *got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "kind", NULL), "RuntimeClass");
    cr_assert_str_eq(str_at(got, "handler", NULL), "nvidia");
    cr_assert_not_null(str_at(got, "metadata", "uid"));
    json_decref(got);
    ka_resp_free(&r);
    json_decref(rc);

    r = ka_http("GET", "/apis/node.k8s.io/v1/runtimeclasses/nvidia", NULL, PB, NULL);
    got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "apiVersion", NULL), "node.k8s.io/v1");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(got, "overhead"), "podFixed"), "cpu")),
                     "250m");
    json_decref(got);
    ka_resp_free(&r);

    r = ka_http("GET", "/apis/node.k8s.io/v1/runtimeclasses", NULL, PB_JSON, NULL);
    got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "kind", NULL), "RuntimeClassList");
    cr_assert_eq(json_array_size(json_object_get(got, "items")), 1);
    cr_assert_not_null(str_at(got, "metadata", "resourceVersion"));
    json_decref(got);
    ka_resp_free(&r);

    /* DELETE with protobuf DeleteOptions; the answer is the object (or a Status) in protobuf. */
    json_t *opts = json_pack("{s:s, s:s, s:s}", "apiVersion", "v1", "kind", "DeleteOptions",
                             "propagationPolicy", "Background");
    char *pb = NULL;
    size_t n = 0;
    kc_err e = {0};
    cr_assert_eq(ks_proto_encode(opts, &pb, &n, &e), KC_OK, "%s", e.msg);
    json_decref(opts);
    const char *hs[] = {"Content-Type: application/vnd.kubernetes.protobuf",
                        "Accept: application/vnd.kubernetes.protobuf", NULL};
    r = ka_http_bin("DELETE", ka.sim.server_url, "/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                    ka.token, hs, pb, n, 0);
    free(pb);
    cr_assert_eq(r.status, 200, "%.*s", (int)r.len, r.body);
    got = pb_body(&r);
    cr_assert_not_null(str_at(got, "kind", NULL));
    json_decref(got);
    ka_resp_free(&r);

    /* A Status error in protobuf. */
    r = ka_http("GET", "/apis/node.k8s.io/v1/runtimeclasses/nvidia", NULL, PB, NULL);
    cr_assert_eq(r.status, 404);
    got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "kind", NULL), "Status");
    cr_assert_str_eq(str_at(got, "reason", NULL), "NotFound");
    cr_assert_eq(json_integer_value(json_object_get(got, "code")), 404);
    cr_assert_str_eq(str_at(got, "details", "name"), "nvidia");
    json_decref(got);
    ka_resp_free(&r);
}

Test(apiproto, every_controller_kind_accepts_a_protobuf_body)
{
    static const struct {
        const char *path, *json;
    } cases[] = {
        {"/apis/apps/v1/namespaces/default/daemonsets",
         "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"dp\"},"
         "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"dp\"}},\"template\":{\"metadata\":{"
         "\"labels\":{\"app\":\"dp\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\","
         "\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\"}]}],\"volumes\":[{\"name\":"
         "\"v\",\"hostPath\":{\"path\":\"/"
         "run\"}}],\"tolerations\":[{\"operator\":\"Exists\"}]}}}}"},
        {"/apis/rbac.authorization.k8s.io/v1/clusterroles",
         "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRole\",\"metadata\":{"
         "\"name\":\"op\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":["
         "\"get\",\"list\"]}]}"},
        {"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\","
         "\"metadata\":{\"name\":\"op\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":"
         "\"op\",\"namespace\":\"default\"}],\"roleRef\":{\"apiGroup\":"
         "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"op\"}}"},
        {"/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
         "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{"
         "\"name\":\"op\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":"
         "[\"get\"]}]}"},
        {"/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
         "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{"
         "\"name\":\"op\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\",\"apiGroup\":"
         "\"rbac.authorization.k8s.io\"}],\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\","
         "\"kind\":\"Role\",\"name\":\"op\"}}"},
        {"/api/v1/namespaces/default/services",
         "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"m\"},\"spec\":{"
         "\"selector\":{\"app\":\"dp\"},\"ports\":[{\"port\":9400,\"targetPort\":\"metrics\"}]}}"},
        {"/api/v1/namespaces/default/events",
         "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"e1\"},"
         "\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"p\",\"namespace\":\"default\"},"
         "\"reason\":\"Started\",\"message\":\"m\",\"type\":\"Normal\",\"count\":1,"
         "\"firstTimestamp\":\"2025-03-01T12:30:00Z\",\"lastTimestamp\":"
         "\"2025-03-01T12:30:00Z\",\"source\":{\"component\":\"op\"}}"},
        {"/apis/events.k8s.io/v1/namespaces/default/events",
         "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"e2\"},"
         "\"eventTime\":\"2025-03-01T12:30:00.123456Z\",\"reportingController\":\"op\","
         "\"reportingInstance\":\"op-1\",\"action\":\"Reconcile\",\"reason\":\"Ready\","
         "\"regarding\":{\"kind\":\"Node\",\"name\":\"n1\"},\"type\":\"Normal\"}"},
        {"/apis/coordination.k8s.io/v1/namespaces/default/leases",
         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
         "\"l\"},\"spec\":{\"holderIdentity\":\"me\",\"leaseDurationSeconds\":15,"
         "\"renewTime\":\"2025-03-01T12:30:00.000001Z\"}}"},
        {"/apis/scheduling.k8s.io/v1/priorityclasses",
         "{\"apiVersion\":\"scheduling.k8s.io/v1\",\"kind\":\"PriorityClass\",\"metadata\":{"
         "\"name\":\"hi\"},\"value\":1000}"},
        {"/api/v1/namespaces/default/configmaps",
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"},\"data\":{"
         "\"k\":\"v\"}}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *obj = json_loads(cases[i].json, 0, NULL);
        cr_assert_not_null(obj, "case %zu", i);
        ka_resp r = post_pb(cases[i].path, obj);
        cr_assert_eq(r.status, 201, "%s: %ld %.*s", cases[i].path, r.status, (int)r.len, r.body);
        json_t *got = pb_body(&r);
        cr_assert_str_eq(str_at(got, "kind", NULL), str_at(obj, "kind", NULL));
        cr_assert_str_eq(str_at(got, "metadata", "name"), str_at(obj, "metadata", "name"));
        json_decref(got);
        ka_resp_free(&r);
        json_decref(obj);
    }
    /* The Lease kept its microseconds. */
    ka_resp r =
        ka_http("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l", NULL, PB, NULL);
    json_t *got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "spec", "renewTime"), "2025-03-01T12:30:00.000001Z");
    json_decref(got);
    ka_resp_free(&r);
}

Test(apiproto, accept_negotiation)
{
    cr_assert_eq(ks_media_negotiate(NULL, true), KS_MEDIA_JSON);
    cr_assert_eq(ks_media_negotiate("application/json", true), KS_MEDIA_JSON);
    cr_assert_eq(ks_media_negotiate(PB, true), KS_MEDIA_PROTOBUF);
    cr_assert_eq(ks_media_negotiate(PB_JSON, true), KS_MEDIA_PROTOBUF);
    cr_assert_eq(ks_media_negotiate(PB_JSON, false), KS_MEDIA_JSON);
    cr_assert_eq(ks_media_negotiate(PB, false), KS_MEDIA_NONE);
    cr_assert_eq(
        ks_media_negotiate("application/vnd.kubernetes.protobuf;q=0.5, application/json", true),
        KS_MEDIA_JSON);
    cr_assert_eq(
        ks_media_negotiate("application/json;q=0.1, application/vnd.kubernetes.protobuf", true),
        KS_MEDIA_PROTOBUF);
    cr_assert_eq(ks_media_negotiate("application/vnd.kubernetes.protobuf;q=0, */*", true),
                 KS_MEDIA_JSON);
    cr_assert_eq(ks_media_negotiate("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;"
                                    "v=v1, application/json",
                                    true),
                 KS_MEDIA_JSON);
    cr_assert_eq(ks_media_negotiate("text/html", true), KS_MEDIA_JSON);

    /* q-values over HTTP */
    ka_resp r = ka_http("GET", "/api/v1/namespaces/default", NULL,
                        "application/vnd.kubernetes.protobuf;q=0.5,application/json;q=0.9", NULL);
    cr_assert_str_eq(r.ctype, "application/json");
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default", NULL,
                "application/json;q=0.5,application/vnd.kubernetes.protobuf", NULL);
    json_t *got = pb_body(&r);
    cr_assert_str_eq(str_at(got, "kind", NULL), "Namespace");
    json_decref(got);
    ka_resp_free(&r);

    /* Custom resources: JSON when the client also takes it, 406 when it takes only protobuf. */
    r = ka_http("GET", "/apis/example.com/v1/namespaces/default/widgets", NULL, PB_JSON, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.ctype, "application/json");
    ka_resp_free(&r);
    /* The 406 Status in protobuf, with the API server's message (it lists protobuf too). */
    r = ka_http("GET", "/apis/example.com/v1/namespaces/default/widgets", NULL, PB, NULL);
    cr_assert_eq(r.status, 406, "%ld", r.status);
    json_t *st = pb_body(&r);
    cr_assert_str_eq(str_at(st, "reason", NULL), "NotAcceptable");
    cr_assert_str_eq(str_at(st, "message", NULL),
                     "only the following media types are accepted: application/json, "
                     "application/yaml, application/vnd.kubernetes.protobuf");
    json_decref(st);
    ka_resp_free(&r);
    /* Discovery has no protobuf form in kubesim: JSON whatever the Accept. */
    r = ka_http("GET", "/apis/apps/v1", NULL, PB, NULL);
    cr_assert_eq(r.status, 200, "%ld", r.status);
    cr_assert_str_eq(r.ctype, "application/json");
    ka_resp_free(&r);
    /* ... and a protobuf body for one is 415. */
    const char *hs[] = {"Content-Type: application/vnd.kubernetes.protobuf", NULL};
    r = ka_http_bin("POST", ka.sim.server_url, "/apis/example.com/v1/namespaces/default/widgets",
                    ka.token, hs, "k8s\0", 4, 0);
    cr_assert_eq(r.status, 415, "%ld", r.status);
    ka_resp_free(&r);
}

/* Reads the frames of a protobuf watch body: 4-byte big-endian length + WatchEvent. */
static size_t frames(const ka_resp *r, char types[][16], json_t **objs, size_t max)
{
    size_t n = 0, off = 0;
    while (off + 4 <= r->len && n < max) {
        const uint8_t *p = (const uint8_t *)r->body + off;
        size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        cr_assert(off + 4 + len <= r->len, "truncated frame");
        json_t *ev = NULL;
        kc_err e = {0};
        cr_assert_eq(ks_proto_decode_msg("", "WatchEvent", r->body + off + 4, len, &ev, &e), KC_OK,
                     "%s", e.msg);
        snprintf(types[n], 16, "%s", str_at(ev, "type", NULL));
        /* object: a RawExtension holding the object's own protobuf envelope */
        objs[n] = json_incref(json_object_get(ev, "object"));
        json_decref(ev);
        n++;
        off += 4 + len;
    }
    return n;
}

Test(apiproto, watch_frames)
{
    json_t *cr =
        json_pack("{s:s, s:s, s:{s:s}, s:[{s:[s], s:[s], s:[s]}]}", "apiVersion",
                  "rbac.authorization.k8s.io/v1", "kind", "ClusterRole", "metadata", "name",
                  "watched", "rules", "apiGroups", "", "resources", "pods", "verbs", "get");
    ka_resp r = post_pb("/apis/rbac.authorization.k8s.io/v1/clusterroles", cr);
    cr_assert_eq(r.status, 201);
    ka_resp_free(&r);
    json_decref(cr);
    char ac[128];
    snprintf(ac, sizeof(ac), "Accept: %s", PB);
    const char *hs[] = {ac, NULL};
    r = ka_http_ex("GET", ka.sim.server_url,
                   "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=1&timeoutSeconds=1&"
                   "fieldSelector=metadata.name%3Dwatched",
                   ka.token, hs, NULL, 5000);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.ctype, "application/vnd.kubernetes.protobuf;stream=watch");
    char types[4][16];
    json_t *objs[4] = {0};
    size_t n = frames(&r, types, objs, 4);
    cr_assert_eq(n, 1, "%zu frames", n);
    cr_assert_str_eq(types[0], "ADDED");
    cr_assert_str_eq(str_at(objs[0], "kind", NULL), "ClusterRole");
    cr_assert_str_eq(str_at(objs[0], "metadata", "name"), "watched");
    json_decref(objs[0]);
    ka_resp_free(&r);

    /* client-go's WatchList: the state as ADDED frames, then a BOOKMARK frame marking its end. */
    r = ka_http_ex("GET", ka.sim.server_url,
                   "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=1&timeoutSeconds=1&"
                   "fieldSelector=metadata.name%3Dwatched&sendInitialEvents=true&"
                   "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
                   ka.token, hs, NULL, 5000);
    cr_assert_eq(r.status, 200);
    n = frames(&r, types, objs, 4);
    cr_assert_eq(n, 2, "%zu frames", n);
    cr_assert_str_eq(types[0], "ADDED");
    cr_assert_str_eq(types[1], "BOOKMARK");
    cr_assert_str_eq(str_at(objs[1], "kind", NULL), "ClusterRole");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(objs[1], "metadata"), "annotations"),
                         "k8s.io/initial-events-end")),
                     "true");
    json_decref(objs[0]);
    json_decref(objs[1]);
    ka_resp_free(&r);

    /* A resourceVersion compacted away: one ERROR frame with a 410 Status. */
    r = ka_http("POST", "/kubesim/compact", NULL, NULL, NULL);
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url,
                   "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=1&timeoutSeconds=1&"
                   "resourceVersion=1",
                   ka.token, hs, NULL, 5000);
    cr_assert_eq(r.status, 200);
    n = frames(&r, types, objs, 4);
    cr_assert_eq(n, 1, "%zu frames", n);
    cr_assert_str_eq(types[0], "ERROR");
    cr_assert_str_eq(str_at(objs[0], "kind", NULL), "Status");
    cr_assert_str_eq(str_at(objs[0], "reason", NULL), "Expired");
    cr_assert_eq(json_integer_value(json_object_get(objs[0], "code")), 410);
    json_decref(objs[0]);
    ka_resp_free(&r);
}
