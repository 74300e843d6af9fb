/* ks_auth: bearer-token authentication (the admin token, one token per ServiceAccount) and the
 * authorization entry point that applies RBAC to non-admin users and records every decision. */
#include "ks_auth.h"
#include "ks_pki.h"

#include "kc_log.h"
#include "kc_map.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct sa_tok {
    char *ns;
    char *name;
    char *token;
} sa_tok;

struct ks_auth {
    char admin_token[33];
    pthread_mutex_t mu;
    kc_map *sa_by_key;   /* "ns/name" → sa_tok (owned) */
    kc_map *sa_by_token; /* token → the same sa_tok (borrowed) */
    ks_rbac *rbac;
    pthread_mutex_t dec_mu;
    json_t *decisions; /* array, see ks_auth_decisions */
    kc_map *dec_index; /* decision key → (void *)(index + 1) into decisions */
    FILE *dec_file;    /* <dir>/auth-decisions.jsonl or NULL */
    char *tokens_path; /* <dir>/sa-tokens.json: the ServiceAccount tokens, kept across starts */
};

static void sa_tok_free(void *p)
{
    sa_tok *t = p;
    if (!t)
        return;
    free(t->ns);
    free(t->name);
    free(t->token);
    free(t);
}

void ks_auth_free(ks_sim *sim)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (!a)
        return;
    kc_map_free(a->sa_by_token, NULL);
    kc_map_free(a->sa_by_key, sa_tok_free);
    ks_rbac_free(a->rbac);
    json_decref(a->decisions);
    kc_map_free(a->dec_index, NULL);
    if (a->dec_file)
        fclose(a->dec_file);
    free(a->tokens_path);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->dec_mu);
    free(a);
    sim->auth = NULL;
}

/* Files a token for ns/sa (caller holds mu or is the only thread). False when out of memory. */
static bool sa_add(struct ks_auth *a, const char *ns, const char *sa, const char *token)
{
    char key[600];
    snprintf(key, sizeof(key), "%s/%s", ns, sa);
    sa_tok *t = calloc(1, sizeof(*t));
    if (!t)
        return false;
    t->ns = strdup(ns);
    t->name = strdup(sa);
    t->token = strdup(token);
    if (!t->ns || !t->name || !t->token || kc_map_put(a->sa_by_key, key, t, NULL) != KC_OK) {
        sa_tok_free(t);
        return false;
    }
    if (kc_map_put(a->sa_by_token, t->token, t, NULL) != KC_OK) {
        sa_tok_free(kc_map_remove(a->sa_by_key, key));
        return false;
    }
    return true;
}

/* Writes every ServiceAccount token to tokens_path (mu held), so that tokens handed to pods and
 * to `kubectl create token` stay valid when kubesim restarts on the same directory. */
static void sa_save(struct ks_auth *a)
{
    if (!a->tokens_path)
        return;
    json_t *doc = json_object();
    size_t pos = 0;
    const char *k;
    sa_tok *t;
    while (doc && kc_map_next(a->sa_by_key, &pos, &k, (void **)&t))
        json_object_set_new(doc, k, json_string(t->token));
    char *text = doc ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
    kc_err e = {0};
    if (!text || ks_pki_write_file(a->tokens_path, text, strlen(text), 0600, &e) != KC_OK)
        kc_warn("cannot save the ServiceAccount tokens", "err=\"%s\"", text ? e.msg : "oom");
    free(text);
    json_decref(doc);
}

static void sa_load(struct ks_auth *a)
{
    json_error_t je;
    json_t *doc = json_load_file(a->tokens_path, 0, &je);
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v)
    {
        const char *slash = strchr(k, '/');
        if (!json_is_string(v) || !slash || slash == k || !slash[1])
            continue;
        char ns[300];
        snprintf(ns, sizeof(ns), "%.*s", (int)(slash - k), k);
        sa_add(a, ns, slash + 1, json_string_value(v));
    }
    json_decref(doc);
}

