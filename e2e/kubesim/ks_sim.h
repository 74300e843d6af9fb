/* ks_sim: the kubesim process: its options, its parts, and the calls the parts make on each other.
 */
#ifndef KS_SIM_H
#define KS_SIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_error.h"
#include "ks_store.h"

typedef struct ks_opts {
    const char *dir;         /* state dir: kubeconfig, ca.crt, ca.key, tls.crt, tls.key, logs/ */
    const char *kubeconfig;  /* where to write the kubeconfig (NULL → <dir>/kubeconfig) */
    const char *listen_host; /* "127.0.0.1" */
    int https_port;          /* 0 → ephemeral */
    int http_port;           /* -1 → no plain HTTP listener; 0 → ephemeral */
    bool rbac;               /* authorize ServiceAccount users with RBAC (admin always allowed) */
    int pod_start_ms;        /* kubelet: Pending → Running delay (default 200) */
    int pod_ready_ms;        /* kubelet: Running → Ready delay (default 0) */
    double probe_scale;      /* kubelet: simulated containers' probe delays, periods ×this */
    int node_heartbeat_s;    /* kubelet: node Lease/Ready heartbeat period (default 10) */
    const char *fleet;       /* YAML fleet file of plain nodes to register, or NULL */
    const char *image_map;   /* YAML: image (repository[:tag] glob) → local program, or NULL */
    int verbosity;           /* 0 quiet, 1 writes, 2 every request, 3 bodies */
    size_t history;          /* watch history events kept (default 20000) */
    bool no_controllers;     /* serve the API only (tests of the API layer) */
    /* kubelet: images. Unless any_image, an image must exist in the registries (ks_registry.h:
     * built-in facts plus images_files) or its pull fails (ErrImagePull, ImagePullBackOff). A
     * pull takes pull_latency_ms plus the image's size over pull_mbps (MB/s; 0: no time); a
     * pulled image stays on its node. A node runs one pull at a time (the kubelet's default
     * serializeImagePulls: true) unless parallel_pulls, then at most max_parallel_pulls (0: any
     * number) at once, their downloads sharing the node's pull_mbps equally. A pod's containers
     * pull one after the other, in order. */
    bool any_image;
#define KS_OPTS_MAX_IMAGES_FILES 8
    const char *images_files[KS_OPTS_MAX_IMAGES_FILES]; /* NULL-terminated when shorter */
    double pull_mbps;
    int pull_latency_ms;
    bool parallel_pulls;    /* --serialize-image-pulls=false */
    int max_parallel_pulls; /* --max-parallel-image-pulls N; 0: not set */
} ks_opts;

/* An authenticated caller. */
#define KS_USER_GROUPS 16
typedef struct ks_user {
    char name[256]; /* "admin", "system:serviceaccount:NS:NAME" or an impersonated user */
    char groups[KS_USER_GROUPS][256]; /* "system:masters", "system:serviceaccounts:<ns>", ...
                                       * ("" terminated; impersonation may set any) */
    char uid[128];                    /* Impersonate-Uid, or "" */
    bool admin;                       /* bypasses RBAC */
} ks_user;

typedef struct ks_sim ks_sim;

struct ks_server;
struct ks_controllers;
struct ks_kubelet;
struct ks_auth;
struct ks_admit_state;

struct ks_sim {
    ks_opts opts;
    ks_store *store;
    struct ks_auth *auth;
    struct ks_server *server;
    struct ks_controllers *ctl;
    struct ks_kubelet *kubelet;
    char *server_url;             /* "https://127.0.0.1:PORT" once listening */
    char *http_url;               /* "http://127.0.0.1:PORT" or NULL */
    char *ca_pem;                 /* the cluster CA (PEM) */
    struct ks_admit_state *admit; /* Service clusterIP/nodePort allocators (ks_admit.h) */
};

/* ---- ks_types.c: the built-in served types, with their printer columns ---- */
/* Registers every built-in type (core, apps, coordination, rbac, scheduling, node, policy,
 * apiextensions, events.k8s.io...). */
kc_code ks_types_register_builtin(ks_store *st, kc_err *err);

