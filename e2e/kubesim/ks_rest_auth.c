/* ks_rest_auth: the API server's authentication and authorization endpoints kubectl uses:
 * ServiceAccount TokenRequests (`kubectl create token`) and SelfSubjectAccessReviews
 * (`kubectl auth can-i`), answered from kubesim's tokens and RBAC evaluator. */
#include "ks_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The audience the API server issues tokens for when the request names none. */
#define KS_TOKEN_AUDIENCE "https://kubernetes.default.svc.cluster.local"
/* TokenRequest limits and default (the API server's validation and defaulting). */
#define KS_TOKEN_MIN_SECONDS     600LL
#define KS_TOKEN_MAX_SECONDS     4294967296LL
#define KS_TOKEN_DEFAULT_SECONDS 3600LL

static enum MHD_Result reply_invalid(ks_req *r, const char *kind, const char *group,
                                     const char *name, const char *field, const char *reason,
                                     const char *body)
{
    char msg[1024], cause[800];
    snprintf(cause, sizeof(cause), "%s", body);
    snprintf(msg, sizeof(msg), "%s.%s \"%s\" is invalid: %s: %s", kind, group, name, field, body);
    json_t *d =
        json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", name, "group", group, "kind",
                  kind, "causes", "reason", reason, "message", cause, "field", field);
    return ks_reply_status(r, 422, "Invalid", msg, d);
}