/* The admin token of an earlier start on dir when there is one (kubeconfigs stay valid). */
static bool admin_token_load(struct ks_auth *a, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (ks_pki_read_file(path, &text, &len, NULL) != KC_OK)
        return false;
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    bool ok = len == sizeof(a->admin_token) - 1;
    for (size_t i = 0; ok && i < len; i++)
        ok = (text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f');
    if (ok) {
        memcpy(a->admin_token, text, len);
        a->admin_token[len] = '\0';
    }
    free(text);
    return ok;
}

kc_code ks_auth_new(ks_sim *sim, kc_err *err)
{
    kc_code rc;
    if (!sim || !sim->store)
        return kc_err_set(err, KC_EARG, "ks_auth_new: the simulator has no store yet");
    struct ks_auth *a = calloc(1, sizeof(*a));
    if (!a)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating the authenticator");
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->dec_mu, NULL);
    sim->auth = a;
    a->sa_by_key = kc_map_new();
    a->sa_by_token = kc_map_new();
    a->dec_index = kc_map_new();
    a->decisions = json_array();
    a->rbac = ks_rbac_new(sim->store);
    if (!a->sa_by_key || !a->sa_by_token || !a->dec_index || !a->decisions || !a->rbac) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory creating the authenticator");
        goto fail;
    }
    rc = ks_pki_random_hex(a->admin_token, sizeof(a->admin_token), 16, err);
    if (rc != KC_OK)
        goto fail;
    const char *dir = sim->opts.dir;
    if (dir && *dir) {
        rc = ks_pki_mkdirs(dir, err);
        if (rc != KC_OK)
            goto fail;
        char path[4096];
        snprintf(path, sizeof(path), "%s/admin.token", dir);
        if (!admin_token_load(a, path)) {
            rc = ks_pki_write_file(path, a->admin_token, strlen(a->admin_token), 0600, err);
            if (rc != KC_OK)
                goto fail;
        }
        snprintf(path, sizeof(path), "%s/sa-tokens.json", dir);
        a->tokens_path = strdup(path);
        if (a->tokens_path)
            sa_load(a);
        snprintf(path, sizeof(path), "%s/auth-decisions.jsonl", dir);
        /* Truncated per start: the decisions describe this run only. */
        a->dec_file = fopen(path, "we");
        if (!a->dec_file)
            kc_warn("cannot write the authorization decision log", "path=%s", path);
    }
    return KC_OK;
fail:
    ks_auth_free(sim);
    return rc;
}

const char *ks_auth_admin_token(ks_sim *sim)
{
    return sim && sim->auth ? sim->auth->admin_token : NULL;
}

static void set_group(ks_user *u, int i, const char *fmt, const char *arg)
{
    snprintf(u->groups[i], sizeof(u->groups[i]), fmt, arg);
}

kc_code ks_auth_authenticate(ks_sim *sim, const char *authorization, ks_user *user, kc_err *err)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (!a || !user)
        return kc_err_set(err, KC_EARG, "ks_auth_authenticate: authentication is not set up");
    memset(user, 0, sizeof(*user));
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return kc_err_set(err, KC_EUNAUTHORIZED, "Unauthorized");
    const char *tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    size_t len = strlen(tok);
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\r' || tok[len - 1] == '\n'))
        len--;
    if (len == 0 || len > 255)
        return kc_err_set(err, KC_EUNAUTHORIZED, "Unauthorized");
    char token[256];
    memcpy(token, tok, len);
    token[len] = '\0';
    if (len == strlen(a->admin_token) && CRYPTO_memcmp(token, a->admin_token, len) == 0) {
        snprintf(user->name, sizeof(user->name), "admin");
        set_group(user, 0, "%s", "system:masters");
        set_group(user, 1, "%s", "system:authenticated");
        user->admin = true;
        return KC_OK;
    }
    kc_code rc = KC_EUNAUTHORIZED;
    pthread_mutex_lock(&a->mu);
    const sa_tok *t = kc_map_get(a->sa_by_token, token);
    if (t) {
        snprintf(user->name, sizeof(user->name), "system:serviceaccount:%s:%s", t->ns, t->name);
        set_group(user, 0, "%s", "system:serviceaccounts");
        set_group(user, 1, "system:serviceaccounts:%s", t->ns);
        set_group(user, 2, "%s", "system:authenticated");
        rc = KC_OK;
    }
    pthread_mutex_unlock(&a->mu);
    if (rc != KC_OK)
        return kc_err_set(err, KC_EUNAUTHORIZED, "Unauthorized");
    return KC_OK;
}