/* ---- ks_admit.c: defaulting and validation (installed as the store's admission hook) ---- */
kc_code ks_admit(void *sim, const ks_rtype *t, const json_t *old, json_t *obj, bool status_write,
                 kc_err *err);

/* ---- ks_crd.c: CustomResourceDefinitions become served types ---- */
/* Called by the controllers when a CRD is added/changed/deleted: registers or unregisters its
 * served versions and sets the Established / NamesAccepted conditions. */
kc_code ks_crd_sync(ks_sim *sim, const json_t *crd, bool deleted, kc_err *err);
/* Validates a custom object against a structural schema (types, required, enum, pattern,
 * minimum/maximum, x-kubernetes-preserve-unknown-fields); KC_EINVALID naming the field, e.g.
 * `spec.mig.strategy: Unsupported value: "bogus": supported values: "none", "single", "mixed"`. */
kc_code ks_crd_validate(const json_t *schema, const json_t *obj, kc_err *err);

/* ---- ks_proto.c / ks_proto_enc.c: the Kubernetes protobuf encoding ---- */
/* Decodes an `application/vnd.kubernetes.protobuf` body (the "k8s\0" envelope, runtime.Unknown)
 * of a built-in kind (ks_proto_tables.c) into the JSON the API server's Go types marshal; a kind
 * without a protobuf message → KC_EUNSUPPORTED with the kind named, malformed input → KC_EPARSE
 * naming the message, field and byte offset. */
kc_code ks_proto_decode(const char *body, size_t len, json_t **out, kc_err *err);

/* The "k8s\0" envelope's runtime.Unknown: typeMeta, raw (pointing into the body) and
 * contentEncoding. */
typedef struct ks_proto_unknown {
    char api_version[256], kind[256];
    const char *raw;
    size_t raw_len;
    bool have_raw;
    const char *encoding;
    size_t encoding_len;
} ks_proto_unknown;
kc_code ks_proto_unwrap(const char *body, size_t len, ks_proto_unknown *u, kc_err *err);
/* Decodes raw, the message of apiVersion/kind without an envelope. */
kc_code ks_proto_decode_msg(const char *api_version, const char *kind, const char *raw, size_t len,
                            json_t **out, kc_err *err);

/* Whether obj (its apiVersion and kind) has a protobuf message. */
bool ks_proto_can_encode(const json_t *obj);
/* obj → the "k8s\0" envelope with runtime.Unknown{typeMeta, raw, contentEncoding "",
 * contentType ""}, byte for byte as the API server writes it (fields in number order, value
 * fields always, pointers when set, map keys sorted). *out is malloc'ed. JSON keys without a
 * protobuf field are dropped, as the API server drops them; a value of the wrong JSON type is
 * KC_EINVALID naming its path. */
kc_code ks_proto_encode(const json_t *obj, char **out, size_t *len, kc_err *err);
/* A protobuf watch stream's frame: a 4-byte big-endian length and metav1.WatchEvent{type,
 * object: RawExtension{raw: the envelope of obj}}. */
kc_code ks_proto_watch_frame(const char *type, const json_t *obj, char **out, size_t *len,
                             kc_err *err);

/* Accept negotiation of a resource request: KS_MEDIA_PROTOBUF when the most preferred acceptable
 * media range (q-values, then order) is application/vnd.kubernetes.protobuf and proto_ok;
 * KS_MEDIA_JSON for JSON, YAML and wildcards; KS_MEDIA_NONE when nothing acceptable is offered
 * (406). Ranges with an `as=` parameter (Table, PartialObjectMetadata) are left to
 * ks_accept_parse. */
typedef enum ks_media { KS_MEDIA_JSON, KS_MEDIA_PROTOBUF, KS_MEDIA_NONE } ks_media;
ks_media ks_media_negotiate(const char *accept, bool proto_ok);

/* ---- ks_auth.c: authentication and RBAC ---- */
kc_code ks_auth_new(ks_sim *sim, kc_err *err);
void ks_auth_free(ks_sim *sim);
const char *ks_auth_admin_token(ks_sim *sim);
/* Maps an Authorization header to a user: the admin token, or a ServiceAccount token (each SA
 * gets one, stored in a Secret-like table, see ks_auth_sa_token). KC_EUNAUTHORIZED otherwise. */
