/* ks_rbac: RBAC authorization over the Roles, ClusterRoles and bindings held in kubesim's store,
 * with the matching rules of the real authorizer (k8s.io/kubernetes/plugin/pkg/auth/authorizer). */
#include "ks_auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RBAC_GROUP "rbac.authorization.k8s.io"

enum { T_ROLES, T_CROLES, T_RBS, T_CRBS, T_COUNT };
static const char *const type_names[T_COUNT] = {"roles", "clusterroles", "rolebindings",
                                                "clusterrolebindings"};

struct ks_rbac {
    ks_store *st;
    pthread_mutex_t mu;
    const ks_rtype *t[T_COUNT];
    /* One watch per RBAC type, drained on every check: any event means the snapshot is stale.
     * Draining synchronously (rather than from a thread) guarantees that a binding committed
     * before a request is seen by that request. */
    ks_watch *w[T_COUNT];
    bool valid;
    json_t *roles;  /* "ns/name" → Role */
    json_t *croles; /* "name" → ClusterRole */
    json_t *rbs;    /* ns → [RoleBinding] */
    json_t *crbs;   /* [ClusterRoleBinding] */
};

ks_rbac *ks_rbac_new(ks_store *st)
{
    ks_rbac *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->st = st;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void drop_snapshot(ks_rbac *r)
{
    json_decref(r->roles);
    json_decref(r->croles);
    json_decref(r->rbs);
    json_decref(r->crbs);
    r->roles = r->croles = r->rbs = r->crbs = NULL;
    r->valid = false;
}

void ks_rbac_free(ks_rbac *r)
{
    if (!r)
        return;
    for (int i = 0; i < T_COUNT; i++)
        if (r->w[i])
            ks_watch_close(r->w[i]);
    drop_snapshot(r);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const char *str_field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

static const char *meta_field(const json_t *obj, const char *key)
{
    return str_field(json_object_get(obj, "metadata"), key);
}

/* Opens missing watches and drains the open ones; any event or a closed watch invalidates. */
static void check_fresh(ks_rbac *r)
{
    for (int i = 0; i < T_COUNT; i++) {
        if (!r->t[i]) {
            r->t[i] = ks_store_type(r->st, RBAC_GROUP, "v1", type_names[i]);
            if (!r->t[i])
                continue;
        }
        if (!r->w[i]) {
            ks_watch_opts wo = {.rtype = r->t[i], .from_rv = ks_store_rv(r->st)};
            if (ks_watch_open(r->st, &wo, &r->w[i], NULL) != KC_OK)
                r->w[i] = NULL;
            r->valid = false;
            continue;
        }
        for (;;) {
            ks_event ev = {0};
            int got = ks_watch_next(r->w[i], 0, &ev, NULL);
            if (got == 1) {
                json_decref(ev.object);
                r->valid = false;
                continue;
            }
            if (got < 0) {
                ks_watch_close(r->w[i]);
                r->w[i] = NULL;
                r->valid = false;
            }
            break;
        }
    }
}

static json_t *list_all(ks_rbac *r, int i)
{
    json_t *items = NULL;
    if (!r->t[i] || ks_list(r->st, r->t[i], NULL, NULL, &items, NULL, NULL, NULL) != KC_OK)
        return json_array();
    return items;
}

static void rebuild(ks_rbac *r)
{
    drop_snapshot(r);
    r->roles = json_object();
    r->croles = json_object();
    r->rbs = json_object();
    json_t *items = list_all(r, T_ROLES);
    size_t i;
    json_t *it;
    char key[600];
    json_array_foreach(items, i, it)
    {
        snprintf(key, sizeof(key), "%s/%s", meta_field(it, "namespace"), meta_field(it, "name"));
        json_object_set(r->roles, key, it);
    }
    json_decref(items);
    items = list_all(r, T_CROLES);
    json_array_foreach(items, i, it) json_object_set(r->croles, meta_field(it, "name"), it);
    json_decref(items);
    items = list_all(r, T_RBS);
    json_array_foreach(items, i, it)
    {
        const char *ns = meta_field(it, "namespace");
        json_t *arr = json_object_get(r->rbs, ns);
        if (!arr) {
            arr = json_array();
            json_object_set_new(r->rbs, ns, arr);
        }
        json_array_append(arr, it);
    }
    json_decref(items);
    r->crbs = list_all(r, T_CRBS);
    r->valid = r->roles && r->croles && r->rbs && r->crbs;
}

static bool list_has(const json_t *arr, const char *want, bool star)
{
    if (!want)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        if ((star && strcmp(s, "*") == 0) || strcmp(s, want) == 0)
            return true;
    }
    return false;
}

/* ResourceMatches of the real authorizer: "*", the exact "resource[/sub]", or "*\/sub". */
static bool resource_matches(const json_t *resources, const char *resource, const char *sub)
{
    char combined[320];
    if (sub && *sub)
        snprintf(combined, sizeof(combined), "%s/%s", resource, sub);
    else
        snprintf(combined, sizeof(combined), "%s", resource);
    size_t i;
    json_t *v;
    json_array_foreach(resources, i, v)
    {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        if (strcmp(s, "*") == 0 || strcmp(s, combined) == 0)
            return true;
        if (sub && *sub && strncmp(s, "*/", 2) == 0 && strcmp(s + 2, sub) == 0)
            return true;
    }
    return false;
}

bool ks_rbac_rule_allows(const json_t *rule, const char *verb, const char *group,
                         const char *resource, const char *sub, const char *name)
{
    if (!json_is_object(rule))
        return false;
    if (!list_has(json_object_get(rule, "verbs"), verb, true))
        return false;
    if (!list_has(json_object_get(rule, "apiGroups"), group ? group : "", true))
        return false;
    if (!resource_matches(json_object_get(rule, "resources"), resource, sub))
        return false;
    const json_t *names = json_object_get(rule, "resourceNames");
    if (json_array_size(names) == 0)
        return true;
    /* Rules limited to names never match requests without one (list, create, watch of all). */
    return name && *name && list_has(names, name, false);
}

static bool user_in_group(const ks_user *user, const char *group)
{
    for (size_t i = 0; i < sizeof(user->groups) / sizeof(user->groups[0]); i++) {
        if (!user->groups[i][0])
            break;
        if (strcmp(user->groups[i], group) == 0)
            return true;
    }
    return false;
}

/* appliesToUser: binding_ns defaults a ServiceAccount subject's namespace (RoleBindings). */
static bool subject_matches(const json_t *subj, const ks_user *user, const char *binding_ns)
{
    const char *kind = str_field(subj, "kind");
    const char *name = str_field(subj, "name");
    if (strcmp(kind, "User") == 0)
        return strcmp(user->name, name) == 0;
    if (strcmp(kind, "Group") == 0)
        return user_in_group(user, name);
    if (strcmp(kind, "ServiceAccount") == 0) {
        const char *sa_ns = str_field(subj, "namespace");
        if (!*sa_ns)
            sa_ns = binding_ns;
        if (!*sa_ns)
            return false;
        char want[600];
        snprintf(want, sizeof(want), "system:serviceaccount:%s:%s", sa_ns, name);
        return strcmp(user->name, want) == 0;
    }
    return false;
}

static bool binding_applies(const json_t *binding, const ks_user *user, const char *binding_ns)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(binding, "subjects"), i,
                       s) if (subject_matches(s, user, binding_ns)) return true;
    return false;
}

