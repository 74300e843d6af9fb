/* ks_server_reply: the API server's request helpers and replies: query and header access, Accept
 * negotiation, JSON/text responses, and Status errors with the API server's codes, reasons and
 * details. */
#include "ks_admit.h"
#include "ks_server_int.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * request helpers
 */

const char *ks_req_arg(ks_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *ks_req_header(ks_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

bool ks_req_arg_bool(ks_req *r, const char *key, bool def)
{
    const char *v = ks_req_arg(r, key);
    if (!v)
        return def;
    return strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "True") == 0;
}

static void trim(char **s, char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

ks_as ks_accept_parse(const char *accept, unsigned allowed, const char **version)
{
    if (version)
        *version = "v1";
    if (!accept)
        return KS_AS_JSON;
    const char *p = accept;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char range[512];
        if (n >= sizeof(range))
            n = sizeof(range) - 1;
        memcpy(range, p, n);
        range[n] = '\0';
        p = comma ? comma + 1 : p + strlen(p);

        char *save = NULL;
        char *tok = strtok_r(range, ";", &save);
        if (!tok)
            continue;
        char *ts = tok, *te = tok + strlen(tok);
        trim(&ts, &te);
        *te = '\0';
        bool json = strcasecmp(ts, "application/json") == 0 || strcmp(ts, "*/*") == 0 ||
                    strcasecmp(ts, "application/*") == 0;
        if (!json)
            continue;
        const char *as = NULL, *g = NULL, *v = NULL;
        while ((tok = strtok_r(NULL, ";", &save))) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            char *ks = tok, *ke = eq, *vs = eq + 1, *ve = eq + 1 + strlen(eq + 1);
            trim(&ks, &ke);
            trim(&vs, &ve);
            *ke = '\0';
            *ve = '\0';
            if (strcasecmp(ks, "as") == 0)
                as = vs;
            else if (strcasecmp(ks, "g") == 0)
                g = vs;
            else if (strcasecmp(ks, "v") == 0)
                v = vs;
        }
        if (!as)
            return KS_AS_JSON;
        if ((allowed & (1u << KS_AS_TABLE)) && strcmp(as, "Table") == 0 && g &&
            strcmp(g, "meta.k8s.io") == 0 && v && (!strcmp(v, "v1") || !strcmp(v, "v1beta1"))) {
            if (version)
                *version = strcmp(v, "v1") == 0 ? "v1" : "v1beta1";
            return KS_AS_TABLE;
        }
        if ((allowed & (1u << KS_AS_PARTIAL)) && g && strcmp(g, "meta.k8s.io") == 0 &&
            (!strcmp(as, "PartialObjectMetadata") || !strcmp(as, "PartialObjectMetadataList")) &&
            v && (!strcmp(v, "v1") || !strcmp(v, "v1beta1"))) {
            if (version)
                *version = strcmp(v, "v1") == 0 ? "v1" : "v1beta1";
            return KS_AS_PARTIAL;
        }
        if (strcmp(as, "APIGroupDiscoveryList") == 0 && g && v &&
            strcmp(g, "apidiscovery.k8s.io") == 0) {
            if ((allowed & (1u << KS_AS_DISCOVERY_V2)) && strcmp(v, "v2") == 0) {
                if (version)
                    *version = "v2";
                return KS_AS_DISCOVERY_V2;
            }
            if ((allowed & (1u << KS_AS_DISCOVERY_V2BETA1)) && strcmp(v, "v2beta1") == 0) {
                if (version)
                    *version = "v2beta1";
                return KS_AS_DISCOVERY_V2BETA1;
            }
        }
    }
    return KS_AS_JSON;
}

const char *ks_group_version(char *buf, size_t size, const char *group, const char *version)
{
    if (group && group[0])
        snprintf(buf, size, "%s/%s", group, version);
    else
        snprintf(buf, size, "%s", version);
    return buf;
}

