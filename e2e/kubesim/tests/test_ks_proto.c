/* Tests for ks_proto_decode: the "k8s\0" runtime.Unknown envelope with Secret, ConfigMap,
 * Namespace, ServiceAccount, Deployment, TokenRequest, SelfSubjectAccessReview and DeleteOptions
 * bodies built by a small encoder here (and two bodies kubectl 1.32 sent), unknown fields, merges,
 * and malformed input (wrong magic, truncation, bad lengths, wrong wire types, invalid UTF-8). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ks_sim.h"

/* ---- a tiny protobuf encoder -------------------------------------------------------------- */

typedef struct pb {
    uint8_t b[8192];
    size_t n;
} pb;

static void pb_raw(pb *p, const void *d, size_t n)
{
    cr_assert_leq(p->n + n, sizeof(p->b));
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void pb_varint(pb *p, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        if (v)
            c |= 0x80;
        pb_raw(p, &c, 1);
    } while (v);
}

static void pb_tag(pb *p, uint32_t num, int wire)
{
    pb_varint(p, ((uint64_t)num << 3) | (uint64_t)wire);
}

static void pb_bytes(pb *p, uint32_t num, const void *d, size_t n)
{
    pb_tag(p, num, 2);
    pb_varint(p, n);
    pb_raw(p, d, n);
}

static void pb_str(pb *p, uint32_t num, const char *s)
{
    pb_bytes(p, num, s, strlen(s));
}

static void pb_int(pb *p, uint32_t num, uint64_t v)
{
    pb_tag(p, num, 0);
    pb_varint(p, v);
}

static void pb_msg(pb *p, uint32_t num, const pb *sub)
{
    pb_bytes(p, num, sub->b, sub->n);
}

static void pb_map(pb *p, uint32_t num, const char *k, const void *v, size_t vn)
{
    pb e = {.n = 0};
    pb_str(&e, 1, k);
    pb_bytes(&e, 2, v, vn);
    pb_msg(p, num, &e);
}

static void pb_map_str(pb *p, uint32_t num, const char *k, const char *v)
{
    pb_map(p, num, k, v, strlen(v));
}

/* The envelope: magic, Unknown{typeMeta{apiVersion, kind}, raw}. */
static void envelope(pb *out, const char *api, const char *kind, const pb *raw)
{
    out->n = 0;
    pb_raw(out, "k8s\0", 4);
    pb tm = {.n = 0};
    if (api)
        pb_str(&tm, 1, api);
    if (kind)
        pb_str(&tm, 2, kind);
    pb_msg(out, 1, &tm);
    if (raw)
        pb_msg(out, 2, raw);
    pb_str(out, 4, "application/vnd.kubernetes.protobuf");
}

static json_t *decode_ok(const pb *p)
{
    json_t *out = NULL;
    kc_err e = {0};
    kc_code rc = ks_proto_decode((const char *)p->b, p->n, &out, &e);
    cr_assert_eq(rc, KC_OK, "decode failed: %s", e.msg);
    cr_assert_not_null(out);
    return out;
}

static kc_code decode_err(const pb *p, kc_err *e)
{
    json_t *out = (json_t *)0x1;
    kc_err_clear(e);
    kc_code rc = ks_proto_decode((const char *)p->b, p->n, &out, e);
    cr_assert_neq(rc, KC_OK);
    cr_assert_null(out);
    cr_assert_eq(e->code, rc);
    cr_assert(e->msg[0]);
    return rc;
}

static void assert_json(json_t *got, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    cr_assert_not_null(want, "bad expected JSON");
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    cr_assert(json_equal(got, want), "got %s", g);
    free(g);
    json_decref(want);
}

/* ObjectMeta of a helm release Secret. */
static void release_meta(pb *m)
{
    m->n = 0;
    pb_str(m, 1, "sh.helm.release.v1.demo.v1");
    pb_str(m, 3, "default");
    pb_str(m, 6, ""); /* empty strings are encoded and must not appear */
    pb_int(m, 7, 0);
    pb t = {.n = 0}; /* the zero creationTimestamp is an empty message */
    pb_msg(m, 8, &t);
    pb_map_str(m, 11, "name", "demo");
    pb_map_str(m, 11, "owner", "helm");
    pb_map_str(m, 11, "status", "deployed");
    pb_map_str(m, 12, "note", "");
}

