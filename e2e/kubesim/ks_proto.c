/* ks_proto: decoding of the Kubernetes protobuf bodies client-go sends (helm's release Secrets,
 * kubectl create configmap/namespace/serviceaccount/token/deployment, kubectl auth can-i,
 * DeleteOptions): the "k8s\0" envelope, runtime.Unknown, and the Secret / ConfigMap / Namespace /
 * ServiceAccount / Deployment / TokenRequest / SelfSubjectAccessReview / DeleteOptions messages,
 * into their JSON form. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_base64.h"
#include "ks_sim.h"

/* ---- message descriptions ----------------------------------------------------------------- */

typedef enum ftype {
    F_STRING,    /* string */
    F_BYTES,     /* bytes → base64 */
    F_INT64,     /* int64 varint */
    F_BOOL,      /* bool varint */
    F_MSG,       /* embedded message → object */
    F_MAP_STR,   /* map<string,string> */
    F_MAP_BYTES, /* map<string,bytes> → base64 values */
    F_TIME,      /* meta.v1.Time {seconds=1, nanos=2} → RFC 3339 */
    F_INTSTR,    /* util.intstr.IntOrString {type=1, intVal=2, strVal=3} → number or string */
    F_MAP_QTY,   /* map<string, resource.Quantity{string=1}> → string values */
} ftype;

struct pmsg;

typedef struct pfield {
    uint32_t num;
    const char *json;
    ftype type;
    bool repeated;
    bool keep_zero; /* a pointer field in Go: present even when "" / 0 / false */
    const struct pmsg *msg;
} pfield;

typedef struct pmsg {
    const char *name;
    const pfield *fields;
    size_t n;
    /* An unknown field with a value other than its zero value is refused instead of skipped:
     * the message's Go type has fields kubesim does not decode, and dropping one would store a
     * different object than the client sent. */
    bool strict;
} pmsg;

#define MSG(name, arr)                                                                             \
    {                                                                                              \
        name, arr, sizeof(arr) / sizeof(arr[0]), false                                             \
    }
#define STRICT_MSG(name, arr)                                                                      \
    {                                                                                              \
        name, arr, sizeof(arr) / sizeof(arr[0]), true                                              \
    }

static const pfield OWNER_REF_F[] = {
    {1, "kind", F_STRING, false, false, NULL},
    {3, "name", F_STRING, false, false, NULL},
    {4, "uid", F_STRING, false, false, NULL},
    {5, "apiVersion", F_STRING, false, false, NULL},
    {6, "controller", F_BOOL, false, true, NULL},
    {7, "blockOwnerDeletion", F_BOOL, false, true, NULL},
};
static const pmsg OWNER_REF = MSG("OwnerReference", OWNER_REF_F);

static const pfield META_F[] = {
    {1, "name", F_STRING, false, false, NULL},
    {2, "generateName", F_STRING, false, false, NULL},
    {3, "namespace", F_STRING, false, false, NULL},
    {4, "selfLink", F_STRING, false, false, NULL},
    {5, "uid", F_STRING, false, false, NULL},
    {6, "resourceVersion", F_STRING, false, false, NULL},
    {7, "generation", F_INT64, false, false, NULL},
    {8, "creationTimestamp", F_TIME, false, false, NULL},
    {9, "deletionTimestamp", F_TIME, false, false, NULL},
    {10, "deletionGracePeriodSeconds", F_INT64, false, true, NULL},
    {11, "labels", F_MAP_STR, false, false, NULL},
    {12, "annotations", F_MAP_STR, false, false, NULL},
    {13, "ownerReferences", F_MSG, true, false, &OWNER_REF},
    {14, "finalizers", F_STRING, true, false, NULL},
    /* 17 managedFields: server-side apply bookkeeping, skipped like any unknown field */
};
static const pmsg META = MSG("ObjectMeta", META_F);

static const pfield SECRET_F[] = {
    {1, "metadata", F_MSG, false, false, &META}, {2, "data", F_MAP_BYTES, false, false, NULL},
    {3, "type", F_STRING, false, false, NULL},   {4, "stringData", F_MAP_STR, false, false, NULL},
    {5, "immutable", F_BOOL, false, true, NULL},
};
static const pmsg SECRET = MSG("Secret", SECRET_F);