char *ks_auth_sa_token(ks_sim *sim, const char *ns, const char *sa)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (!a || !ns || !*ns || !sa || !*sa)
        return NULL;
    char key[600];
    snprintf(key, sizeof(key), "%s/%s", ns, sa);
    char *out = NULL;
    pthread_mutex_lock(&a->mu);
    sa_tok *t = kc_map_get(a->sa_by_key, key);
    if (t) {
        out = strdup(t->token);
        goto unlock;
    }
    char hex[49];
    if (ks_pki_random_hex(hex, sizeof(hex), 24, NULL) != KC_OK || !sa_add(a, ns, sa, hex))
        goto unlock;
    sa_save(a);
    out = strdup(hex);
unlock:
    pthread_mutex_unlock(&a->mu);
    return out;
}

static void record(struct ks_auth *a, const ks_user *user, const char *verb, const char *group,
                   const char *resource, const char *sub, const char *ns, const char *name,
                   bool allowed, const char *reason, bool review)
{
    char key[1400];
    snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%d", user->name,
             verb, group, resource, sub, ns, name, allowed, review);
    pthread_mutex_lock(&a->dec_mu);
    void *idx = kc_map_get(a->dec_index, key);
    if (idx) {
        json_t *e = json_array_get(a->decisions, (size_t)(uintptr_t)idx - 1);
        json_object_set_new(e, "count",
                            json_integer(json_integer_value(json_object_get(e, "count")) + 1));
        goto unlock;
    }
    if (json_array_size(a->decisions) >= KS_AUTH_DECISIONS_MAX)
        goto unlock;
    json_t *e =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:i}", "user", user->name, "verb",
                  verb, "group", group, "resource", resource, "subresource", sub, "namespace", ns,
                  "name", name, "allowed", allowed, "reason", reason, "count", 1);
    if (e && review)
        json_object_set_new(e, "review", json_true());
    if (!e || json_array_append_new(a->decisions, e) != 0)
        goto unlock;
    kc_map_put(a->dec_index, key, (void *)(uintptr_t)json_array_size(a->decisions), NULL);
    if (a->dec_file) {
        char *line = json_dumps(e, JSON_COMPACT);
        if (line) {
            fprintf(a->dec_file, "%s\n", line);
            fflush(a->dec_file);
            free(line);
        }
    }
unlock:
    pthread_mutex_unlock(&a->dec_mu);
}

static bool decide(ks_sim *sim, const ks_user *user, const char *verb, const char *group,
                   const char *resource, const char *sub, const char *ns, const char *name,
                   char *reason, size_t reason_size, bool review)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (reason && reason_size)
        reason[0] = '\0';
    if (!user)
        return false;
    if (user->admin)
        return true;
    if (!a) {
        if (reason && reason_size)
            snprintf(reason, reason_size, "authorization is not set up");
        return false;
    }
    if (!verb)
        verb = "";
    if (!group)
        group = "";
    if (!resource)
        resource = "";
    char why[1024] = "";
    bool ok;
    bool masters = false;
    for (size_t i = 0; i < KS_USER_GROUPS && user->groups[i][0]; i++)
        masters = masters || strcmp(user->groups[i], "system:masters") == 0;
    if (!sim->opts.rbac) {
        ok = true;
        snprintf(why, sizeof(why), "RBAC is off");
    } else if (masters) {
        ok = true;
        snprintf(why, sizeof(why), "member of system:masters");
    } else {
        ok = ks_rbac_authorize(a->rbac, user, verb, group, resource, sub, ns, name, why,
                               sizeof(why));
    }
    record(a, user, verb, group, resource, sub ? sub : "", ns ? ns : "", name ? name : "", ok, why,
           review);
    if (!ok && reason && reason_size)
        snprintf(reason, reason_size, "%s", why);
    return ok;
}

bool ks_auth_allowed(ks_sim *sim, const ks_user *user, const char *verb, const char *group,
                     const char *resource, const char *sub, const char *ns, const char *name,
                     char *reason, size_t reason_size)
{
    return decide(sim, user, verb, group, resource, sub, ns, name, reason, reason_size, false);
}

bool ks_auth_review(ks_sim *sim, const ks_user *user, const char *verb, const char *group,
                    const char *resource, const char *sub, const char *ns, const char *name,
                    char *reason, size_t reason_size)
{
    return decide(sim, user, verb, group, resource, sub, ns, name, reason, reason_size, true);
}

json_t *ks_auth_decisions(ks_sim *sim)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (!a)
        return json_array();
    pthread_mutex_lock(&a->dec_mu);
    json_t *copy = json_deep_copy(a->decisions);
    pthread_mutex_unlock(&a->dec_mu);
    return copy ? copy : json_array();
}