Test(ks_proto, secret_from_helm)
{
    pb meta, raw = {.n = 0}, body;
    release_meta(&meta);
    pb_msg(&raw, 1, &meta);
    static const uint8_t bin[] = {0x1f, 0x8b, 0x00, 0xff};
    pb_map(&raw, 2, "release", bin, sizeof(bin));
    pb_str(&raw, 3, "helm.sh/release.v1");
    pb_map_str(&raw, 4, "plain", "text");
    envelope(&body, "v1", "Secret", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                     "\"sh.helm.release.v1.demo.v1\",\"namespace\":\"default\",\"labels\":{"
                     "\"name\":\"demo\",\"owner\":\"helm\",\"status\":\"deployed\"},"
                     "\"annotations\":{\"note\":\"\"}},\"data\":{\"release\":\"H4sA/w==\"},"
                     "\"type\":\"helm.sh/release.v1\",\"stringData\":{\"plain\":\"text\"}}");
    json_decref(out);
}

Test(ks_proto, configmap_with_full_metadata)
{
    pb meta = {.n = 0}, raw = {.n = 0}, body, ts = {.n = 0}, del = {.n = 0}, ref = {.n = 0};
    pb_str(&meta, 2, "cfg-");
    pb_str(&meta, 5, "uid-1");
    pb_str(&meta, 6, "42");
    pb_int(&meta, 7, 3);
    pb_int(&ts, 1, 1700000000);
    pb_int(&ts, 2, 5);
    pb_msg(&meta, 8, &ts);
    pb_int(&del, 1, 1700000100);
    pb_msg(&meta, 9, &del);
    pb_int(&meta, 10, 0); /* a pointer field: 0 is kept */
    pb_str(&ref, 1, "Deployment");
    pb_str(&ref, 3, "web");
    pb_str(&ref, 4, "u-2");
    pb_str(&ref, 5, "apps/v1");
    pb_int(&ref, 6, 1);
    pb_int(&ref, 7, 0);
    pb_msg(&meta, 13, &ref);
    pb_str(&meta, 14, "example.com/a");
    pb_str(&meta, 14, "");
    pb_msg(&raw, 1, &meta);
    pb_map_str(&raw, 2, "k", "v");
    pb_map_str(&raw, 2, "k", "last wins");
    pb_map(&raw, 3, "bin", "\x00\x01", 2);
    pb_int(&raw, 4, 1);
    envelope(&body, "v1", "ConfigMap", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                     "\"generateName\":\"cfg-\",\"uid\":\"uid-1\",\"resourceVersion\":\"42\","
                     "\"generation\":3,\"creationTimestamp\":\"2023-11-14T22:13:20Z\","
                     "\"deletionTimestamp\":\"2023-11-14T22:15:00Z\","
                     "\"deletionGracePeriodSeconds\":0,\"ownerReferences\":[{\"kind\":"
                     "\"Deployment\",\"name\":\"web\",\"uid\":\"u-2\",\"apiVersion\":\"apps/v1\","
                     "\"controller\":true,\"blockOwnerDeletion\":false}],\"finalizers\":["
                     "\"example.com/a\",\"\"]},\"data\":{\"k\":\"last wins\"},\"binaryData\":{"
                     "\"bin\":\"AAE=\"},\"immutable\":true}");
    json_decref(out);
}

Test(ks_proto, delete_options)
{
    pb raw = {.n = 0}, pre = {.n = 0}, body;
    pb_int(&raw, 1, (uint64_t)-1); /* negative int64: a 10-byte varint */
    pb_str(&pre, 1, "uid-9");
    pb_str(&pre, 2, "");
    pb_msg(&raw, 2, &pre);
    pb_int(&raw, 3, 0);
    pb_str(&raw, 4, "Background");
    pb_str(&raw, 5, "All");
    envelope(&body, "v1", "DeleteOptions", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"gracePeriodSeconds\":-1,"
                     "\"preconditions\":{\"uid\":\"uid-9\",\"resourceVersion\":\"\"},"
                     "\"orphanDependents\":false,\"propagationPolicy\":\"Background\","
                     "\"dryRun\":[\"All\"]}");
    json_decref(out);

    /* gracePeriodSeconds 0 ("delete now") must survive; an empty body is {} plus type. */
    raw.n = 0;
    pb_int(&raw, 1, 0);
    envelope(&body, "meta.k8s.io/v1", "DeleteOptions", &raw);
    out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"DeleteOptions\","
                     "\"gracePeriodSeconds\":0}");
    json_decref(out);
    envelope(&body, "v1", "DeleteOptions", NULL);
    out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\"}");
    json_decref(out);
}