json_t *ks_object_for_route(const ks_route *rt, json_t *obj)
{
    if (!obj || !rt->t)
        return json_incref(obj);
    char gv[256];
    ks_group_version(gv, sizeof(gv), rt->group, rt->version);
    const char *have = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (have && strcmp(have, gv) == 0 && kind && strcmp(kind, rt->t->kind) == 0)
        return json_incref(obj);
    /* The store's objects are shared: change a shallow copy. */
    json_t *c = json_copy(obj);
    if (!c)
        return NULL;
    json_object_set_new(c, "apiVersion", json_string(gv));
    json_object_set_new(c, "kind", json_string(rt->t->kind));
    return c;
}

bool ks_client_gone(ks_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    /* A client that goes away mid-stream closes its socket; nothing else is ever sent on a
     * connection while its response streams, so a hang-up is the only signal to look for. */
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
        return true;
    return false;
}

void ks_req_no_timeout(ks_req *r)
{
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)0);
}

/* ---------------------------------------------------------------------------------------------
 * replies
 */

enum MHD_Result ks_reply(ks_req *r, unsigned status, struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, private");
    for (size_t i = 0; i < json_array_size(r->warnings); i++) {
        /* RFC 7234 warn-code 299 with the text quoted as Go's %q, as the API server sends. */
        char *q = ks_go_quote(json_string_value(json_array_get(r->warnings, i)));
        char *h = NULL;
        if (q && asprintf(&h, "299 - %s", q) >= 0)
            MHD_add_response_header(resp, "Warning", h);
        free(h);
        free(q);
    }
    r->status = (int)status;
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result reply_dump(ks_req *r, unsigned status, json_t *body,
                                  const char *content_type);
static json_t *status_object(unsigned code, const char *reason, const char *message,
                             json_t *details);

/* body (stolen) in protobuf; when it cannot be encoded, a 500 Status in JSON. */
static enum MHD_Result reply_pb(ks_req *r, unsigned status, json_t *body)
{
    char *pb = NULL;
    size_t len = 0;
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = ks_proto_encode(body, &pb, &len, &err);
    json_decref(body);
    if (rc != KC_OK)
        return reply_dump(r, 500, status_object(500, "InternalError", err.msg, NULL), NULL);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, pb, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(pb);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/vnd.kubernetes.protobuf");
    return ks_reply(r, status, resp);
}

enum MHD_Result ks_reply_not_acceptable(ks_req *r)
{
    /* The API server's message names every media type it has, custom resources or not, and the
     * Status itself comes in protobuf when the client asked for it. */
    json_t *st = status_object(406, "NotAcceptable",
                               "only the following media types are accepted: application/json, "
                               "application/yaml, application/vnd.kubernetes.protobuf",
                               NULL);
    if (st &&
        ks_media_negotiate(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), true) == KS_MEDIA_PROTOBUF)
        return reply_pb(r, 406, st);
    return reply_dump(r, 406, st, NULL);
}

/* A JSON object answered in protobuf when the client prefers it (Accept) and its kind has a
 * protobuf message; custom resources never are. *done says whether a reply went out. */
static enum MHD_Result reply_proto(ks_req *r, unsigned status, json_t *body, bool *done)
{
    *done = false;
    const char *accept = ks_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    if (!accept || !strstr(accept, "protobuf") || !json_is_object(body))
        return MHD_NO;
    bool ok = !(r->route.t && r->route.t->crd_name) && ks_proto_can_encode(body);
    ks_media m = ks_media_negotiate(accept, ok);
    /* Discovery, /version and the like stay JSON (kubesim has no protobuf form for them). */
    if (m == KS_MEDIA_JSON || (m == KS_MEDIA_NONE && !r->route.t))
        return MHD_NO;
    *done = true;
    if (m == KS_MEDIA_NONE) {
        json_decref(body);
        return ks_reply_not_acceptable(r);
    }
    return reply_pb(r, status, body);
}

enum MHD_Result ks_reply_json(ks_req *r, unsigned status, json_t *body, const char *content_type)
{
    if (!content_type || !strcmp(content_type, "application/json")) {
        bool done;
        enum MHD_Result ret = reply_proto(r, status, body, &done);
        if (done)
            return ret;
    }
    return reply_dump(r, status, body, content_type);
}

