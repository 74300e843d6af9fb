/* kc_rest: typed-by-path REST verbs over any group/version/resource, on top of kc_client. */
#ifndef KC_REST_H
#define KC_REST_H

#include <jansson.h>
#include <stdbool.h>

#include "kc_client.h"
#include "kc_error.h"

typedef struct kc_resource {
    const char *group;    /* "" for the core group */
    const char *version;  /* "v1" */
    const char *resource; /* plural, lower case: "pods", "clusterpolicies" */
    bool namespaced;
} kc_resource;

/* Well-known resources. */
extern const kc_resource KC_RES_NODES, KC_RES_PODS, KC_RES_NAMESPACES, KC_RES_CONFIGMAPS,
    KC_RES_SECRETS, KC_RES_SERVICES, KC_RES_SERVICEACCOUNTS, KC_RES_EVENTS, KC_RES_DAEMONSETS,
    KC_RES_DEPLOYMENTS, KC_RES_LEASES, KC_RES_CRDS, KC_RES_CLUSTERPOLICIES;

/* "/api/v1/namespaces/NS/pods/NAME/SUB" or "/apis/G/V/...": ns ignored for cluster-scoped
 * resources, name and sub may be NULL. Segments are URL-escaped. Returns malloc'd, NULL on OOM. */
char *kc_rest_path(const kc_resource *res, const char *ns, const char *name, const char *sub);

typedef struct kc_list_opts {
    const char *label_selector;
    const char *field_selector;
    long limit; /* 0: server default */
    const char *continue_token;
    const char *resource_version;       /* NULL: most recent */
    const char *resource_version_match; /* "NotOlderThan" / "Exact" or NULL */
} kc_list_opts;

/* Appends list/watch query parameters to a path; returns malloc'd. watch adds watch=true,
 * allowWatchBookmarks=true when bookmarks, and timeoutSeconds when > 0. */
char *kc_rest_list_query(const char *path, const kc_list_opts *opts, bool watch, bool bookmarks,
                         long timeout_seconds);

kc_code kc_get(kc_client *c, const kc_resource *res, const char *ns, const char *name, json_t **out,
               kc_err *err);
/* One page; *out is the List object (items, metadata.resourceVersion, metadata.continue). */
kc_code kc_list(kc_client *c, const kc_resource *res, const char *ns, const kc_list_opts *opts,
                json_t **out, kc_err *err);
/* Follows continue tokens (pages of opts->limit, default 500) and returns one List holding every
 * item and the resourceVersion of the last page. */
kc_code kc_list_all(kc_client *c, const kc_resource *res, const char *ns, const kc_list_opts *opts,
                    json_t **out, kc_err *err);
kc_code kc_create(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                  json_t **out, kc_err *err);
/* PUT of the whole object (name from obj.metadata.name); carries obj's resourceVersion, so a
 * stale one yields KC_ECONFLICT. */
kc_code kc_update(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                  json_t **out, kc_err *err);
/* PUT to the /status subresource. */
kc_code kc_update_status(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                         json_t **out, kc_err *err);

typedef enum kc_patch_type {
    KC_PATCH_MERGE,     /* application/merge-patch+json */
    KC_PATCH_JSON,      /* application/json-patch+json */
    KC_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
    KC_PATCH_APPLY      /* application/apply-patch+yaml (server-side apply; body sent as JSON) */
} kc_patch_type;

typedef struct kc_patch_opts {
    const char *subresource;   /* e.g. "status", or NULL */
    const char *field_manager; /* required for APPLY */
    bool force;                /* APPLY: take ownership of conflicting fields */
} kc_patch_opts;

kc_code kc_patch(kc_client *c, const kc_resource *res, const char *ns, const char *name,
                 kc_patch_type type, const json_t *patch, const kc_patch_opts *opts, json_t **out,
                 kc_err *err);

typedef enum kc_propagation {
    KC_PROPAGATE_DEFAULT = 0, /* server's default for the kind */
    KC_PROPAGATE_BACKGROUND,
    KC_PROPAGATE_FOREGROUND,
    KC_PROPAGATE_ORPHAN
} kc_propagation;

/* DELETE with DeleteOptions (propagationPolicy; preconditions.uid when uid is non-NULL). */
kc_code kc_delete(kc_client *c, const kc_resource *res, const char *ns, const char *name,
                  kc_propagation prop, const char *precondition_uid, kc_err *err);

/* The same writes handed to a pipe (kc_pipe_submit): the same checks and request, no waiting.
 * KC_OK means handed over; the answer reaches cb on the pipe's thread (status and body there).
 * Requests with the same lane (e.g. a node's name) reach the server in the order given. */
kc_code kc_create_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                        const json_t *obj, kc_pipe_done_cb cb, void *ud, kc_err *err);
kc_code kc_patch_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                       const char *name, kc_patch_type type, const json_t *patch,
                       const kc_patch_opts *opts, kc_pipe_done_cb cb, void *ud, kc_err *err);
kc_code kc_delete_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                        const char *name, kc_propagation prop, const char *precondition_uid,
                        kc_pipe_done_cb cb, void *ud, kc_err *err);

#endif
