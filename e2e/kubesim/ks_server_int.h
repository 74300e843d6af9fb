/* ks_server_int: the internals shared by kubesim's API server files (ks_server.c, the REST verbs,
 * watch streaming, discovery and Table rendering). Not a public contract: see ks_sim.h. */
#ifndef KS_SERVER_INT_H
#define KS_SERVER_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "kc_error.h"
#include "kc_map.h"
#include "ks_sim.h"
#include "ks_store.h"

#define KS_MAX_BODY     ((size_t)64 << 20) /* request bodies above this get 413 */
#define KS_MAX_SEGMENTS 12

struct ks_server {
    ks_sim *sim;
    struct MHD_Daemon *https_d;
    struct MHD_Daemon *http_d;
    int https_port;
    int http_port; /* -1 when there is no plain listener */
    atomic_bool stopping;
    char nonce[17]; /* random per start: ETags and OpenAPI hashes differ across restarts */
    pthread_mutex_t stats_mu;
    kc_map *stats; /* "user\x1fagent\x1fverb\x1fresource" → uint64_t * (owned) */
    uint64_t total;
    struct ks_faults *faults;   /* fault injection (ks_fault.c) */
    struct ks_evcache *evcache; /* watch events' objects, serialized once (ks_evcache.c) */
};

/* What the client asked for in Accept (the first media range kubesim can produce). */
typedef enum ks_as {
    KS_AS_JSON = 0,
    KS_AS_TABLE,        /* application/json;as=Table;g=meta.k8s.io;v=v1|v1beta1 */
    KS_AS_PARTIAL,      /* as=PartialObjectMetadata(List);g=meta.k8s.io */
    KS_AS_DISCOVERY_V2, /* as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2 */
    KS_AS_DISCOVERY_V2BETA1,
} ks_as;

/* Which media kinds a request may be answered with (bit set of 1 << ks_as). */
#define KS_ACCEPT_OBJECTS   ((1u << KS_AS_TABLE) | (1u << KS_AS_PARTIAL))
#define KS_ACCEPT_DISCOVERY ((1u << KS_AS_DISCOVERY_V2) | (1u << KS_AS_DISCOVERY_V2BETA1))

/* The parsed request path of a resource request. Strings point into ks_req.segbuf. */
typedef struct ks_route {
    const ks_rtype *t;
    const char *group; /* "" for core */
    const char *version;
    const char *resource; /* as in the URL */
    const char *ns;       /* NULL: cluster scope or every namespace */
    const char *name;     /* NULL: the collection */
    const char *sub;      /* NULL or "status", "scale", "log", "eviction", "binding" */
    bool watch_prefix;    /* the deprecated /watch/ path form */
} ks_route;

/* One HTTP request, from its first byte to its completion (MHD's con_cls). */
typedef struct ks_req {
    struct ks_server *srv;
    ks_sim *sim;
    struct MHD_Connection *conn;
    const char *method; /* MHD's, valid for the request */
    char *url;          /* the decoded path (no query), owned */
    int port;           /* port of the listener it came in on */
    bool tls;
    char *body; /* owned, NUL-terminated */
    size_t body_len, body_cap;
    bool body_too_big;
    ks_user user;
    bool authed;
    char agent[64]; /* user agent product ("kubectl") for the stats */
    struct timespec start;
    int status;         /* the status sent, for the log */
    char verb[24];      /* the authorization verb; "" when not a resource request */
    char obj_name[256]; /* the object a create names, for Status details */
    json_t *warnings;   /* texts for `Warning: 299 - "..."` response headers (array) or NULL */
    char *segbuf;       /* copy of url split into segments */
    const char *seg[KS_MAX_SEGMENTS];
    int nseg;
    ks_route route;
    char fault[160]; /* "rule:action,..." of the faults injected, for the log ("" none) */
} ks_req;

/* ---- ks_server.c: an outage for fault injection (ks_fault.c's refusal thread) ---- */

/* Closes the listeners and every connection (streams end). */
void ks_server_pause(struct ks_server *srv);
/* Listens again on the same ports; the listeners already up are kept. */
kc_code ks_server_resume(struct ks_server *srv, kc_err *err);

/* ---- ks_impersonate.c: the Impersonate-* headers ---- */

/* Applies the request's Impersonate-User/-Group/-Uid/-Extra-* headers as the API server does:
 * each authorized as the `impersonate` verb for r->user, then r->user becomes the impersonated
 * user (never the admin). Returns true when it replied (*ret: 403 Forbidden with the API server's
 * message, or its 500 for groups/uid/extras without a user); false to go on. */
bool ks_impersonate(ks_req *r, enum MHD_Result *ret);

/* ---- ks_rest_handlers.c: RBAC escalation prevention on writes ---- */

/* For a write of a Role, ClusterRole, RoleBinding or ClusterRoleBinding (the route's type; other
 * types pass at once): obj is the object to store, old the stored one (NULL for a create). True
 * when refused, with the reply (403 or 404, the API server's message) in *ret. */