kc_code ks_auth_authenticate(ks_sim *sim, const char *authorization, ks_user *user, kc_err *err);
/* The bearer token of a ServiceAccount (created on first use); malloc'd. */
char *ks_auth_sa_token(ks_sim *sim, const char *ns, const char *sa);
/* RBAC: whether user may do verb (get list watch create update patch delete deletecollection)
 * on group/resource[/sub] in ns (NULL: cluster scope) named name (NULL: any). Always true for
 * admin users and when opts.rbac is off. reason gets why not. */
bool ks_auth_allowed(ks_sim *sim, const ks_user *user, const char *verb, const char *group,
                     const char *resource, const char *sub, const char *ns, const char *name,
                     char *reason, size_t reason_size);
/* ks_auth_allowed for a SelfSubjectAccessReview (`kubectl auth can-i`): the same answer, recorded
 * as a decision with "review":true, since no request was made. */
bool ks_auth_review(ks_sim *sim, const ks_user *user, const char *verb, const char *group,
                    const char *resource, const char *sub, const char *ns, const char *name,
                    char *reason, size_t reason_size);

/* ---- ks_pki.c: the cluster CA, the serving certificate, the kubeconfig ---- */
/* Creates (or reuses from opts.dir) a CA and a serving cert for 127.0.0.1/localhost; fills
 * sim->ca_pem and writes ca.crt, tls.crt, tls.key into opts.dir. *cert_pem and *key_pem malloc'd.
 */
kc_code ks_pki_init(ks_sim *sim, char **cert_pem, char **key_pem, kc_err *err);
/* Writes a kubeconfig (cluster "kubesim", user "admin" with the admin token, context "kubesim",
 * certificate-authority-data) pointing at sim->server_url. */
kc_code ks_pki_write_kubeconfig(ks_sim *sim, const char *path, kc_err *err);

/* ---- ks_server.c: the HTTP(S) API server ---- */
kc_code ks_server_start(ks_sim *sim, const char *cert_pem, const char *key_pem, kc_err *err);
void ks_server_stop(ks_sim *sim);
/* Requests per client (user agent + user) and verb/resource, for benchmarks (JSON object). */
json_t *ks_server_request_stats(ks_sim *sim);

/* ---- ks_controllers.c: GC, namespaces, Deployments, ReplicaSets, DaemonSets, scheduler,
 * services/endpoints, CRDs ---- */
kc_code ks_controllers_start(ks_sim *sim, kc_err *err);
void ks_controllers_stop(ks_sim *sim);
/* Per controller: keys synced and milliseconds spent syncing ({"daemonset-controller": {"syncs":
 * N, "busyMs": M}, ...}), for GET /kubesim/requests. */
json_t *ks_controllers_stats(ks_sim *sim);

/* ---- ks_kubelet.c: pod lifecycle on the simulated nodes, local processes, logs ---- */
kc_code ks_kubelet_start(ks_sim *sim, kc_err *err);
/* The kubelet's validation of serializeImagePulls and maxParallelImagePulls (max NULL: not set),
 * with its messages ("invalid configuration: ..."); false with msg when refused. ks_kubelet_start
 * applies it to opts (max_parallel_pulls 0: not set). */
bool ks_kubelet_check_pulls(bool serialize, const long *max, char *msg, size_t size);
void ks_kubelet_stop(ks_sim *sim);
/* Registers a node object (used for fleet files of plain nodes). */
kc_code ks_kubelet_add_node(ks_sim *sim, const json_t *node, kc_err *err);
/* The log of a pod's container (container NULL: the first). *out malloc'd; tail_lines < 0: all.
 * KC_ENOTFOUND / KC_EBADREQUEST with the API server's messages. */
kc_code ks_kubelet_logs(ks_sim *sim, const char *ns, const char *pod, const char *container,
                        long tail_lines, char **out, size_t *len, kc_err *err);
/* Appends to a pod's log (nodesim-like programs and simulated containers write here). */
void ks_kubelet_append_log(ks_sim *sim, const char *ns, const char *pod, const char *container,
                           const char *text, size_t len);

#endif