static const pfield CONFIGMAP_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "data", F_MAP_STR, false, false, NULL},
    {3, "binaryData", F_MAP_BYTES, false, false, NULL},
    {4, "immutable", F_BOOL, false, true, NULL},
};
static const pmsg CONFIGMAP = MSG("ConfigMap", CONFIGMAP_F);

static const pfield NS_SPEC_F[] = {
    {1, "finalizers", F_STRING, true, false, NULL},
};
static const pmsg NS_SPEC = MSG("NamespaceSpec", NS_SPEC_F);

static const pfield NS_COND_F[] = {
    {1, "type", F_STRING, false, false, NULL},
    {2, "status", F_STRING, false, false, NULL},
    {4, "lastTransitionTime", F_TIME, false, false, NULL},
    {5, "reason", F_STRING, false, false, NULL},
    {6, "message", F_STRING, false, false, NULL},
};
static const pmsg NS_COND = MSG("NamespaceCondition", NS_COND_F);

static const pfield NS_STATUS_F[] = {
    {1, "phase", F_STRING, false, false, NULL},
    {2, "conditions", F_MSG, true, false, &NS_COND},
};
static const pmsg NS_STATUS = MSG("NamespaceStatus", NS_STATUS_F);

static const pfield NAMESPACE_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "spec", F_MSG, false, false, &NS_SPEC},
    {3, "status", F_MSG, false, false, &NS_STATUS},
};
static const pmsg NAMESPACE = MSG("Namespace", NAMESPACE_F);

static const pfield OBJREF_F[] = {
    {1, "kind", F_STRING, false, false, NULL},
    {2, "namespace", F_STRING, false, false, NULL},
    {3, "name", F_STRING, false, false, NULL},
    {4, "uid", F_STRING, false, false, NULL},
    {5, "apiVersion", F_STRING, false, false, NULL},
    {6, "resourceVersion", F_STRING, false, false, NULL},
    {7, "fieldPath", F_STRING, false, false, NULL},
};
static const pmsg OBJREF = MSG("ObjectReference", OBJREF_F);

static const pfield LOCALREF_F[] = {
    {1, "name", F_STRING, false, false, NULL},
};
static const pmsg LOCALREF = MSG("LocalObjectReference", LOCALREF_F);

static const pfield SA_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "secrets", F_MSG, true, false, &OBJREF},
    {3, "imagePullSecrets", F_MSG, true, false, &LOCALREF},
    {4, "automountServiceAccountToken", F_BOOL, false, true, NULL},
};
static const pmsg SERVICEACCOUNT = MSG("ServiceAccount", SA_F);

static const pfield BOUNDREF_F[] = {
    {1, "kind", F_STRING, false, false, NULL},
    {2, "apiVersion", F_STRING, false, false, NULL},
    {3, "name", F_STRING, false, false, NULL},
    {4, "uid", F_STRING, false, false, NULL},
};
static const pmsg BOUNDREF = MSG("BoundObjectReference", BOUNDREF_F);

static const pfield TOKREQ_SPEC_F[] = {
    {1, "audiences", F_STRING, true, false, NULL},
    {3, "boundObjectRef", F_MSG, false, false, &BOUNDREF},
    {4, "expirationSeconds", F_INT64, false, true, NULL},
};
static const pmsg TOKREQ_SPEC = MSG("TokenRequestSpec", TOKREQ_SPEC_F);

static const pfield TOKREQ_STATUS_F[] = {
    {1, "token", F_STRING, false, false, NULL},
    {2, "expirationTimestamp", F_TIME, false, false, NULL},
};
static const pmsg TOKREQ_STATUS = MSG("TokenRequestStatus", TOKREQ_STATUS_F);

static const pfield TOKREQ_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "spec", F_MSG, false, false, &TOKREQ_SPEC},
    {3, "status", F_MSG, false, false, &TOKREQ_STATUS},
};
static const pmsg TOKENREQUEST = MSG("TokenRequest", TOKREQ_F);

/* fieldSelector (8) and labelSelector (9) are skipped: kubesim's authorizer ignores them. */
static const pfield RES_ATTR_F[] = {
    {1, "namespace", F_STRING, false, false, NULL},
    {2, "verb", F_STRING, false, false, NULL},
    {3, "group", F_STRING, false, false, NULL},
    {4, "version", F_STRING, false, false, NULL},
    {5, "resource", F_STRING, false, false, NULL},
    {6, "subresource", F_STRING, false, false, NULL},
    {7, "name", F_STRING, false, false, NULL},
};
static const pmsg RES_ATTR = MSG("ResourceAttributes", RES_ATTR_F);