bool ks_escalation_refused(ks_req *r, const json_t *obj, const json_t *old, enum MHD_Result *ret);

/* ---- ks_server_reply.c: request helpers and replies ---- */

const char *ks_req_arg(ks_req *r, const char *key);    /* query parameter or NULL */
const char *ks_req_header(ks_req *r, const char *key); /* request header or NULL */
/* A boolean query parameter ("true"/"1"); def when absent. */
bool ks_req_arg_bool(ks_req *r, const char *key, bool def);

/* Parses an Accept header: the first media range kubesim can produce among `allowed` (plain
 * JSON is always allowed and is the default); *version (may be NULL) receives a static string:
 * the v= of the chosen Table/PartialObjectMetadata/discovery form ("v1" otherwise). */
ks_as ks_accept_parse(const char *accept, unsigned allowed, const char **version);

/* Queues resp (destroyed here) with status plus the common headers; records the status. */
enum MHD_Result ks_reply(ks_req *r, unsigned status, struct MHD_Response *resp);
/* JSON body (STOLEN); content_type NULL → "application/json". */
/* 406 NotAcceptable: the Accept header offers no media type kubesim can answer the request in. */
enum MHD_Result ks_reply_not_acceptable(ks_req *r);
enum MHD_Result ks_reply_json(ks_req *r, unsigned status, json_t *body, const char *content_type);
enum MHD_Result ks_reply_text(ks_req *r, unsigned status, const char *text, size_t len);
/* A Status Failure object. details (STOLEN, may be NULL) is put as is. */
enum MHD_Result ks_reply_status(ks_req *r, unsigned code, const char *reason, const char *message,
                                json_t *details);
/* Maps err's code to the API server's status code and reason, with details naming the route's
 * object (name, group, kind = resource, or the Kind for 422 with causes parsed from msg). */
enum MHD_Result ks_reply_error(ks_req *r, const kc_err *err);
/* The Status object ks_reply_error would send (new reference) and its HTTP code. */
json_t *ks_status_for_error(ks_req *r, const kc_err *err, unsigned *http_code);
/* 403 Forbidden for the route's object, reason being the authorizer's sentence ("User \"x\"
 * cannot create resource ..."). */
enum MHD_Result ks_reply_forbidden(ks_req *r, const char *reason);
/* 404 with the API server's "the server could not find the requested resource". */
enum MHD_Result ks_reply_not_found(ks_req *r);
/* ks_kubelet_answers.c: /kubesim/v1/answers[/namespaces/NS/pods/NAME] (admin only). */
enum MHD_Result ks_kubelet_answers_handle(ks_req *r);
/* The HTTP code and reason for a kc_code. */
unsigned ks_http_code(kc_code code, const char **reason);

/* True when the client has closed its end (watch and log streams poll this). */
bool ks_client_gone(ks_req *r);
/* Turns off MHD's idle timeout for this connection (streams can be quiet for minutes). */
void ks_req_no_timeout(ks_req *r);

/* The response object for t: apiVersion rewritten to the route's group/version when it differs
 * (CRDs served at several versions). Returns a new reference (obj itself when unchanged). */
json_t *ks_object_for_route(const ks_route *rt, json_t *obj);
/* "group/version" or "version" for the core group, into buf. */
const char *ks_group_version(char *buf, size_t size, const char *group, const char *version);

/* ---- ks_rest_handlers.c ---- */

/* Serves a resource request (route filled, authorized). */
enum MHD_Result ks_handle_resource(ks_req *r);
/* The request's media type without parameters, lower case, into buf; NULL when absent. */
const char *ks_content_type(ks_req *r, char *buf, size_t size);
/* ?dryRun=All */
bool ks_dry_run(ks_req *r);
/* Decodes the body by Content-Type (JSON, YAML, protobuf) into a JSON object (*out new
 * reference): KC_EBADREQUEST when malformed, KC_EUNSUPPORTED for an unknown media type. */
kc_code ks_decode_body(ks_req *r, json_t **out, kc_err *err);
/* Replies with an object (STOLEN) as JSON, or as a Table / PartialObjectMetadata when the
 * Accept header asks for one. */
enum MHD_Result ks_reply_object(ks_req *r, unsigned status, json_t *obj);

/* ---- ks_rest_fields.c ---- */

/* ?fieldValidation=: how fields a custom object's schema does not declare are handled. */
typedef enum ks_fv {
    KS_FV_WARN = 0, /* the default: a Warning header per unknown field, then pruned */
    KS_FV_IGNORE,   /* pruned silently */
    KS_FV_STRICT,   /* 400 BadRequest "strict decoding error: unknown field ..." (kubectl) */
    KS_FV_BAD,      /* not one of those: 422 (see ks_fv_reply_bad) */
} ks_fv;
ks_fv ks_fv_parse(ks_req *r);
/* The 422 for an unsupported fieldValidation value; options_kind "CreateOptions",
 * "UpdateOptions" or "PatchOptions". */