/* The body's kind, when it names one, must be the expected one (as the API server decodes). */
static bool wrong_kind(ks_req *r, const json_t *body, const char *kind, const char *api_version,
                       enum MHD_Result *ret)
{
    const char *k = json_string_value(json_object_get(body, "kind"));
    const char *av = json_string_value(json_object_get(body, "apiVersion"));
    if ((k && *k && strcmp(k, kind) != 0) || (av && *av && strcmp(av, api_version) != 0)) {
        char msg[600];
        snprintf(msg, sizeof(msg), "the body is a %s%s%s, expected %s %s", av ? av : "",
                 av && *av ? " " : "", k ? k : "", api_version, kind);
        *ret = ks_reply_status(r, 400, "BadRequest", msg, NULL);
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * POST /api/v1/namespaces/NS/serviceaccounts/NAME/token
 */

enum MHD_Result ks_handle_token(ks_req *r)
{
    const ks_route *rt = &r->route;
    if (strcmp(r->method, "POST") != 0)
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource",
                               json_object());
    kc_err err;
    json_t *body = NULL, *sa = NULL, *spec = NULL;
    char *token = NULL;
    enum MHD_Result ret;
    if (r->body_len && ks_decode_body(r, &body, &err) != KC_OK)
        return ks_reply_error(r, &err);
    if (wrong_kind(r, body, "TokenRequest", "authentication.k8s.io/v1", &ret))
        goto out;
    /* The token belongs to an existing ServiceAccount: 404 `serviceaccounts "x" not found`. */
    if (ks_get(r->sim->store, rt->t, rt->ns, rt->name, &sa, &err) != KC_OK) {
        ret = ks_reply_error(r, &err);
        goto out;
    }
    spec = json_deep_copy(json_object_get(body, "spec"));
    if (!json_is_object(spec)) {
        json_decref(spec);
        spec = json_object();
    }
    const json_t *exp = json_object_get(spec, "expirationSeconds");
    json_int_t secs = json_is_integer(exp) ? json_integer_value(exp) : KS_TOKEN_DEFAULT_SECONDS;
    if (secs < KS_TOKEN_MIN_SECONDS || secs > KS_TOKEN_MAX_SECONDS) {
        char detail[200];
        snprintf(detail, sizeof(detail), "Invalid value: %lld: may not specify a duration %s",
                 (long long)secs,
                 secs < KS_TOKEN_MIN_SECONDS ? "less than 10 minutes"
                                             : "larger than 4294967296 seconds");
        ret = reply_invalid(r, "TokenRequest", "authentication.k8s.io", rt->name,
                            "spec.expirationSeconds", "FieldValueInvalid", detail);
        goto out;
    }
    json_object_set_new(spec, "expirationSeconds", json_integer(secs));
    if (json_array_size(json_object_get(spec, "audiences")) == 0)
        json_object_set_new(spec, "audiences", json_pack("[s]", KS_TOKEN_AUDIENCE));
    if (!json_object_get(spec, "boundObjectRef"))
        json_object_set_new(spec, "boundObjectRef", json_null());
    token = ks_auth_sa_token(r->sim, rt->ns, rt->name);
    if (!token) {
        ret = ks_reply_status(r, 500, "InternalError", "out of memory issuing a token", NULL);
        goto out;
    }
    /* kubesim's ServiceAccount tokens never expire; the timestamp tells what was asked for. */
    char expiry[32];
    time_t at = time(NULL) + (time_t)secs;
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(expiry, sizeof(expiry), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *out = json_pack("{s:s, s:s, s:{s:s, s:s, s:n}, s:O, s:{s:s, s:s}}", "kind",
                            "TokenRequest", "apiVersion", "authentication.k8s.io/v1", "metadata",
                            "name", rt->name, "namespace", rt->ns, "creationTimestamp", "spec",
                            spec, "status", "token", token, "expirationTimestamp", expiry);
    ret = out ? ks_reply_json(r, 201, out, NULL)
              : ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
out:
    free(token);
    json_decref(spec);
    json_decref(sa);
    json_decref(body);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews
 */

bool ks_is_ssar_path(const ks_req *r)
{
    return r->nseg == 4 && !strcmp(r->seg[0], "apis") &&
           !strcmp(r->seg[1], "authorization.k8s.io") && !strcmp(r->seg[2], "v1") &&
           !strcmp(r->seg[3], "selfsubjectaccessreviews");
}

static const char *attr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

enum MHD_Result ks_handle_ssar(ks_req *r)
{
    if (strcmp(r->method, "POST") != 0)
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource",
                               json_object());
    snprintf(r->verb, sizeof(r->verb), "create");
    kc_err err;
    json_t *body = NULL;
    if (ks_decode_body(r, &body, &err) != KC_OK)
        return ks_reply_error(r, &err);
    enum MHD_Result ret;
    if (wrong_kind(r, body, "SelfSubjectAccessReview", "authorization.k8s.io/v1", &ret))
        goto out;
    json_t *spec = json_object_get(body, "spec");
    json_t *ra = json_object_get(spec, "resourceAttributes");
    json_t *na = json_object_get(spec, "nonResourceAttributes");
    bool has_ra = json_is_object(ra), has_na = json_is_object(na);
    if (has_ra == has_na) {
        ret = reply_invalid(r, "SelfSubjectAccessReview", "authorization.k8s.io", "",
                            has_ra ? "spec.nonResourceAttributes" : "spec.resourceAttributes",
                            "FieldValueInvalid",
                            has_ra ? "Invalid value: \"non-null\": cannot be specified in "
                                     "combination with resourceAttributes"
                                   : "Invalid value: \"null\": exactly one of "
                                     "nonResourceAttributes or resourceAttributes must be "
                                     "specified");
        goto out;
    }
    bool allowed;
    if (has_ra) {
        const char *ns = attr(ra, "namespace"), *name = attr(ra, "name");
        const char *sub = attr(ra, "subresource");
        char reason[1024];
        allowed = ks_auth_review(r->sim, &r->user, attr(ra, "verb"), attr(ra, "group"),
                                 attr(ra, "resource"), *sub ? sub : NULL, *ns ? ns : NULL,
                                 *name ? name : NULL, reason, sizeof(reason));
    } else {
        /* kubesim's RBAC covers resources only: non-resource URLs are the admin's (or anyone's
         * with RBAC off), as the API server's health and discovery paths are served to all. */
        allowed = r->user.admin || !r->sim->opts.rbac;
    }
    /* Denied requests carry no reason: RBAC denies by having no rule, which kubectl prints as
     * a plain "no". */
    json_t *out = json_pack("{s:s, s:s, s:{s:n}, s:O, s:{s:b}}", "kind", "SelfSubjectAccessReview",
                            "apiVersion", "authorization.k8s.io/v1", "metadata",
                            "creationTimestamp", "spec", spec, "status", "allowed", allowed);
    ret = out ? ks_reply_json(r, 201, out, NULL)
              : ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
out:
    json_decref(body);
    return ret;
}