static enum MHD_Result reply_dump(ks_req *r, unsigned status, json_t *body,
                                  const char *content_type)
{
    char *s = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(body);
    if (!s) {
        static const char oom[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                                  "\"status\":\"Failure\",\"message\":\"out of memory\","
                                  "\"reason\":\"InternalError\",\"code\":500}";
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        return ks_reply(r, 500, resp);
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            content_type ? content_type : "application/json");
    return ks_reply(r, status, resp);
}

enum MHD_Result ks_reply_text(ks_req *r, unsigned status, const char *text, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    return ks_reply(r, status, resp);
}

static json_t *status_object(unsigned code, const char *reason, const char *message,
                             json_t *details)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", "Failure", "message", message ? message : "");
    if (!st) {
        json_decref(details);
        return NULL;
    }
    if (reason && reason[0])
        json_object_set_new(st, "reason", json_string(reason));
    if (details)
        json_object_set_new(st, "details", details);
    json_object_set_new(st, "code", json_integer(code));
    return st;
}

enum MHD_Result ks_reply_status(ks_req *r, unsigned code, const char *reason, const char *message,
                                json_t *details)
{
    return ks_reply_json(r, code, status_object(code, reason, message, details), NULL);
}

unsigned ks_http_code(kc_code code, const char **reason)
{
    const char *rs = "InternalError";
    unsigned st = 500;
    switch (code) {
    case KC_EARG:
    case KC_EPARSE:
    case KC_EBADREQUEST:
        st = 400, rs = "BadRequest";
        break;
    case KC_EUNAUTHORIZED:
        st = 401, rs = "Unauthorized";
        break;
    case KC_EFORBIDDEN:
        st = 403, rs = "Forbidden";
        break;
    case KC_ENOTFOUND:
        st = 404, rs = "NotFound";
        break;
    case KC_EMETHOD:
        st = 405, rs = "MethodNotAllowed";
        break;
    case KC_EALREADYEXISTS:
        st = 409, rs = "AlreadyExists";
        break;
    case KC_ECONFLICT:
        st = 409, rs = "Conflict";
        break;
    case KC_EEXPIRED:
        st = 410, rs = "Expired";
        break;
    case KC_EUNSUPPORTED:
        st = 415, rs = "UnsupportedMediaType";
        break;
    case KC_EINVALID:
    case KC_EPATCHTEST:
        st = 422, rs = "Invalid";
        break;
    case KC_ETOOMANYREQUESTS:
        st = 429, rs = "TooManyRequests";
        break;
    case KC_EUNAVAILABLE:
        st = 503, rs = "ServiceUnavailable";
        break;
    case KC_ESERVERTIMEOUT:
    case KC_ETIMEDOUT:
        st = 504, rs = "Timeout";
        break;
    default:
        break;
    }
    if (reason)
        *reason = rs;
    return st;
}