static bool role_allows(const json_t *role, const char *verb, const char *group,
                        const char *resource, const char *sub, const char *name)
{
    size_t i;
    json_t *rule;
    json_array_foreach(
        json_object_get(role, "rules"), i,
        rule) if (ks_rbac_rule_allows(rule, verb, group, resource, sub, name)) return true;
    return false;
}

void ks_rbac_forbidden_message(char *buf, size_t size, const ks_user *user, const char *verb,
                               const char *group, const char *resource, const char *sub,
                               const char *ns)
{
    char res[320];
    if (sub && *sub)
        snprintf(res, sizeof(res), "%s/%s", resource, sub);
    else
        snprintf(res, sizeof(res), "%s", resource);
    if (ns && *ns)
        snprintf(buf, size,
                 "User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the namespace "
                 "\"%s\"",
                 user->name, verb, res, group ? group : "", ns);
    else
        snprintf(buf, size,
                 "User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the cluster scope",
                 user->name, verb, res, group ? group : "");
}

/* Appends one "not found" to the RBAC suffix (as the real authorizer lists broken refs). */
static void note_missing(char *missing, size_t size, const char *kind, const char *name)
{
    size_t len = strlen(missing);
    if (len + 1 >= size)
        return;
    snprintf(missing + len, size - len, "%s%s.rbac.authorization.k8s.io \"%s\" not found",
             len ? ", " : "", kind, name);
}