static const pfield NONRES_ATTR_F[] = {
    {1, "path", F_STRING, false, false, NULL},
    {2, "verb", F_STRING, false, false, NULL},
};
static const pmsg NONRES_ATTR = MSG("NonResourceAttributes", NONRES_ATTR_F);

static const pfield SSAR_SPEC_F[] = {
    {1, "resourceAttributes", F_MSG, false, false, &RES_ATTR},
    {2, "nonResourceAttributes", F_MSG, false, false, &NONRES_ATTR},
};
static const pmsg SSAR_SPEC = MSG("SelfSubjectAccessReviewSpec", SSAR_SPEC_F);

static const pfield SAR_STATUS_F[] = {
    {1, "allowed", F_BOOL, false, false, NULL},
    {2, "reason", F_STRING, false, false, NULL},
    {3, "evaluationError", F_STRING, false, false, NULL},
    {4, "denied", F_BOOL, false, false, NULL},
};
static const pmsg SAR_STATUS = MSG("SubjectAccessReviewStatus", SAR_STATUS_F);

static const pfield SSAR_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "spec", F_MSG, false, false, &SSAR_SPEC},
    {3, "status", F_MSG, false, false, &SAR_STATUS},
};
static const pmsg SSAR = MSG("SelfSubjectAccessReview", SSAR_F);

static const pfield PRECOND_F[] = {
    {1, "uid", F_STRING, false, true, NULL},
    {2, "resourceVersion", F_STRING, false, true, NULL},
};
static const pmsg PRECOND = MSG("Preconditions", PRECOND_F);

static const pfield DELETE_F[] = {
    {1, "gracePeriodSeconds", F_INT64, false, true, NULL},
    {2, "preconditions", F_MSG, false, true, &PRECOND},
    {3, "orphanDependents", F_BOOL, false, true, NULL},
    {4, "propagationPolicy", F_STRING, false, true, NULL},
    {5, "dryRun", F_STRING, true, false, NULL},
};
static const pmsg DELETE_OPTS = MSG("DeleteOptions", DELETE_F);

/* apps/v1 Deployment as `kubectl create deployment` builds it (name, labels, replicas, selector,
 * containers with image, command, ports, env, resources) and the common pod template fields. */
static const pfield LSELREQ_F[] = {
    {1, "key", F_STRING, false, false, NULL},
    {2, "operator", F_STRING, false, false, NULL},
    {3, "values", F_STRING, true, false, NULL},
};
static const pmsg LSELREQ = STRICT_MSG("LabelSelectorRequirement", LSELREQ_F);

static const pfield LSEL_F[] = {
    {1, "matchLabels", F_MAP_STR, false, false, NULL},
    {2, "matchExpressions", F_MSG, true, false, &LSELREQ},
};
static const pmsg LSEL = STRICT_MSG("LabelSelector", LSEL_F);

static const pfield PORT_F[] = {
    {1, "name", F_STRING, false, false, NULL},
    {2, "hostPort", F_INT64, false, false, NULL},
    {3, "containerPort", F_INT64, false, false, NULL},
    {4, "protocol", F_STRING, false, false, NULL},
    {5, "hostIP", F_STRING, false, false, NULL},
};
static const pmsg PORT = STRICT_MSG("ContainerPort", PORT_F);

static const pfield ENVVAR_F[] = {
    {1, "name", F_STRING, false, false, NULL},
    {2, "value", F_STRING, false, false, NULL},
};
static const pmsg ENVVAR = STRICT_MSG("EnvVar", ENVVAR_F);

static const pfield RESREQ_F[] = {
    {1, "limits", F_MAP_QTY, false, false, NULL},
    {2, "requests", F_MAP_QTY, false, false, NULL},
};
static const pmsg RESREQ = STRICT_MSG("ResourceRequirements", RESREQ_F);