void ks_auth_decisions_clear(ks_sim *sim)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    if (!a)
        return;
    pthread_mutex_lock(&a->dec_mu);
    json_array_clear(a->decisions);
    kc_map *fresh = kc_map_new();
    if (fresh) {
        kc_map_free(a->dec_index, NULL);
        a->dec_index = fresh;
    } else {
        /* Keep the index consistent with an empty array by dropping keys one by one. */
        const char *k;
        size_t pos = 0;
        while (kc_map_next(a->dec_index, &pos, &k, NULL)) {
            kc_map_remove(a->dec_index, k);
            pos = 0;
        }
    }
    pthread_mutex_unlock(&a->dec_mu);
}

static kc_code create_if_absent(ks_sim *sim, const char *resource, json_t *obj, kc_err *err)
{
    const ks_rtype *t = ks_store_type(sim->store, "rbac.authorization.k8s.io", "v1", resource);
    if (!t) {
        json_decref(obj);
        return kc_err_set(err, KC_ENOTFOUND,
                          "bootstrapping RBAC: type rbac.authorization.k8s.io/v1 %s is not "
                          "registered (register the built-in types first)",
                          resource);
    }
    kc_err e;
    kc_code rc = ks_create(sim->store, t, NULL, obj, NULL, &e);
    if (rc == KC_EALREADYEXISTS)
        return KC_OK;
    if (rc != KC_OK) {
        if (err)
            *err = e;
        kc_err_prefix(err, "bootstrapping RBAC %s", resource);
    }
    return rc;
}

/* The metadata the real API server gives its bootstrap roles (a new object per call). */
static json_t *bootstrap_meta(void)
{
    return json_pack("{s:s, s:{s:s}, s:{s:s}}", "name", "cluster-admin", "labels",
                     "kubernetes.io/bootstrapping", "rbac-defaults", "annotations",
                     "rbac.authorization.kubernetes.io/autoupdate", "true");
}

kc_code ks_auth_bootstrap(ks_sim *sim, kc_err *err)
{
    if (!sim || !sim->store)
        return kc_err_set(err, KC_EARG, "ks_auth_bootstrap: no store");
    json_t *role = json_pack("{s:s, s:s, s:o, s:[{s:[s], s:[s], s:[s]}, {s:[s], s:[s]}]}",
                             "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "ClusterRole",
                             "metadata", bootstrap_meta(), "rules", "apiGroups", "*", "resources",
                             "*", "verbs", "*", "nonResourceURLs", "*", "verbs", "*");
    json_t *binding =
        json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}", "apiVersion",
                  "rbac.authorization.k8s.io/v1", "kind", "ClusterRoleBinding", "metadata",
                  bootstrap_meta(), "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind",
                  "ClusterRole", "name", "cluster-admin", "subjects", "apiGroup",
                  "rbac.authorization.k8s.io", "kind", "Group", "name", "system:masters");
    if (!role || !binding) {
        json_decref(role);
        json_decref(binding);
        return kc_err_set(err, KC_ENOMEM, "out of memory bootstrapping RBAC");
    }
    kc_code rc = create_if_absent(sim, "clusterroles", role, err);
    if (rc != KC_OK) {
        json_decref(binding);
        return rc;
    }
    return create_if_absent(sim, "clusterrolebindings", binding, err);
}