static const char *cause_reason(const char *msg)
{
    static const struct {
        const char *prefix, *reason;
    } map[] = {
        {"Required value", "FieldValueRequired"},   {"Unsupported value", "FieldValueNotSupported"},
        {"Duplicate value", "FieldValueDuplicate"}, {"Forbidden", "FieldValueForbidden"},
        {"Too long", "FieldValueTooLong"},          {"Too many", "FieldValueTooMany"},
        {"Not found", "FieldValueNotFound"},        {"Internal error", "InternalError"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strncmp(msg, map[i].prefix, strlen(map[i].prefix)) == 0)
            return map[i].reason;
    if (strncmp(msg, "Invalid value", 13) == 0 && strstr(msg, "must be of type"))
        return "FieldValueTypeInvalid";
    return "FieldValueInvalid";
}

/* One "field: message" piece of an Invalid message → a StatusCause. */
static json_t *cause_of(const char *piece, size_t len)
{
    char buf[KC_ERR_MSG_MAX];
    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    memcpy(buf, piece, len);
    buf[len] = '\0';
    char *colon = strstr(buf, ": ");
    const char *field = NULL, *msg = buf;
    if (colon) {
        bool fieldlike = colon > buf;
        for (char *c = buf; c < colon; c++)
            if (*c == ' ' || *c == '"')
                fieldlike = false;
        if (fieldlike) {
            *colon = '\0';
            field = buf;
            msg = colon + 2;
        }
    }
    json_t *c = json_pack("{s:s, s:s}", "reason", cause_reason(msg), "message", msg);
    if (c && field)
        json_object_set_new(c, "field", json_string(field));
    return c;
}

/* Splits "a.b: X, c.d: Y" of a bracketed list at ", " followed by a field-like "word: ". */
static json_t *causes_of(const char *text)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    size_t n = strlen(text);
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']') {
        const char *s = text + 1, *end = text + n - 1, *start = s;
        for (const char *p = s; p < end; p++) {
            if (p[0] != ',' || p[1] != ' ')
                continue;
            const char *q = p + 2;
            while (q < end && *q != ' ' && *q != ':' && *q != '"')
                q++;
            if (q + 1 < end && q[0] == ':' && q[1] == ' ' && q > p + 2) {
                json_array_append_new(arr, cause_of(start, (size_t)(p - start)));
                start = p + 2;
            }
        }
        json_array_append_new(arr, cause_of(start, (size_t)(end - start)));
    } else {
        json_array_append_new(arr, cause_of(text, n));
    }
    return arr;
}

json_t *ks_status_for_error(ks_req *r, const kc_err *err, unsigned *http_code)
{
    kc_code code = err ? err->code : KC_ESERVER;
    const char *reason;
    unsigned st = ks_http_code(code, &reason);
    if (err && err->http_status >= 400 && err->http_status < 600 && code == KC_EHTTP)
        st = (unsigned)err->http_status;
    /* Admission keeps the full message and causes of its last 422 (kc_err.msg is truncated). */
    const char *msg = err && err->msg[0] ? ks_admit_message(err) : reason;
    const ks_rtype *t = r->route.t;
    const char *name = r->route.name ? r->route.name : r->obj_name;
    json_t *details = NULL;
    char full[KC_ERR_MSG_MAX + 300];
    if (t && st != 500 && st != 400 && st != 415 && st != 401) {
        details = json_object();
        if (name && name[0])
            json_object_set_new(details, "name", json_string(name));
        if (t->group[0])
            json_object_set_new(details, "group", json_string(t->group));
        json_object_set_new(details, "kind", json_string(st == 422 ? t->kind : t->resource));
        if (st == 422) {
            const char *inv = strstr(msg, " is invalid: ");
            const char *rest = inv ? inv + 13 : msg;
            if (!inv) {
                char qual[200];
                if (t->group[0])
                    snprintf(qual, sizeof(qual), "%s.%s", t->kind, t->group);
                else
                    snprintf(qual, sizeof(qual), "%s", t->kind);
                snprintf(full, sizeof(full), "%s \"%s\" is invalid: %s", qual, name ? name : "",
                         msg);
                msg = full;
            }
            json_t *causes = ks_admit_causes(err);
            if (!causes)
                causes = causes_of(rest);
            if (causes)
                json_object_set_new(details, "causes", causes);
        }
    }
    if (http_code)
        *http_code = st;
    return status_object(st, reason, msg, details);
}

enum MHD_Result ks_reply_error(ks_req *r, const kc_err *err)
{
    unsigned code = 500;
    json_t *st = ks_status_for_error(r, err, &code);
    if (err && err->code == KC_ESERVERTIMEOUT && st) {
        json_t *d = json_object_get(st, "details");
        if (!d)
            json_object_set_new(st, "details", d = json_object());
        json_object_set_new(d, "retryAfterSeconds", json_integer(1));
    }
    return ks_reply_json(r, code, st, NULL);
}

enum MHD_Result ks_reply_not_found(ks_req *r)
{
    return ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                           json_object());
}