static const pfield CONTAINER_F[] = {
    {1, "name", F_STRING, false, false, NULL},
    {2, "image", F_STRING, false, false, NULL},
    {3, "command", F_STRING, true, false, NULL},
    {4, "args", F_STRING, true, false, NULL},
    {5, "workingDir", F_STRING, false, false, NULL},
    {6, "ports", F_MSG, true, false, &PORT},
    {7, "env", F_MSG, true, false, &ENVVAR},
    {8, "resources", F_MSG, false, true, &RESREQ},
    {13, "terminationMessagePath", F_STRING, false, false, NULL},
    {14, "imagePullPolicy", F_STRING, false, false, NULL},
    {16, "stdin", F_BOOL, false, false, NULL},
    {17, "stdinOnce", F_BOOL, false, false, NULL},
    {18, "tty", F_BOOL, false, false, NULL},
    {20, "terminationMessagePolicy", F_STRING, false, false, NULL},
};
static const pmsg CONTAINER = STRICT_MSG("Container", CONTAINER_F);

static const pfield PODSPEC_F[] = {
    {2, "containers", F_MSG, true, false, &CONTAINER},
    {3, "restartPolicy", F_STRING, false, false, NULL},
    {4, "terminationGracePeriodSeconds", F_INT64, false, true, NULL},
    {6, "dnsPolicy", F_STRING, false, false, NULL},
    {7, "nodeSelector", F_MAP_STR, false, false, NULL},
    {8, "serviceAccountName", F_STRING, false, false, NULL},
    {10, "nodeName", F_STRING, false, false, NULL},
    {11, "hostNetwork", F_BOOL, false, false, NULL},
    {19, "schedulerName", F_STRING, false, false, NULL},
    {20, "initContainers", F_MSG, true, false, &CONTAINER},
    {24, "priorityClassName", F_STRING, false, false, NULL},
};
static const pmsg PODSPEC = STRICT_MSG("PodSpec", PODSPEC_F);

static const pfield PODTMPL_F[] = {
    {1, "metadata", F_MSG, false, true, &META},
    {2, "spec", F_MSG, false, true, &PODSPEC},
};
static const pmsg PODTMPL = STRICT_MSG("PodTemplateSpec", PODTMPL_F);

static const pfield ROLLING_F[] = {
    {1, "maxUnavailable", F_INTSTR, false, false, NULL},
    {2, "maxSurge", F_INTSTR, false, false, NULL},
};
static const pmsg ROLLING = STRICT_MSG("RollingUpdateDeployment", ROLLING_F);

static const pfield DSTRAT_F[] = {
    {1, "type", F_STRING, false, false, NULL},
    {2, "rollingUpdate", F_MSG, false, false, &ROLLING},
};
static const pmsg DSTRAT = STRICT_MSG("DeploymentStrategy", DSTRAT_F);

static const pfield DSPEC_F[] = {
    {1, "replicas", F_INT64, false, true, NULL},
    {2, "selector", F_MSG, false, false, &LSEL},
    {3, "template", F_MSG, false, true, &PODTMPL},
    {4, "strategy", F_MSG, false, true, &DSTRAT},
    {5, "minReadySeconds", F_INT64, false, false, NULL},
    {6, "revisionHistoryLimit", F_INT64, false, true, NULL},
    {7, "paused", F_BOOL, false, false, NULL},
    {9, "progressDeadlineSeconds", F_INT64, false, true, NULL},
};
static const pmsg DSPEC = STRICT_MSG("DeploymentSpec", DSPEC_F);

/* Field 3, status, is the server's to write: skipped like any unknown field. */
static const pfield DEPLOY_F[] = {
    {1, "metadata", F_MSG, false, false, &META},
    {2, "spec", F_MSG, false, true, &DSPEC},
};
static const pmsg DEPLOYMENT = MSG("Deployment", DEPLOY_F);

static const pfield TYPEMETA_F[] = {
    {1, "apiVersion", F_STRING, false, false, NULL},
    {2, "kind", F_STRING, false, false, NULL},
};
static const pmsg TYPEMETA = MSG("TypeMeta", TYPEMETA_F);

/* ---- the wire format ---------------------------------------------------------------------- */

/* A bounded view of the body: [pos, end) with offsets counted from the body's first byte. */
typedef struct rd {
    const uint8_t *base;
    size_t pos, end;
} rd;

static kc_code perr(kc_err *err, size_t off, const char *what)
{
    return kc_err_set(err, KC_EPARSE, "protobuf body: %s at offset %zu", what, off);
}

static kc_code read_varint(rd *r, uint64_t *out, kc_err *err)
{
    size_t start = r->pos;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->pos >= r->end)
            return perr(err, start, "truncated varint");
        uint8_t b = r->base[r->pos++];
        if (i == 9 && b > 1)
            return perr(err, start, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return KC_OK;
        }
    }
    return perr(err, start, "varint longer than 10 bytes");
}