/* Calls visit for each role bound to user at ns (cluster bindings, then ns's RoleBindings), in
 * the authorizer's order, until it returns true (then true). Missing roles are noted in missing.
 * The snapshot lock is held. */
typedef bool (*role_visit)(const json_t *role, void *ud);

static bool walk_roles(ks_rbac *r, const ks_user *user, const char *ns, role_visit visit, void *ud,
                       char *missing, size_t msize)
{
    size_t i;
    json_t *b;
    json_array_foreach(r->crbs, i, b)
    {
        const json_t *ref = json_object_get(b, "roleRef");
        const char *rname = str_field(ref, "name");
        if (!binding_applies(b, user, "") || strcmp(str_field(ref, "kind"), "ClusterRole") != 0)
            continue;
        const json_t *role = json_object_get(r->croles, rname);
        if (!role)
            note_missing(missing, msize, "clusterrole", rname);
        else if (visit(role, ud))
            return true;
    }
    if (!*ns)
        return false;
    json_array_foreach(json_object_get(r->rbs, ns), i, b)
    {
        if (!binding_applies(b, user, ns))
            continue;
        const json_t *ref = json_object_get(b, "roleRef");
        const char *kind = str_field(ref, "kind");
        const char *rname = str_field(ref, "name");
        const json_t *role = NULL;
        if (strcmp(kind, "Role") == 0) {
            char key[600];
            snprintf(key, sizeof(key), "%s/%s", ns, rname);
            role = json_object_get(r->roles, key);
            if (!role)
                note_missing(missing, msize, "role", rname);
        } else if (strcmp(kind, "ClusterRole") == 0) {
            /* A RoleBinding to a ClusterRole grants its rules in this namespace only. */
            role = json_object_get(r->croles, rname);
            if (!role)
                note_missing(missing, msize, "clusterrole", rname);
        }
        if (role && visit(role, ud))
            return true;
    }
    return false;
}

typedef struct allow_q {
    const char *verb, *group, *resource, *sub, *name;
} allow_q;

static bool visit_allows(const json_t *role, void *ud)
{
    const allow_q *q = ud;
    return role_allows(role, q->verb, q->group, q->resource, q->sub, q->name);
}

bool ks_rbac_authorize(ks_rbac *r, const ks_user *user, const char *verb, const char *group,
                       const char *resource, const char *sub, const char *ns, const char *name,
                       char *reason, size_t reason_size)
{
    char missing[400] = "";
    if (!group)
        group = "";
    if (!ns)
        ns = "";
    allow_q q = {verb, group, resource, sub, name};
    pthread_mutex_lock(&r->mu);
    check_fresh(r);
    if (!r->valid)
        rebuild(r);
    bool ok = walk_roles(r, user, ns, visit_allows, &q, missing, sizeof(missing));
    pthread_mutex_unlock(&r->mu);
    if (!ok && reason && reason_size) {
        ks_rbac_forbidden_message(reason, reason_size, user, verb, group, resource, sub, ns);
        if (*missing) {
            size_t len = strlen(reason);
            snprintf(reason + len, reason_size - len, ": RBAC: %s", missing);
        }
    }
    return ok;
}

/* ---- escalation prevention (pkg/registry/rbac/validation of the API server) ---- */

static void append_rules(json_t *out, const json_t *role)
{
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(role, "rules"), i, rule) json_array_append(out, rule);
}

static bool visit_collect(const json_t *role, void *ud)
{
    append_rules(ud, role);
    return false;
}

json_t *ks_rbac_rules_for(ks_rbac *r, const ks_user *user, const char *ns)
{
    json_t *out = json_array();
    char missing[400] = "";
    if (!out)
        return NULL;
    pthread_mutex_lock(&r->mu);
    check_fresh(r);
    if (!r->valid)
        rebuild(r);
    walk_roles(r, user, ns ? ns : "", visit_collect, out, missing, sizeof(missing));
    pthread_mutex_unlock(&r->mu);
    return out;
}

