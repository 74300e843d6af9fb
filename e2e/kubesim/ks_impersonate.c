/* ks_impersonate: the API server's impersonation filter (k8s.io/apiserver WithImpersonation):
 * Impersonate-User / -Group / -Uid / -Extra-<key> headers, each authorized as the `impersonate`
 * verb on users, serviceaccounts, groups, uids or userextras/<key>, then the request runs as the
 * impersonated user. */
#include "ks_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EXTRA_PREFIX "Impersonate-Extra-"
#define MAX_EXTRA    32

typedef struct imp_req {
    const char *user, *uid;
    const char *groups[KS_USER_GROUPS];
    size_t ngroups;
    bool too_many;
    char extra_key[MAX_EXTRA][128];
    const char *extra_val[MAX_EXTRA];
    size_t nextra;
} imp_req;

/* unescapeExtraKey: percent-decoding of the lowercased header suffix. */
static void unescape_key(char *out, size_t size, const char *in)
{
    size_t n = 0;
    for (const char *p = in; *p && n + 1 < size; p++) {
        unsigned v;
        if (p[0] == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1) {
            out[n++] = (char)v;
            p += 2;
        } else {
            out[n++] = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
        }
    }
    out[n] = '\0';
}

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    imp_req *q = cls;
    if (!key || !value)
        return MHD_YES;
    if (!strcasecmp(key, "Impersonate-User")) {
        if (!q->user)
            q->user = value;
    } else if (!strcasecmp(key, "Impersonate-Uid")) {
        if (!q->uid)
            q->uid = value;
    } else if (!strcasecmp(key, "Impersonate-Group")) {
        if (q->ngroups + 1 < KS_USER_GROUPS)
            q->groups[q->ngroups++] = value;
        else
            q->too_many = true;
    } else if (!strncasecmp(key, EXTRA_PREFIX, strlen(EXTRA_PREFIX))) {
        if (q->nextra < MAX_EXTRA) {
            unescape_key(q->extra_key[q->nextra], sizeof(q->extra_key[0]),
                         key + strlen(EXTRA_PREFIX));
            q->extra_val[q->nextra++] = value;
        } else {
            q->too_many = true;
        }
    }
    return MHD_YES;
}

/* serviceaccount.SplitUsername: "system:serviceaccount:NS:NAME" with both parts non-empty. */
static bool split_sa(const char *user, char *ns, size_t nsz, char *name, size_t nmsz)
{
    static const char prefix[] = "system:serviceaccount:";
    if (strncmp(user, prefix, sizeof(prefix) - 1) != 0)
        return false;
    const char *rest = user + sizeof(prefix) - 1, *colon = strchr(rest, ':');
    if (!colon || colon == rest || !colon[1] || strchr(colon + 1, ':'))
        return false;
    if ((size_t)(colon - rest) >= nsz || strlen(colon + 1) >= nmsz)
        return false;
    snprintf(ns, nsz, "%.*s", (int)(colon - rest), rest);
    snprintf(name, nmsz, "%s", colon + 1);
    return true;
}

/* Authorizes one impersonation; replies 403 with responsewriters.Forbidden's message on denial. */
static bool check(ks_req *r, const char *group, const char *resource, const char *sub,
                  const char *ns, const char *name, enum MHD_Result *ret)
{
    char reason[1024];
    if (ks_auth_allowed(r->sim, &r->user, "impersonate", group, resource, sub, ns, name, reason,
                        sizeof(reason)))
        return true;
    char qual[300], msg[1600];
    if (*group)
        snprintf(qual, sizeof(qual), "%s.%s", resource, group);
    else
        snprintf(qual, sizeof(qual), "%s", resource);
    snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: %s", qual, name, reason);
    json_t *d = json_pack("{s:s}", "name", name);
    if (d && *group)
        json_object_set_new(d, "group", json_string(group));
    if (d)
        json_object_set_new(d, "kind", json_string(resource));
    *ret = ks_reply_status(r, 403, "Forbidden", msg, d);
    return false;
}