static kc_code read_tag(rd *r, uint32_t *num, int *wire, kc_err *err)
{
    size_t start = r->pos;
    uint64_t tag = 0;
    kc_code rc = read_varint(r, &tag, err);
    if (rc != KC_OK)
        return rc;
    *wire = (int)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
        return perr(err, start, "invalid field number");
    *num = (uint32_t)(tag >> 3);
    if (*wire == 3 || *wire == 4)
        return perr(err, start, "unsupported group (wire type 3/4)");
    if (*wire > 5)
        return perr(err, start, "invalid wire type");
    return KC_OK;
}

/* Reads a length-delimited payload: *sub covers it and r moves past it. */
static kc_code read_bytes(rd *r, rd *sub, kc_err *err)
{
    size_t start = r->pos;
    uint64_t len = 0;
    kc_code rc = read_varint(r, &len, err);
    if (rc != KC_OK)
        return rc;
    if (len > r->end - r->pos)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: length %llu at offset %zu runs past the end of the "
                          "enclosing message (offset %zu)",
                          (unsigned long long)len, start, r->end);
    sub->base = r->base;
    sub->pos = r->pos;
    sub->end = r->pos + (size_t)len;
    r->pos = sub->end;
    return KC_OK;
}

static kc_code skip_field(rd *r, int wire, kc_err *err)
{
    size_t start = r->pos;
    uint64_t v;
    rd sub;
    switch (wire) {
    case 0:
        return read_varint(r, &v, err);
    case 1:
    case 5: {
        size_t n = wire == 1 ? 8 : 4;
        if (r->end - r->pos < n)
            return perr(err, start, "truncated fixed-width field");
        r->pos += n;
        return KC_OK;
    }
    case 2:
        return read_bytes(r, &sub, err);
    default:
        return perr(err, start, "invalid wire type");
    }
}

/* ---- values ------------------------------------------------------------------------------- */

static json_t *string_value(const rd *s, const char *msg, const char *field, kc_err *err)
{
    json_t *j = json_stringn((const char *)s->base + s->pos, s->end - s->pos);
    if (!j)
        kc_err_set(err, KC_EPARSE, "protobuf body: %s.%s at offset %zu is not valid UTF-8", msg,
                   field, s->pos);
    return j;
}

static json_t *bytes_value(const rd *s, kc_err *err)
{
    char *b64 = kc_base64_encode(s->base + s->pos, s->end - s->pos);
    json_t *j = b64 ? json_string(b64) : NULL;
    free(b64);
    if (!j)
        kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
    return j;
}

/* The fields 1..3 of a small message (Time, Quantity, IntOrString, a map entry): want[n] is the
 * wire type field n must have (0 varint, 2 bytes; -1: skipped like any unknown field). Varints
 * land in iv[n], bytes in bv[n] (an empty view when the field is absent); seen[n] says whether it
 * came. */
typedef struct small_msg {
    uint64_t iv[4];
    rd bv[4];
    bool seen[4];
} small_msg;

static kc_code read_small(rd *s, const char *name, const int want[4], small_msg *m, kc_err *err)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < 4; i++)
        m->bv[i] = (rd){s->base, s->pos, s->pos};
    while (s->pos < s->end) {
        uint32_t num = 0;
        int wire;
        size_t at = s->pos;
        kc_code rc = read_tag(s, &num, &wire, err);
        if (rc != KC_OK)
            return rc;
        int w = num < 4 ? want[num] : -1;
        if (w >= 0 && wire != w)
            return kc_err_set(err, KC_EPARSE,
                              "protobuf body: %s field %u with a wire type other than %s at "
                              "offset %zu",
                              name, num, w ? "bytes" : "varint", at);
        if (w == 0)
            rc = read_varint(s, &m->iv[num], err);
        else if (w == 2)
            rc = read_bytes(s, &m->bv[num], err);
        else
            rc = skip_field(s, wire, err);
        if (rc != KC_OK)
            return rc;
        if (w >= 0)
            m->seen[num] = true;
    }
    return KC_OK;
}

/* meta.v1.Time {seconds=1, nanos=2} → "2006-01-02T15:04:05Z" (NULL without error for the zero
 * time). */