Test(ks_proto, unknown_fields_skipped_and_messages_merged)
{
    pb meta = {.n = 0}, meta2 = {.n = 0}, raw = {.n = 0}, body, mf = {.n = 0};
    pb_str(&meta, 1, "a");
    pb_str(&mf, 1, "kubectl");
    pb_msg(&meta, 17, &mf); /* managedFields */
    pb_int(&meta, 99, 7);
    pb_tag(&meta, 98, 1);
    pb_raw(&meta, "12345678", 8);
    pb_tag(&meta, 97, 5);
    pb_raw(&meta, "1234", 4);
    pb_str(&meta2, 3, "ns");
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 1, &meta2); /* a repeated message field merges */
    pb_str(&raw, 50, "future field");
    body.n = 0;
    pb_raw(&body, "k8s\0", 4);
    pb tm = {.n = 0};
    pb_str(&tm, 1, "v1");
    pb_str(&tm, 2, "Secret");
    pb_int(&tm, 9, 1);
    pb_msg(&body, 1, &tm);
    pb_msg(&body, 2, &raw);
    pb_int(&body, 20, 5);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"a\","
                     "\"namespace\":\"ns\",\"managedFields\":[{\"manager\":\"kubectl\"}]}}");
    json_decref(out);
}

/* `kubectl create namespace x` and `kubectl create serviceaccount y -n x` (kubectl 1.32): every
 * empty field is on the wire and none may appear in the JSON. */
static const uint8_t KUBECTL_NS[] = {
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x4e,
    0x61, 0x6d, 0x65, 0x73, 0x70, 0x61, 0x63, 0x65, 0x12, 0x19, 0x0a, 0x11, 0x0a,
    0x01, 0x78, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38,
    0x00, 0x42, 0x00, 0x12, 0x00, 0x1a, 0x02, 0x0a, 0x00, 0x1a, 0x00, 0x22, 0x00};
static const uint8_t KUBECTL_SA[] = {
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x14, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x0e, 0x53,
    0x65, 0x72, 0x76, 0x69, 0x63, 0x65, 0x41, 0x63, 0x63, 0x6f, 0x75, 0x6e, 0x74,
    0x12, 0x14, 0x0a, 0x12, 0x0a, 0x01, 0x79, 0x12, 0x00, 0x1a, 0x01, 0x78, 0x22,
    0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x1a, 0x00, 0x22, 0x00};

static json_t *decode_bytes(const uint8_t *b, size_t n)
{
    json_t *out = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_proto_decode((const char *)b, n, &out, &e), KC_OK, "%s", e.msg);
    return out;
}

Test(ks_proto, kubectl_create_namespace_and_serviceaccount_bodies)
{
    json_t *out = decode_bytes(KUBECTL_NS, sizeof(KUBECTL_NS));
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
                     "\"x\"},\"spec\":{},\"status\":{}}");
    json_decref(out);
    out = decode_bytes(KUBECTL_SA, sizeof(KUBECTL_SA));
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{"
                     "\"name\":\"y\",\"namespace\":\"x\"}}");
    json_decref(out);
}