enum MHD_Result ks_fv_reply_bad(ks_req *r, const char *options_kind);
/* Checks obj (a custom object about to be written through t; anything else passes) against its
 * schema: with Strict, unknown fields are KC_EBADREQUEST with the API server's message (patch:
 * the patch handler's wording); with Warn, each becomes a warning of the reply. */
kc_code ks_fv_check(ks_req *r, ks_fv mode, const ks_rtype *t, const json_t *obj, bool patch,
                    kc_err *err);
/* Adds a warning (`Warning: 299 - "<text>"`) to the reply. */
void ks_req_warn(ks_req *r, const char *text);

/* ---- ks_rest_auth.c ---- */

/* POST serviceaccounts/NAME/token: a TokenRequest (JSON or protobuf) answered with the
 * ServiceAccount's token; 404 when the ServiceAccount does not exist. */
enum MHD_Result ks_handle_token(ks_req *r);
/* Whether the path is /apis/authorization.k8s.io/v1/selfsubjectaccessreviews (segments split). */
bool ks_is_ssar_path(const ks_req *r);
/* POST selfsubjectaccessreviews: whether the caller may do what the review describes (any
 * authenticated user may ask about itself). */
enum MHD_Result ks_handle_ssar(ks_req *r);

/* ---- ks_rest_patch.c ---- */

/* PATCH of an object or its /status: merge, JSON, strategic merge and server-side apply. */
enum MHD_Result ks_handle_patch(ks_req *r);
/* GET/PUT/PATCH of /scale (autoscaling/v1 Scale over spec.replicas). */
enum MHD_Result ks_handle_scale(ks_req *r);

/* ---- ks_rest_select.c ---- */

typedef struct ks_selectors {
    kc_label_selector *labels; /* NULL: everything */
    kc_field_selector *fields; /* NULL: everything */
} ks_selectors;
/* Builds the list/watch selectors for the route from ?labelSelector= and ?fieldSelector=
 * (KC_EBADREQUEST when malformed or a field is not supported for the type). On success the
 * caller frees sel with ks_selectors_free; on error nothing is left to free. */
kc_code ks_selectors_parse(ks_req *r, ks_selectors *sel, kc_err *err);
void ks_selectors_free(ks_selectors *sel);

/* ---- ks_watch_http.c ---- */

/* ?watch=true on a collection: streams events. sel is STOLEN. */
enum MHD_Result ks_handle_watch(ks_req *r, ks_selectors *sel);
/* GET pods/NAME/log?follow=true: streams the log as it grows. */
enum MHD_Result ks_handle_log_follow(ks_req *r, const char *container, long tail_lines);

/* ---- ks_discovery.c ---- */

/* /version, /api, /apis, /api/v1, /apis/G[/V], /openapi/v3[...]: sets *handled and replies when
 * the path is one of those. */
enum MHD_Result ks_handle_discovery(ks_req *r, bool *handled);
/* The verbs of a served type (new array). */
json_t *ks_discovery_verbs(const ks_rtype *t);
/* Kubernetes version-priority comparison ("v1" before "v1beta2" before "v1alpha1"); qsort-like. */
int ks_version_cmp(const char *a, const char *b);

/* ---- ks_table.c (computed cells in ks_table_cells.c) ---- */

typedef enum ks_include { KS_INCLUDE_METADATA = 0, KS_INCLUDE_OBJECT, KS_INCLUDE_NONE } ks_include;

/* ?includeObject= (Metadata by default). */
ks_include ks_include_parse(const char *s);
/* A meta.k8s.io Table of items (array, borrowed) of type t. rv/cont (may be NULL) go to the
 * table's metadata. headers=false leaves columnDefinitions empty (watch events after the first).
 * table_version: "v1" or "v1beta1". New reference, NULL on allocation failure. */
json_t *ks_table_build(const ks_rtype *t, const json_t *items, const char *rv, const char *cont,
                       ks_include include, bool headers, const char *table_version);
/* PartialObjectMetadata of obj (new reference). */
json_t *ks_partial_metadata(const json_t *obj, const char *meta_version);
/* Evaluates a printer-column JSONPath (".status.phase", ".spec.containers[*].image",
 * ".status.conditions[?(@.type==\"Ready\")].status", ".metadata.labels.app\\.io/x") against obj:
 * a new array holding (new references to) every result, empty when nothing matches; NULL on a
 * malformed or unsupported path ("..", unclosed brackets). */
json_t *ks_jsonpath_eval(const json_t *obj, const char *path);
/* The API machinery's HumanDuration of the time since an RFC 3339 timestamp ("5m3s"), into buf:
 * "<unknown>" when it does not parse, "<invalid>" when it lies in the future. */
const char *ks_human_age(char *buf, size_t size, const char *rfc3339, time_t now);

#endif