static kc_code time_value(rd *s, json_t **out, kc_err *err)
{
    static const int want[4] = {-1, 0, 0, -1};
    small_msg m;
    *out = NULL;
    kc_code rc = read_small(s, "Time", want, &m, err);
    if (rc != KC_OK || (!m.seen[1] && !m.seen[2]))
        return rc;
    int64_t secs = (int64_t)m.iv[1];
    /* Years 0..9999 only, as Go's JSON encoding of a time. */
    if (secs < -62167219200LL || secs > 253402300799LL)
        return perr(err, s->end, "timestamp outside years 0-9999");
    time_t t = (time_t)secs;
    struct tm tm;
    char buf[40];
    if (!gmtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return perr(err, s->end, "timestamp cannot be represented");
    *out = json_string(buf);
    return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
}

/* util.intstr.IntOrString {type=1 (0 int, 1 string), intVal=2, strVal=3}. */
static kc_code intstr_value(rd *s, json_t **out, kc_err *err)
{
    static const int want[4] = {-1, 0, 0, 2};
    small_msg m;
    *out = NULL;
    kc_code rc = read_small(s, "IntOrString", want, &m, err);
    if (rc != KC_OK)
        return rc;
    if (m.iv[1] > 1)
        return perr(err, s->end, "IntOrString.type is neither 0 (int) nor 1 (string)");
    if (m.iv[1] == 1)
        *out = string_value(&m.bv[3], "IntOrString", "strVal", err);
    else
        *out = json_integer((json_int_t)(int32_t)m.iv[2]);
    return *out ? KC_OK : (err && err->code ? err->code : KC_ENOMEM);
}

/* One map entry {key=1, value=2} into map; kind says what the value is (F_MAP_STR, F_MAP_BYTES,
 * F_MAP_QTY). */
static kc_code map_entry(rd *s, json_t *map, int kind, const char *msg, const char *field,
                         kc_err *err)
{
    static const int want[4] = {-1, 2, 2, -1};
    small_msg e;
    kc_code rc = read_small(s, "map entry", want, &e, err);
    if (rc != KC_OK)
        return rc;
    rd val = e.bv[2];
    if (kind == F_MAP_QTY) {
        /* resource.Quantity {string=1}: the quantity's text (other fields are Go-internal). */
        static const int qwant[4] = {-1, 2, -1, -1};
        small_msg q;
        if ((rc = read_small(&e.bv[2], "Quantity", qwant, &q, err)) != KC_OK)
            return rc;
        val = q.bv[1];
    }
    json_t *k = string_value(&e.bv[1], msg, field, err);
    if (!k)
        return err ? err->code : KC_EPARSE;
    json_t *v = kind == F_MAP_BYTES ? bytes_value(&val, err) : string_value(&val, msg, field, err);
    if (!v)
        rc = err ? err->code : KC_EPARSE;
    else if (json_object_setn_new(map, json_string_value(k), json_string_length(k), v) != 0)
        rc = kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
    json_decref(k);
    return rc;
}

static kc_code decode_msg(rd *r, const pmsg *m, json_t *out, kc_err *err);

static json_t *child(json_t *out, const char *key, bool array)
{
    json_t *c = json_object_get(out, key);
    if (array ? json_is_array(c) : json_is_object(c))
        return c;
    c = array ? json_array() : json_object();
    if (c && json_object_set_new(out, key, c) != 0)
        return NULL;
    return c;
}

static kc_code set_value(json_t *out, const pfield *f, json_t *v, kc_err *err)
{
    if (!v)
        return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
    int rc;
    if (f->repeated) {
        json_t *arr = child(out, f->json, true);
        rc = arr ? json_array_append_new(arr, v) : (json_decref(v), -1);
    } else {
        rc = json_object_set_new(out, f->json, v);
    }
    return rc ? kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory") : KC_OK;
}

static kc_code decode_field(rd *r, const pmsg *m, const pfield *f, int wire, size_t at, json_t *out,
                            kc_err *err)
{
    bool want_varint = f->type == F_INT64 || f->type == F_BOOL;
    if (want_varint != (wire == 0) || (!want_varint && wire != 2))
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: %s.%s (field %u) has wire type %d, expected %d at "
                          "offset %zu",
                          m->name, f->json, f->num, wire, want_varint ? 0 : 2, at);
    kc_code rc;
    if (want_varint) {
        uint64_t v;
        if ((rc = read_varint(r, &v, err)) != KC_OK)
            return rc;
        if (!v && !f->keep_zero)
            return KC_OK;
        return set_value(
            out, f, f->type == F_BOOL ? json_boolean(v != 0) : json_integer((json_int_t)v), err);
    }
    rd sub;
    if ((rc = read_bytes(r, &sub, err)) != KC_OK)
        return rc;
    json_t *v = NULL;
    switch (f->type) {
    case F_STRING:
        if (sub.pos == sub.end && !f->keep_zero && !f->repeated)
            return KC_OK;
        if (!(v = string_value(&sub, m->name, f->json, err)))
            return err ? err->code : KC_EPARSE;
        return set_value(out, f, v, err);
    case F_BYTES:
        if (!(v = bytes_value(&sub, err)))
            return KC_ENOMEM;
        return set_value(out, f, v, err);
    case F_TIME:
        if ((rc = time_value(&sub, &v, err)) != KC_OK || !v)
            return rc;
        return set_value(out, f, v, err);
    case F_MAP_STR:
    case F_MAP_BYTES:
    case F_MAP_QTY: {
        json_t *map = child(out, f->json, false);
        if (!map)
            return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
        return map_entry(&sub, map, (int)f->type, m->name, f->json, err);
    }
    case F_INTSTR:
        if ((rc = intstr_value(&sub, &v, err)) != KC_OK)
            return rc;
        return set_value(out, f, v, err);
    case F_MSG: {
        json_t *obj;
        if (f->repeated) {
            if (!(obj = json_object()))
                return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
            if ((rc = decode_msg(&sub, f->msg, obj, err)) != KC_OK) {
                json_decref(obj);
                return rc;
            }
            return set_value(out, f, obj, err);
        }
        /* A message field seen twice merges, as protobuf does. */
        if (!(obj = child(out, f->json, false)))
            return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
        return decode_msg(&sub, f->msg, obj, err);
    }
    default:
        return perr(err, at, "unexpected field type");
    }
}