Test(ks_proto, namespace_with_finalizers_and_status)
{
    pb meta = {.n = 0}, spec = {.n = 0}, status = {.n = 0}, cond = {.n = 0}, ts = {.n = 0};
    pb raw = {.n = 0}, body;
    pb_str(&meta, 1, "team-a");
    pb_map_str(&meta, 11, "env", "prod");
    pb_str(&spec, 1, "kubernetes");
    pb_str(&spec, 1, "example.com/hold");
    pb_str(&status, 1, "Terminating");
    pb_str(&cond, 1, "NamespaceDeletionContentFailure");
    pb_str(&cond, 2, "False");
    pb_int(&ts, 1, 1700000000);
    pb_msg(&cond, 4, &ts);
    pb_str(&cond, 5, "ContentDeleted");
    pb_str(&cond, 6, "All content successfully deleted");
    pb_msg(&status, 2, &cond);
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 2, &spec);
    pb_msg(&raw, 3, &status);
    envelope(&body, "v1", "Namespace", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
                     "\"team-a\",\"labels\":{\"env\":\"prod\"}},\"spec\":{\"finalizers\":["
                     "\"kubernetes\",\"example.com/hold\"]},\"status\":{\"phase\":"
                     "\"Terminating\",\"conditions\":[{\"type\":"
                     "\"NamespaceDeletionContentFailure\",\"status\":\"False\","
                     "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\",\"reason\":"
                     "\"ContentDeleted\",\"message\":\"All content successfully deleted\"}]}}");
    json_decref(out);
}

Test(ks_proto, serviceaccount_with_secrets_and_automount)
{
    pb meta = {.n = 0}, sec = {.n = 0}, sec2 = {.n = 0}, pull = {.n = 0}, raw = {.n = 0}, body;
    pb_str(&meta, 1, "op");
    pb_str(&meta, 3, "gpu");
    pb_str(&sec, 1, "Secret");
    pb_str(&sec, 2, "gpu");
    pb_str(&sec, 3, "op-token");
    pb_str(&sec, 4, "u-1");
    pb_str(&sec, 5, "v1");
    pb_str(&sec, 6, "7");
    pb_str(&sec, 7, "data");
    pb_str(&sec2, 3, "other");
    pb_str(&pull, 1, "regcred");
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 2, &sec);
    pb_msg(&raw, 2, &sec2);
    pb_msg(&raw, 3, &pull);
    pb_int(&raw, 4, 0); /* *bool false: kept, it disables the token mount */
    envelope(&body, "v1", "ServiceAccount", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{"
                     "\"name\":\"op\",\"namespace\":\"gpu\"},\"secrets\":[{\"kind\":"
                     "\"Secret\",\"namespace\":\"gpu\",\"name\":\"op-token\",\"uid\":\"u-1\","
                     "\"apiVersion\":\"v1\",\"resourceVersion\":\"7\",\"fieldPath\":\"data\"},"
                     "{\"name\":\"other\"}],\"imagePullSecrets\":[{\"name\":\"regcred\"}],"
                     "\"automountServiceAccountToken\":false}");
    json_decref(out);
    /* The wrong wire type for the bool is refused, naming the field. */
    raw.n = 0;
    pb_str(&raw, 4, "yes");
    envelope(&body, "v1", "ServiceAccount", &raw);
    kc_err e;
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "ServiceAccount.automountServiceAccountToken (field 4)"), "%s", e.msg);
}

Test(ks_proto, token_request_as_kubectl_create_token_sends_it)
{
    /* kubectl create token y --duration=2h --audience=a1 --audience=a2 --bound-object-kind=Pod
     * --bound-object-name=p1 --bound-object-uid=u1 */
    pb meta = {.n = 0}, spec = {.n = 0}, ref = {.n = 0}, status = {.n = 0}, raw = {.n = 0}, body;
    pb zero = {.n = 0};
    pb_msg(&meta, 8, &zero);
    pb_str(&spec, 1, "a1");
    pb_str(&spec, 1, "a2");
    pb_str(&ref, 1, "Pod");
    pb_str(&ref, 2, "v1");
    pb_str(&ref, 3, "p1");
    pb_str(&ref, 4, "u1");
    pb_msg(&spec, 3, &ref);
    pb_int(&spec, 4, 7200);
    pb_str(&status, 1, "");
    pb_msg(&status, 2, &zero);
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 2, &spec);
    pb_msg(&raw, 3, &status);
    envelope(&body, "authentication.k8s.io/v1", "TokenRequest", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out,
                "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                "\"metadata\":{},\"spec\":{\"audiences\":[\"a1\",\"a2\"],"
                "\"boundObjectRef\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"name\":"
                "\"p1\",\"uid\":\"u1\"},\"expirationSeconds\":7200},\"status\":{\"token\":\"\"}}");
    json_decref(out);
    /* Without flags: no audiences, no expiration (the server's defaults apply). */
    spec.n = 0;
    raw.n = 0;
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 2, &spec);
    envelope(&body, "authentication.k8s.io/v1", "TokenRequest", &raw);
    out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                     "\"metadata\":{},\"spec\":{}}");
    json_decref(out);
}