/* IsOnlyMutatingGCFields: the update changes nothing but ownerReferences and finalizers. */
static bool only_gc_fields(const json_t *obj, const json_t *old)
{
    json_t *a = json_deep_copy(obj), *b = json_deep_copy(old);
    static const char *const drop[] = {
        "ownerReferences",   "finalizers", "resourceVersion", "managedFields", "generation",
        "creationTimestamp", "uid"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
        json_object_del(json_object_get(a, "metadata"), drop[i]);
        json_object_del(json_object_get(b, "metadata"), drop[i]);
    }
    json_object_del(a, "apiVersion");
    json_object_del(b, "apiVersion");
    json_object_del(a, "kind");
    json_object_del(b, "kind");
    bool same = a && b && json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

static bool in_masters(const ks_user *user)
{
    for (size_t i = 0; i < KS_USER_GROUPS && user->groups[i][0]; i++)
        if (!strcmp(user->groups[i], "system:masters"))
            return true;
    return false;
}

/* `user "NAME" (groups=["a" "b"]) is attempting to grant RBAC permissions not currently held:
 * \n<rules>`, prefixed by `<resource>.rbac.authorization.k8s.io "<name>" is forbidden: `. */
static char *escalation_message(const ks_user *user, const char *resource, const char *name,
                                const char *missing)
{
    char groups[KS_USER_GROUPS * (sizeof(user->groups[0]) + 3) + 3];
    size_t len = (size_t)snprintf(groups, sizeof(groups), "[");
    for (size_t i = 0; i < KS_USER_GROUPS && user->groups[i][0]; i++)
        len += (size_t)snprintf(groups + len, sizeof(groups) - len, "%s\"%s\"", i ? " " : "",
                                user->groups[i]);
    snprintf(groups + len, sizeof(groups) - len, "]");
    char *out = NULL;
    if (asprintf(&out,
                 "%s.rbac.authorization.k8s.io \"%s\" is forbidden: user \"%s\" (groups=%s) is "
                 "attempting to grant RBAC permissions not currently held:\n%s",
                 resource, name, user->name, groups, missing) < 0)
        return NULL;
    return out;
}

static const char *obj_str(const json_t *obj, const char *a, const char *b)
{
    const char *s = json_string_value(json_object_get(json_object_get(obj, a), b));
    return s ? s : "";
}

unsigned ks_auth_escalation(ks_sim *sim, const ks_user *user, const char *resource, const char *ns,
                            const char *req_name, const json_t *obj, const json_t *old, char **msg)
{
    struct ks_auth *a = sim ? sim->auth : NULL;
    *msg = NULL;
    if (!a || !user || !sim->opts.rbac || user->admin || in_masters(user))
        return 0;
    if (!ns)
        ns = "";
    if (old && only_gc_fields(obj, old))
        return 0;
    const char *name = obj_str(obj, "metadata", "name");
    bool role = !strcmp(resource, "roles") || !strcmp(resource, "clusterroles");
    json_t *rules = NULL;
    if (role) {
        /* The storage's own authorizer calls: not requests, so not in the decision log (whose
         * denials tests read as refused requests). */
        if (ks_rbac_authorize(a->rbac, user, "escalate", "rbac.authorization.k8s.io", resource,
                              NULL, ns, req_name, NULL, 0))
            return 0;
        rules = json_incref(json_object_get(obj, "rules"));
    } else {
        const char *kind = obj_str(obj, "roleRef", "kind");
        const char *rname = obj_str(obj, "roleRef", "name");
        const char *rres = !strcmp(kind, "ClusterRole") ? "clusterroles"
                           : !strcmp(kind, "Role")      ? "roles"
                                                        : NULL;
        if (rres && ks_rbac_authorize(a->rbac, user, "bind", "rbac.authorization.k8s.io", rres,
                                      NULL, ns, rname, NULL, 0))
            return 0;
        if (!rres)
            return 0; /* validation refuses the kind */
        rules = ks_rbac_role_rules(a->rbac, kind, rname, ns);
        if (!rules) {
            /* What the real API server answers (the binding's resource, the role's name). */
            if (asprintf(msg, "%s.rbac.authorization.k8s.io \"%s\" not found", resource, rname) < 0)
                *msg = NULL;
            return 404;
        }
    }
    json_t *owner = ks_rbac_rules_for(a->rbac, user, ns);
    char *missing = owner ? ks_rbac_uncovered(owner, rules) : NULL;
    json_decref(owner);
    unsigned code = 0;
    if (missing) {
        *msg = escalation_message(user, resource, name, missing);
        code = 403;
    } else if (role && !strcmp(resource, "clusterroles") &&
               json_is_object(json_object_get(obj, "aggregationRule"))) {
        /* Aggregation can gather anything: it needs * on *.* (and every URL). */
        json_t *full =
            json_pack("[{s:[s], s:[s], s:[s]}, {s:[s], s:[s]}]", "verbs", "*", "apiGroups", "*",
                      "resources", "*", "verbs", "*", "nonResourceURLs", "*");
        owner = ks_rbac_rules_for(a->rbac, user, ns);
        char *gap = owner && full ? ks_rbac_uncovered(owner, full) : NULL;
        if (gap) {
            free(gap);
            if (asprintf(msg,
                         "clusterroles.rbac.authorization.k8s.io \"%s\" is forbidden: must have "
                         "cluster-admin privileges to use the aggregationRule",
                         name) < 0)
                *msg = NULL;
            code = 403;
        }
        json_decref(full);
        json_decref(owner);
    }
    free(missing);
    json_decref(rules);
    return code;
}