/* Whether the field just skipped (its value started at value_at) holds its type's zero value:
 * Go's generated code writes every non-pointer field, "" and 0 and false included, and dropping
 * those loses nothing. */
static bool zero_value(const rd *r, int wire, size_t value_at)
{
    if (wire == 0 || wire == 2) /* varint 0, or length 0: one 0x00 byte */
        return r->pos == value_at + 1 && r->base[value_at] == 0;
    return false;
}

static kc_code decode_msg(rd *r, const pmsg *m, json_t *out, kc_err *err)
{
    while (r->pos < r->end) {
        uint32_t num = 0;
        int wire;
        size_t at = r->pos;
        kc_code rc = read_tag(r, &num, &wire, err);
        if (rc != KC_OK)
            return rc;
        const pfield *f = NULL;
        for (size_t i = 0; i < m->n && !f; i++)
            if (m->fields[i].num == num)
                f = &m->fields[i];
        size_t value_at = r->pos;
        rc = f ? decode_field(r, m, f, wire, at, out, err) : skip_field(r, wire, err);
        if (rc == KC_OK && !f && m->strict && !zero_value(r, wire, value_at))
            return kc_err_set(err, KC_EUNSUPPORTED,
                              "protobuf body: %s field %u (offset %zu) is not decoded by kubesim: "
                              "send the object as JSON instead (kubectl apply -f FILE)",
                              m->name, num, at);
        if (rc != KC_OK)
            return rc;
    }
    return KC_OK;
}

/* ---- the envelope ------------------------------------------------------------------------- */

/* The kinds kubesim decodes; api_version NULL: any (DeleteOptions comes in several groups). */
static const struct {
    const char *kind, *api_version;
    const pmsg *msg;
} KINDS[] = {
    {"Secret", "v1", &SECRET},
    {"ConfigMap", "v1", &CONFIGMAP},
    {"Namespace", "v1", &NAMESPACE},
    {"ServiceAccount", "v1", &SERVICEACCOUNT},
    {"TokenRequest", "authentication.k8s.io/v1", &TOKENREQUEST},
    {"SelfSubjectAccessReview", "authorization.k8s.io/v1", &SSAR},
    {"DeleteOptions", NULL, &DELETE_OPTS},
    {"Deployment", "apps/v1", &DEPLOYMENT},
};
#define KIND_LIST                                                                                  \
    "v1 Secret, ConfigMap, Namespace and ServiceAccount, apps/v1 Deployment, "                     \
    "authentication.k8s.io/v1 TokenRequest, authorization.k8s.io/v1 SelfSubjectAccessReview and "  \
    "DeleteOptions"