Test(ks_proto, self_subject_access_review_as_kubectl_auth_can_i_sends_it)
{
    /* kubectl auth can-i list pods -n x */
    pb attrs = {.n = 0}, spec = {.n = 0}, status = {.n = 0}, raw = {.n = 0}, body;
    pb_str(&attrs, 1, "x");
    pb_str(&attrs, 2, "list");
    pb_str(&attrs, 3, "");
    pb_str(&attrs, 4, "");
    pb_str(&attrs, 5, "pods");
    pb_str(&attrs, 6, "");
    pb_str(&attrs, 7, "");
    pb_msg(&spec, 1, &attrs);
    pb_int(&status, 1, 0);
    pb_str(&status, 2, "");
    pb_str(&status, 3, "");
    pb_int(&status, 4, 0);
    pb_msg(&raw, 2, &spec);
    pb_msg(&raw, 3, &status);
    envelope(&body, "authorization.k8s.io/v1", "SelfSubjectAccessReview", &raw);
    json_t *out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                     "\"SelfSubjectAccessReview\",\"spec\":{\"resourceAttributes\":{"
                     "\"namespace\":\"x\",\"verb\":\"list\",\"resource\":\"pods\"}},"
                     "\"status\":{\"allowed\":false}}");
    json_decref(out);
    /* kubectl auth can-i get /healthz */
    pb nonres = {.n = 0};
    spec.n = 0;
    raw.n = 0;
    pb_str(&nonres, 1, "/healthz");
    pb_str(&nonres, 2, "get");
    pb_msg(&spec, 2, &nonres);
    pb_msg(&raw, 2, &spec);
    envelope(&body, "authorization.k8s.io/v1", "SelfSubjectAccessReview", &raw);
    out = decode_ok(&body);
    assert_json(out, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                     "\"SelfSubjectAccessReview\",\"spec\":{\"nonResourceAttributes\":{"
                     "\"path\":\"/healthz\",\"verb\":\"get\"}}}");
    json_decref(out);
}

Test(ks_proto, rejects_wrong_magic_and_kinds)
{
    kc_err e;
    pb body = {.n = 0};
    pb_raw(&body, "k8s", 3);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "magic"), "%s", e.msg);
    body.n = 0;
    pb_raw(&body, "{\"kind\":\"Secret\"}", 17);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);

    pb raw = {.n = 0};
    /* A kind kubesim does not serve: the message names it and what is decoded. */
    envelope(&body, "batch/v1", "CronJob", &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EUNSUPPORTED);
    cr_assert(strstr(e.msg, "the protobuf encoding of CronJob (apiVersion \"batch/v1\") is not "
                            "supported by kubesim: it decodes the built-in kinds of core/v1"),
              "%s", e.msg);
    envelope(&body, "nvidia.com/v1", "ClusterPolicy", &raw); /* custom resources: JSON only */
    cr_assert_eq(decode_err(&body, &e), KC_EUNSUPPORTED);
    cr_assert(strstr(e.msg, "custom resources are JSON only"), "%s", e.msg);
    envelope(&body, "apps/v1", "Secret", &raw); /* not core/v1 */
    cr_assert_eq(decode_err(&body, &e), KC_EUNSUPPORTED);
    envelope(&body, "v1", "TokenRequest", &raw); /* not authentication.k8s.io/v1 */
    cr_assert_eq(decode_err(&body, &e), KC_EUNSUPPORTED);
    envelope(&body, "v1", NULL, &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "no kind"), "%s", e.msg);

    envelope(&body, "v1", "Secret", &raw);
    pb_str(&body, 3, "gzip");
    cr_assert_eq(decode_err(&body, &e), KC_EUNSUPPORTED);
    cr_assert(strstr(e.msg, "gzip"), "%s", e.msg);
}

/* What `kubectl create deployment web --image=IMG --replicas=2 --port=8080 -- run --fast` sends,
 * plus a rolling update strategy with an int and a percentage and resource quantities. */