static void add_group(ks_user *u, size_t *n, const char *g)
{
    if (*n < KS_USER_GROUPS - 1)
        snprintf(u->groups[(*n)++], sizeof(u->groups[0]), "%s", g);
}

/* Go's %v of the []ObjectReference built from the headers, for the error without a user. */
static void describe(const imp_req *q, char *out, size_t size)
{
    size_t len = (size_t)snprintf(out, size, "[");
    bool first = true;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (len < size)                                                                            \
            len += (size_t)snprintf(out + len, size - len, __VA_ARGS__);                           \
    } while (0)
    for (size_t i = 0; i < q->ngroups; i++, first = false)
        PUT("%s{Group  %s    }", first ? "" : " ", q->groups[i]);
    for (size_t i = 0; i < q->nextra; i++, first = false)
        PUT("%s{UserExtra  %s  authentication.k8s.io/v1  %s}", first ? "" : " ", q->extra_val[i],
            q->extra_key[i]);
    if (q->uid && *q->uid)
        PUT("%s{UID  %s  authentication.k8s.io/v1  }", first ? "" : " ", q->uid);
    PUT("]");
#undef PUT
}

bool ks_impersonate(ks_req *r, enum MHD_Result *ret)
{
    imp_req q;
    memset(&q, 0, sizeof(q));
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect, &q);
    bool has_user = q.user && *q.user;
    bool has_uid = q.uid && *q.uid;
    if (!has_user && !q.ngroups && !q.nextra && !has_uid)
        return false;
    if (!has_user) {
        char what[2048], text[2600];
        describe(&q, what, sizeof(what));
        snprintf(text, sizeof(text),
                 "Internal Server Error: \"%s\": requested %s without impersonating a user\n",
                 r->url, what);
        *ret = ks_reply_text(r, 500, text, strlen(text));
        return true;
    }
    if (q.too_many) {
        *ret = ks_reply_status(r, 400, "BadRequest",
                               "kubesim: too many Impersonate-Group or Impersonate-Extra headers",
                               NULL);
        return true;
    }
    ks_user nu;
    memset(&nu, 0, sizeof(nu));
    size_t ng = 0;
    char sa_ns[256], sa_name[256];
    if (split_sa(q.user, sa_ns, sizeof(sa_ns), sa_name, sizeof(sa_name))) {
        if (!check(r, "", "serviceaccounts", NULL, sa_ns, sa_name, ret))
            return true;
        if (!q.ngroups) {
            add_group(&nu, &ng, "system:serviceaccounts");
            char g[300];
            snprintf(g, sizeof(g), "system:serviceaccounts:%s", sa_ns);
            add_group(&nu, &ng, g);
        }
    } else if (!check(r, "", "users", NULL, NULL, q.user, ret)) {
        return true;
    }
    snprintf(nu.name, sizeof(nu.name), "%s", q.user);
    for (size_t i = 0; i < q.ngroups; i++) {
        if (!check(r, "", "groups", NULL, NULL, q.groups[i], ret))
            return true;
        add_group(&nu, &ng, q.groups[i]);
    }
    for (size_t i = 0; i < q.nextra; i++)
        if (!check(r, "authentication.k8s.io", "userextras", q.extra_key[i], NULL, q.extra_val[i],
                   ret))
            return true;
    if (has_uid) {
        if (!check(r, "authentication.k8s.io", "uids", NULL, NULL, q.uid, ret))
            return true;
        snprintf(nu.uid, sizeof(nu.uid), "%s", q.uid);
    }
    if (strcmp(nu.name, "system:anonymous") != 0) {
        bool add = true;
        for (size_t i = 0; i < ng; i++)
            if (!strcmp(nu.groups[i], "system:authenticated") ||
                !strcmp(nu.groups[i], "system:unauthenticated"))
                add = false;
        if (add)
            add_group(&nu, &ng, "system:authenticated");
    } else {
        bool add = true;
        for (size_t i = 0; i < ng; i++)
            if (!strcmp(nu.groups[i], "system:unauthenticated"))
                add = false;
        if (add)
            add_group(&nu, &ng, "system:unauthenticated");
    }
    r->user = nu; /* not the admin any more: RBAC applies to the impersonated user */
    return false;
}
