/* ks_auth: kubesim's authentication/RBAC internals shared by ks_auth.c and ks_rbac.c, plus the
 * decision log that tests read. The public entry points are in ks_sim.h. */
#ifndef KS_AUTH_H
#define KS_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "ks_sim.h"
#include "ks_store.h"

/* The decisions ks_auth_allowed made for non-admin users, one entry per distinct
 * (user, verb, group, resource, subresource, namespace, name, allowed) with how often it was made:
 *   [{"user":..,"verb":..,"group":..,"resource":..,"subresource":..,"namespace":..,"name":..,
 *     "allowed":true,"reason":..,"count":N}, ...]
 * (with "review":true where a SelfSubjectAccessReview asked, see ks_auth_review)
 * in the order first seen ("namespace"/"name" are "" for cluster scope / any name). A new
 * reference the caller json_decref's; an empty array when auth is not set up. The same entries are
 * appended as JSON lines to <opts.dir>/auth-decisions.jsonl (when opts.dir is set) so that a test
 * driving the kubesim program from outside can read them. At most KS_AUTH_DECISIONS_MAX entries
 * are kept in memory. */
#define KS_AUTH_DECISIONS_MAX 20000
json_t *ks_auth_decisions(ks_sim *sim);
/* Forgets the recorded decisions (the file is left alone). */
void ks_auth_decisions_clear(ks_sim *sim);

/* Creates, if absent, the bootstrap objects the real API server has: ClusterRole "cluster-admin"
 * (every verb on everything) and ClusterRoleBinding "cluster-admin" to Group "system:masters".
 * Needs the rbac types registered; existing objects are left as they are. */
kc_code ks_auth_bootstrap(ks_sim *sim, kc_err *err);

/* ---- ks_rbac.c: RBAC evaluation over the store's Role/ClusterRole/bindings ---- */

typedef struct ks_rbac ks_rbac;

/* An evaluator reading the store (borrowed; must outlive it). NULL when out of memory. The rbac
 * types are looked up lazily, so it may be created before they are registered. */
ks_rbac *ks_rbac_new(ks_store *st);
void ks_rbac_free(ks_rbac *r);

/* Whether the rules bound to user grant verb on group/resource[/sub] in ns (NULL or "": cluster
 * scope) for object name (NULL or "": none, as for list/create). Thread-safe. The snapshot of the
 * RBAC objects is refreshed when any of them changed since the last call (detected through store
 * watches, so a binding created before the call is always seen). On false, reason receives the
 * text the API server puts after `<resource> "name" is forbidden: `, e.g.
 * `User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" in the
 * namespace "ns"`, with `: RBAC: role.rbac.authorization.k8s.io "x" not found` appended when a
 * binding names a missing role (as the real authorizer reports). */
bool ks_rbac_authorize(ks_rbac *r, const ks_user *user, const char *verb, const char *group,
                       const char *resource, const char *sub, const char *ns, const char *name,
                       char *reason, size_t reason_size);

/* Formats the API server's forbidden sentence (see above) into buf. */
void ks_rbac_forbidden_message(char *buf, size_t size, const ks_user *user, const char *verb,
                               const char *group, const char *resource, const char *sub,
                               const char *ns);

/* Single-rule matching, exposed for the unit tests: rule is a PolicyRule object. */
bool ks_rbac_rule_allows(const json_t *rule, const char *verb, const char *group,
                         const char *resource, const char *sub, const char *name);

/* The rules bound to user in ns (cluster bindings, plus ns's RoleBindings when ns is not empty),
 * as the API server's rule resolver gathers them: a new array (NULL when out of memory). */
json_t *ks_rbac_rules_for(ks_rbac *r, const ks_user *user, const char *ns);
/* A copy of the rules of the role a roleRef names (kind "Role" looks in ns), or NULL when there is
 * no such role. */
json_t *ks_rbac_role_rules(ks_rbac *r, const char *kind, const char *name, const char *ns);
/* The API server's Covers + CompactRules: NULL when owner_rules cover every permission of rules,
 * else (malloc'd) the uncovered permissions one a line, sorted, as the escalation message lists
 * them: `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`. */
char *ks_rbac_uncovered(const json_t *owner_rules, const json_t *rules);

/* ---- escalation prevention of the rbac storage ---- */

/* The API server's check on a create (old NULL) or update of a Role/ClusterRole (resource "roles"
 * / "clusterroles") or a RoleBinding/ClusterRoleBinding, obj being the object to store: members
 * of system:masters (and the admin) pass; a role passes with the `escalate` verb on it, a binding
 * with `bind` on the role it references (resourceNames honoured), and otherwise when the user
 * already holds every permission granted. req_name is the name on the URL (NULL for a create).
 * Returns 0 when allowed, else the HTTP status (403 Forbidden, 404 NotFound for a binding to a
 * missing role) with *msg (malloc'd) the whole Status message. RBAC off: always 0. */
unsigned ks_auth_escalation(ks_sim *sim, const ks_user *user, const char *resource, const char *ns,
                            const char *req_name, const json_t *obj, const json_t *old, char **msg);

#endif