Test(ks_proto, deployment_as_kubectl_create_deployment_sends_it)
{
    pb meta = {.n = 0}, sel = {.n = 0}, tmeta = {.n = 0}, port = {.n = 0}, res = {.n = 0};
    pb ctr = {.n = 0}, pspec = {.n = 0}, tmpl = {.n = 0}, ru = {.n = 0}, strat = {.n = 0};
    pb spec = {.n = 0}, raw = {.n = 0}, body, status = {.n = 0}, qty = {.n = 0};
    pb_str(&meta, 1, "web");
    pb_map_str(&meta, 11, "app", "web");
    pb_map_str(&sel, 1, "app", "web");
    pb_map_str(&tmeta, 11, "app", "web");
    pb_int(&port, 3, 8080);
    pb_str(&port, 4, "TCP");
    pb_str(&qty, 1, "500m");
    pb_map(&res, 1, "cpu", qty.b, qty.n);
    pb_str(&ctr, 1, "web");
    pb_str(&ctr, 2, "registry.example/web:1");
    pb_str(&ctr, 3, "run");
    pb_str(&ctr, 3, "--fast");
    pb_msg(&ctr, 6, &port);
    pb_msg(&ctr, 8, &res);
    pb_msg(&pspec, 2, &ctr);
    pb_str(&pspec, 9, ""); /* Go writes zero values of fields kubesim does not decode: accepted */
    pb_int(&pspec, 12, 0);
    pb_msg(&tmpl, 1, &tmeta);
    pb_msg(&tmpl, 2, &pspec);
    pb pct = {.n = 0}, one = {.n = 0};
    pb_int(&pct, 1, 1);
    pb_str(&pct, 3, "25%");
    pb_int(&one, 1, 0);
    pb_int(&one, 2, 1);
    pb_msg(&ru, 1, &pct);
    pb_msg(&ru, 2, &one);
    pb_str(&strat, 1, "RollingUpdate");
    pb_msg(&strat, 2, &ru);
    pb_int(&spec, 1, 2);
    pb_msg(&spec, 2, &sel);
    pb_msg(&spec, 3, &tmpl);
    pb_msg(&spec, 4, &strat);
    pb_msg(&raw, 1, &meta);
    pb_msg(&raw, 2, &spec);
    pb_msg(&raw, 3, &status); /* an empty status: the server's to write */
    envelope(&body, "apps/v1", "Deployment", &raw);
    json_t *out = decode_ok(&body);
    assert_json(
        out,
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
        "\"labels\":{\"app\":\"web\"}},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":"
        "{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"web\",\"image\":\"registry.example/web:1\",\"command\":["
        "\"run\",\"--fast\"],\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}],"
        "\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}]}},\"strategy\":{\"type\":"
        "\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%\",\"maxSurge\":1}}},"
        "\"status\":{}}");
    json_decref(out);

    /* Every field of the Go types is decoded: volumeMounts (9) too. */
    pb vm = {.n = 0};
    pb_str(&vm, 1, "data");
    pb_msg(&ctr, 9, &vm);
    pspec.n = 0;
    pb_msg(&pspec, 2, &ctr);
    tmpl.n = 0;
    pb_msg(&tmpl, 2, &pspec);
    spec.n = 0;
    pb_msg(&spec, 3, &tmpl);
    raw.n = 0;
    pb_msg(&raw, 2, &spec);
    envelope(&body, "apps/v1", "Deployment", &raw);
    kc_err e;
    out = decode_ok(&body);
    json_t *ct = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(out, "spec"), "template"), "spec"),
            "containers"),
        0);
    json_t *mount = json_array_get(json_object_get(ct, "volumeMounts"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(mount, "name")), "data");
    json_decref(out);

    /* IntOrString with a type other than 0 or 1 */
    pb bad = {.n = 0};
    pb_int(&bad, 1, 7);
    ru.n = 0;
    pb_msg(&ru, 1, &bad);
    strat.n = 0;
    pb_msg(&strat, 2, &ru);
    spec.n = 0;
    pb_msg(&spec, 4, &strat);
    raw.n = 0;
    pb_msg(&raw, 2, &spec);
    envelope(&body, "apps/v1", "Deployment", &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "IntOrString.type is neither 0 (int) nor 1 (string)"), "%s", e.msg);
}