/* The `kubectl create` subcommand of a kind ("Deployment" → "deployment"), for the message. */
static const char *kind_cmd(const char *kind, char *buf, size_t size)
{
    size_t i = 0;
    for (; kind[i] && i + 1 < size; i++)
        buf[i] = (char)(kind[i] >= 'A' && kind[i] <= 'Z' ? kind[i] + 32 : kind[i]);
    buf[i] = '\0';
    return buf;
}

kc_code ks_proto_decode(const char *body, size_t len, json_t **out, kc_err *err)
{
    static const uint8_t magic[4] = {'k', '8', 's', 0};
    kc_code rc = KC_OK;
    json_t *tm = NULL, *obj = NULL;
    if (!out)
        return kc_err_set(err, KC_EARG, "ks_proto_decode: out is required");
    *out = NULL;
    if (!body || len < 4 || memcmp(body, magic, 4) != 0)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: does not start with the \"k8s\\x00\" magic of a "
                          "Kubernetes protobuf envelope (%zu bytes)",
                          len);
    rd r = {(const uint8_t *)body, 4, len};
    rd raw = {r.base, 0, 0}, enc = {r.base, 0, 0};
    bool have_raw = false;
    if (!(tm = json_object()))
        return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
    while (r.pos < r.end) {
        uint32_t num = 0;
        int wire;
        size_t at = r.pos;
        if ((rc = read_tag(&r, &num, &wire, err)) != KC_OK)
            goto fail;
        if (num >= 1 && num <= 4 && wire != 2) {
            rc = kc_err_set(err, KC_EPARSE,
                            "protobuf body: runtime.Unknown field %u has wire type %d, expected 2 "
                            "at offset %zu",
                            num, wire, at);
            goto fail;
        }
        rd sub;
        if (num >= 1 && num <= 4) {
            if ((rc = read_bytes(&r, &sub, err)) != KC_OK)
                goto fail;
            if (num == 1 && (rc = decode_msg(&sub, &TYPEMETA, tm, err)) != KC_OK)
                goto fail;
            if (num == 2) {
                raw = sub;
                have_raw = true;
            }
            if (num == 3)
                enc = sub;
        } else if ((rc = skip_field(&r, wire, err)) != KC_OK) {
            goto fail;
        }
    }
    if (enc.end > enc.pos) {
        rc = kc_err_set(err, KC_EUNSUPPORTED,
                        "protobuf body: contentEncoding \"%.*s\" is not supported",
                        (int)(enc.end - enc.pos > 64 ? 64 : enc.end - enc.pos),
                        (const char *)enc.base + enc.pos);
        goto fail;
    }
    const char *kind = json_string_value(json_object_get(tm, "kind"));
    const char *api = json_string_value(json_object_get(tm, "apiVersion"));
    if (!kind) {
        rc = kc_err_set(err, KC_EPARSE,
                        "protobuf body: the runtime.Unknown envelope names no kind "
                        "(typeMeta.kind is missing)");
        goto fail;
    }
    const pmsg *m = NULL;
    for (size_t i = 0; i < sizeof(KINDS) / sizeof(KINDS[0]) && !m; i++)
        if (strcmp(kind, KINDS[i].kind) == 0 &&
            (!KINDS[i].api_version || (api && strcmp(api, KINDS[i].api_version) == 0)))
            m = KINDS[i].msg;
    if (!m) {
        /* kubectl's typed `create <kind>` commands send protobuf; apply -f sends JSON. */
        char cmd[64];
        rc = kc_err_set(err, KC_EUNSUPPORTED,
                        "the protobuf encoding of %s (apiVersion \"%s\") is not supported by "
                        "kubesim (it decodes only %s): send the object as JSON instead, e.g. with "
                        "`kubectl apply -f FILE` rather than `kubectl create %s`",
                        kind, api ? api : "", KIND_LIST, kind_cmd(kind, cmd, sizeof(cmd)));
        goto fail;
    }
    if (!(obj = json_object())) {
        rc = kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
        goto fail;
    }
    if (api)
        json_object_set_new(obj, "apiVersion", json_string(api));
    json_object_set_new(obj, "kind", json_string(kind));
    if (have_raw && (rc = decode_msg(&raw, m, obj, err)) != KC_OK)
        goto fail;
    json_decref(tm);
    *out = obj;
    return KC_OK;
fail:
    json_decref(obj);
    json_decref(tm);
    return rc;
}