json_t *ks_rbac_role_rules(ks_rbac *r, const char *kind, const char *name, const char *ns)
{
    json_t *out = NULL;
    pthread_mutex_lock(&r->mu);
    check_fresh(r);
    if (!r->valid)
        rebuild(r);
    const json_t *role = NULL;
    if (kind && !strcmp(kind, "ClusterRole")) {
        role = json_object_get(r->croles, name ? name : "");
    } else if (kind && !strcmp(kind, "Role")) {
        char key[600];
        snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "");
        role = json_object_get(r->roles, key);
    }
    if (role) {
        out = json_deep_copy(json_object_get(role, "rules"));
        if (!out)
            out = json_array();
    }
    pthread_mutex_unlock(&r->mu);
    return out;
}

/* has() of the comparator: s is in arr. */
static bool has_str(const json_t *arr, const char *s)
{
    return list_has(arr, s, false);
}

/* resourceCoversAll for one resource path. */
static bool resource_covers(const json_t *owner, const char *path)
{
    if (has_str(owner, "*") || has_str(owner, path))
        return true;
    const char *slash = strchr(path, '/');
    if (!slash)
        return false;
    char star[320];
    snprintf(star, sizeof(star), "*%s", slash);
    return has_str(owner, star);
}

static bool url_covers(const json_t *owner, const char *url)
{
    size_t i;
    json_t *v;
    json_array_foreach(owner, i, v)
    {
        const char *o = json_string_value(v);
        if (!o)
            continue;
        if (!strcmp(o, url))
            return true;
        size_t n = strlen(o);
        while (n && o[n - 1] == '*')
            n--;
        if (n < strlen(o) && !strncmp(url, o, n))
            return true;
    }
    return false;
}

/* ruleCovers for one broken-down rule: (group, resource, verb, name) or (url, verb). */
static bool atom_covered(const json_t *owner_rules, const char *group, const char *resource,
                         const char *url, const char *verb, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(owner_rules, i, o)
    {
        if (!has_str(json_object_get(o, "verbs"), "*") &&
            !has_str(json_object_get(o, "verbs"), verb))
            continue;
        size_t onames = json_array_size(json_object_get(o, "resourceNames"));
        if (url) {
            if (onames == 0 && url_covers(json_object_get(o, "nonResourceURLs"), url))
                return true;
            continue;
        }
        if (!has_str(json_object_get(o, "apiGroups"), "*") &&
            !has_str(json_object_get(o, "apiGroups"), group))
            continue;
        if (!resource_covers(json_object_get(o, "resources"), resource))
            continue;
        if (onames == 0 || (name && has_str(json_object_get(o, "resourceNames"), name)))
            return true;
    }
    return false;
}

/* Go's %q of a []string: ["a" "b"]. */
static void put_q(json_t *parts, const char *s)
{
    json_array_append_new(parts, json_string(s));
}

static char *quote_list(const json_t *arr)
{
    size_t cap = 3, i;
    json_t *v;
    json_array_foreach(arr, i, v) cap += 2 * strlen(json_string_value(v)) + 3;
    char *out = malloc(cap), *p = out;
    if (!out)
        return NULL;
    *p++ = '[';
    json_array_foreach(arr, i, v)
    {
        if (i)
            *p++ = ' ';
        *p++ = '"';
        for (const char *s = json_string_value(v); *s; s++) {
            if (*s == '"' || *s == '\\')
                *p++ = '\\';
            *p++ = *s;
        }
        *p++ = '"';
    }
    *p++ = ']';
    *p = '\0';
    return out;
}