Test(ks_proto, malformed_input_names_the_offset)
{
    kc_err e;
    pb body = {.n = 0}, raw = {.n = 0}, meta = {.n = 0};

    /* a tag whose varint never ends */
    pb_raw(&body, "k8s\0\x8a", 5);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert_str_eq(e.msg, "protobuf body: truncated varint at offset 4");

    /* a length running past the end */
    body.n = 0;
    pb_raw(&body, "k8s\0", 4);
    pb_tag(&body, 2, 2);
    pb_varint(&body, 100);
    pb_raw(&body, "abc", 3);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert_str_eq(e.msg, "protobuf body: length 100 at offset 5 runs past the end of the "
                            "enclosing message (offset 9)");

    /* ObjectMeta.name sent as a varint */
    pb_int(&meta, 1, 5);
    pb_msg(&raw, 1, &meta);
    envelope(&body, "v1", "Secret", &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "ObjectMeta.name (field 1) has wire type 0, expected 2 at offset"),
              "%s", e.msg);

    /* a group, field number 0, an invalid wire type, a varint over 64 bits */
    static const char *const bad[] = {"k8s\0\x0b", "k8s\0\x02\x00", "k8s\0\x0e",
                                      "k8s\0\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"};
    static const size_t lens[] = {5, 6, 5, 15};
    for (size_t i = 0; i < 4; i++) {
        body.n = 0;
        pb_raw(&body, bad[i], lens[i]);
        cr_assert_eq(decode_err(&body, &e), KC_EPARSE, "case %zu", i);
        cr_assert(strstr(e.msg, "at offset 4"), "case %zu: %s", i, e.msg);
    }

    /* invalid UTF-8 in a label value */
    meta.n = 0;
    raw.n = 0;
    pb_map_str(&meta, 11, "k", "\xff\xfe");
    pb_msg(&raw, 1, &meta);
    envelope(&body, "v1", "ConfigMap", &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "ObjectMeta.labels") && strstr(e.msg, "UTF-8"), "%s", e.msg);

    /* a timestamp outside years 0-9999 */
    meta.n = 0;
    raw.n = 0;
    pb ts = {.n = 0};
    pb_int(&ts, 1, 400000000000ULL);
    pb_msg(&meta, 8, &ts);
    pb_msg(&raw, 1, &meta);
    envelope(&body, "v1", "ConfigMap", &raw);
    cr_assert_eq(decode_err(&body, &e), KC_EPARSE);
}

Test(ks_proto, every_truncation_fails_cleanly)
{
    pb meta, raw = {.n = 0}, body;
    release_meta(&meta);
    pb_msg(&raw, 1, &meta);
    pb_map(&raw, 2, "release", "payload", 7);
    envelope(&body, "v1", "Secret", &raw);
    size_t ok = 0;
    for (size_t n = 0; n < body.n; n++) {
        json_t *out = (json_t *)0x1;
        kc_err e = {0};
        kc_code rc = ks_proto_decode((const char *)body.b, n, &out, &e);
        if (rc == KC_OK) {
            /* only a cut between two complete envelope fields can parse */
            cr_assert(json_is_object(out));
            json_decref(out);
            ok++;
            continue;
        }
        cr_assert_eq(rc, KC_EPARSE, "prefix %zu: %s", n, e.msg);
        cr_assert_null(out);
        /* 4 bytes: an empty envelope, which names no kind */
        const char *want = n < 4 ? "magic" : n == 4 ? "no kind" : "offset";
        cr_assert(strstr(e.msg, want), "prefix %zu: %s", n, e.msg);
    }
    cr_assert_leq(ok, 2); /* after typeMeta, after raw */
    json_t *out = decode_ok(&body);
    json_decref(out);
}

Test(ks_proto, bad_arguments)
{
    kc_err e = {0};
    cr_assert_eq(ks_proto_decode("k8s", 3, NULL, &e), KC_EARG);
    json_t *out = (json_t *)0x1;
    cr_assert_eq(ks_proto_decode(NULL, 0, &out, NULL), KC_EPARSE);
    cr_assert_null(out);
}