/* CompactString of the API server's rbac helpers. */
static char *compact_string(const char *group, const char *resource, const char *url,
                            const char *name, const json_t *verbs)
{
    json_t *one = json_array();
    char *vs = quote_list(verbs), *out = NULL;
    char *g = NULL, *rs = NULL, *u = NULL, *n = NULL;
    if (!one || !vs)
        goto done;
    if (url) {
        put_q(one, url);
        u = quote_list(one);
        if (u && asprintf(&out, "{NonResourceURLs:%s, Verbs:%s}", u, vs) < 0)
            out = NULL;
        goto done;
    }
    put_q(one, group);
    g = quote_list(one);
    json_array_clear(one);
    put_q(one, resource);
    rs = quote_list(one);
    json_array_clear(one);
    if (name) {
        put_q(one, name);
        n = quote_list(one);
    }
    if (g && rs && (!name || n) &&
        asprintf(&out, "{APIGroups:%s, Resources:%s%s%s, Verbs:%s}", g, rs,
                 name ? ", ResourceNames:" : "", name ? n : "", vs) < 0)
        out = NULL;
done:
    json_decref(one);
    free(vs);
    free(g);
    free(rs);
    free(u);
    free(n);
    return out;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds one uncovered atom to the compaction: simple resource rules of one group/resource/name
 * gather their verbs (in the order met); URL rules stay one per atom. */
static void note_uncovered(json_t *simple, json_t *urls, const char *group, const char *resource,
                           const char *url, const char *verb, const char *name)
{
    if (url) {
        json_array_append_new(urls, json_pack("{s:s, s:s}", "url", url, "verb", verb));
        return;
    }
    char key[1024];
    snprintf(key, sizeof(key), "%s\x1f%s\x1f%d\x1f%s", group, resource, name != NULL,
             name ? name : "");
    json_t *e = json_object_get(simple, key);
    if (!e) {
        e = json_pack("{s:s, s:s, s:[]}", "g", group, "r", resource, "v");
        if (!e)
            return;
        if (name)
            json_object_set_new(e, "n", json_string(name));
        json_object_set_new(simple, key, e);
    }
    json_array_append_new(json_object_get(e, "v"), json_string(verb));
}

char *ks_rbac_uncovered(const json_t *owner_rules, const json_t *rules)
{
    json_t *simple = json_object(), *urls = json_array();
    char *out = NULL;
    if (!simple || !urls)
        goto done;
    size_t i, a, b, c, d;
    json_t *rule, *g, *res, *verb, *nm;
    json_array_foreach(rules, i, rule)
    {
        const json_t *verbs = json_object_get(rule, "verbs");
        const json_t *names = json_object_get(rule, "resourceNames");
        json_array_foreach(json_object_get(rule, "apiGroups"), a, g)
        {
            json_array_foreach(json_object_get(rule, "resources"), b, res)
            {
                json_array_foreach(verbs, c, verb)
                {
                    const char *gs = json_string_value(g), *rs = json_string_value(res),
                               *vs = json_string_value(verb);
                    if (!gs || !rs || !vs)
                        continue;
                    if (json_array_size(names) == 0) {
                        if (!atom_covered(owner_rules, gs, rs, NULL, vs, NULL))
                            note_uncovered(simple, urls, gs, rs, NULL, vs, NULL);
                        continue;
                    }
                    json_array_foreach(names, d, nm)
                    {
                        const char *ns = json_string_value(nm);
                        if (ns && !atom_covered(owner_rules, gs, rs, NULL, vs, ns))
                            note_uncovered(simple, urls, gs, rs, NULL, vs, ns);
                    }
                }
            }
        }
        json_array_foreach(json_object_get(rule, "nonResourceURLs"), a, g)
        {
            json_array_foreach(verbs, c, verb)
            {
                const char *us = json_string_value(g), *vs = json_string_value(verb);
                if (us && vs && !atom_covered(owner_rules, NULL, NULL, us, vs, NULL))
                    note_uncovered(simple, urls, NULL, NULL, us, vs, NULL);
            }
        }
    }
    size_t n = json_object_size(simple) + json_array_size(urls), k = 0;
    if (n == 0)
        goto done;
    char **lines = calloc(n, sizeof(*lines));
    if (!lines)
        goto done;
    const char *key;
    json_t *e;
    json_object_foreach(simple, key, e)
    {
        lines[k] = compact_string(
            json_string_value(json_object_get(e, "g")), json_string_value(json_object_get(e, "r")),
            NULL, json_string_value(json_object_get(e, "n")), json_object_get(e, "v"));
        if (lines[k])
            k++;
    }
    json_array_foreach(urls, i, e)
    {
        json_t *v = json_pack("[O]", json_object_get(e, "verb"));
        lines[k] =
            compact_string(NULL, NULL, json_string_value(json_object_get(e, "url")), NULL, v);
        json_decref(v);
        if (lines[k])
            k++;
    }
    qsort(lines, k, sizeof(*lines), cmp_cstr);
    size_t len = 1;
    for (size_t j = 0; j < k; j++)
        len += strlen(lines[j]) + 1;
    out = malloc(len);
    if (out) {
        char *p = out;
        *p = '\0';
        for (size_t j = 0; j < k; j++) {
            /* A set: equal descriptions are listed once. */
            if (j && !strcmp(lines[j], lines[j - 1]))
                continue;
            p += sprintf(p, "%s%s", p == out ? "" : "\n", lines[j]);
        }
    }
    for (size_t j = 0; j < k; j++)
        free(lines[j]);
    free(lines);
done:
    json_decref(simple);
    json_decref(urls);
    return out;
}
