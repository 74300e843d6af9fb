/* ks_gc: kubesim's garbage collector: dependents of vanished owners (Background), owners waiting
 * for their dependents (Foreground, finalizer foregroundDeletion), orphaning (finalizer orphan),
 * and the pod GC that removes pods bound to nodes that no longer exist. Work is per owner or
 * dependent uid, found through the cache's owner → dependents index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

typedef enum owner_state {
    OWNER_SOLID,        /* exists and is not waiting for its dependents */
    OWNER_ABSENT,       /* gone, or replaced by another object of the same name (uid differs) */
    OWNER_WAITING,      /* being deleted in the foreground */
    OWNER_UNRESOLVABLE, /* a cluster-scoped dependent naming a namespaced owner: never collected */
} owner_state;

static owner_state state_of(const json_t *owner)
{
    return ksc_deleting(owner) && ksc_has_finalizer(owner, "foregroundDeletion") ? OWNER_WAITING
                                                                                 : OWNER_SOLID;
}

/* Classifies one ownerReference of dep. The cache answers for owners it holds; a miss is
 * confirmed against the store, as the cache may not have seen a new owner yet. */
static kc_code classify(ks_controllers *c, const json_t *dep, bool dep_namespaced,
                        const json_t *ref, owner_state *out, kc_err *err)
{
    const char *uid = ksc_str(ref, "uid");
    json_t *owner = ksc_by_uid(c, uid, NULL);
    if (owner) {
        *out = state_of(owner);
        json_decref(owner);
        return KC_OK;
    }
    const char *av = ksc_str(ref, "apiVersion"), *slash = strchr(av, '/');
    char group[256] = "";
    if (slash)
        snprintf(group, sizeof group, "%.*s", (int)(slash - av), av);
    const ks_rtype *t =
        ks_store_type_by_kind(c->st, group, slash ? slash + 1 : av, ksc_str(ref, "kind"));
    if (!t) {
        *out = OWNER_ABSENT; /* a kind nobody serves cannot have live objects */
        return KC_OK;
    }
    if (t->namespaced && !dep_namespaced) {
        *out = OWNER_UNRESOLVABLE;
        return KC_OK;
    }
    const char *ns = t->namespaced ? ksc_str(dep, "metadata.namespace") : "";
    kc_err gerr;
    kc_err_clear(&gerr);
    kc_code rc = ks_get(c->st, t, ns, ksc_str(ref, "name"), &owner, &gerr);
    if (rc == KC_ENOTFOUND) {
        *out = OWNER_ABSENT;
        return KC_OK;
    }
    if (rc != KC_OK) {
        if (err)
            *err = gerr;
        return rc;
    }
    *out = strcmp(ksc_str(owner, "metadata.uid"), uid) ? OWNER_ABSENT : state_of(owner);
    json_decref(owner);
    return KC_OK;
}

/* ud: a JSON array of owner uids whose references are removed. */
static kc_code strip_refs(void *ud, json_t *obj, kc_err *err)
{
    const json_t *uids = ud;
    json_t *refs = ksc_at(obj, "metadata.ownerReferences");
    for (size_t i = 0; json_is_array(refs) && i < json_array_size(refs);) {
        const char *u = ksc_str(json_array_get(refs, i), "uid");
        bool drop = false;
        size_t j;
        json_t *v;
        json_array_foreach(uids, j, v)
        {
            if (!strcmp(json_string_value(v), u))
                drop = true;
        }
        if (drop)
            json_array_remove(refs, i);
        else
            i++;
    }
    if (json_is_array(refs) && json_array_size(refs) == 0)
        json_object_del(json_object_get(obj, "metadata"), "ownerReferences");
    return KC_OK;
}

static kc_code drop_finalizer(void *ud, json_t *obj, kc_err *err)
{
    ksc_remove_finalizer(obj, ud);
    return KC_OK;
}

static kc_code ignore_gone(kc_code rc, kc_err *err)
{
    /* The object went away or was replaced meanwhile: nothing left to do for it. */
    if (rc == KC_ENOTFOUND || rc == KC_ECONFLICT) {
        kc_err_clear(err);
        return KC_OK;
    }
    return rc;
}

/* Collects dep when none of its owners is solid; strips dangling references otherwise. */
static kc_code gc_dependent(ksc_worker *w, const char *uid, kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype *t = NULL;
    json_t *dep = ksc_by_uid(c, uid, &t);
    if (!dep)
        return KC_OK;
    kc_code rc = KC_OK;
    json_t *gone = json_array();
    size_t nsolid = 0, nwaiting = 0, i;
    json_t *ref;
    json_array_foreach(ksc_at(dep, "metadata.ownerReferences"), i, ref)
    {
        owner_state s;
        if ((rc = classify(c, dep, t->namespaced, ref, &s, err)) != KC_OK)
            goto out;
        if (s == OWNER_SOLID || s == OWNER_UNRESOLVABLE)
            nsolid++;
        else
            json_array_append_new(gone, json_string(ksc_str(ref, "uid")));
        if (s == OWNER_WAITING)
            nwaiting++;
    }
    const char *ns = ksc_str(dep, "metadata.namespace"), *name = ksc_str(dep, "metadata.name");
    if (json_array_size(gone) == 0)
        goto out;
    if (nsolid > 0) {
        rc = ignore_gone(ksc_mutate(w, t, ns, name, KS_WRITE_MAIN, strip_refs, gone, err), err);
        goto out;
    }
    if (ksc_deleting(dep))
        goto out; /* already on its way; an owner waiting on it is requeued by its events */
    ks_propagation prop = KS_PROPAGATE_BACKGROUND;
    if (nwaiting > 0 && ksc_dependent_count(c, uid) > 0)
        prop = KS_PROPAGATE_FOREGROUND;
    else if (ksc_has_finalizer(dep, "orphan"))
        prop = KS_PROPAGATE_ORPHAN;
    else if (ksc_has_finalizer(dep, "foregroundDeletion"))
        prop = KS_PROPAGATE_FOREGROUND;
    kc_debug("gc: deleting dependent", "kind=%s ns=%s name=%s", ksc_str(dep, "kind"), ns, name);
    rc = ignore_gone(ksc_delete(w, t, ns, name, uid, prop, -1, err), err);
out:
    json_decref(gone);
    json_decref(dep);
    return rc;
}

static bool ref_blocks(const json_t *dep, const char *owner_uid)
{
    size_t i;
    json_t *ref;
    json_array_foreach(ksc_at(dep, "metadata.ownerReferences"), i, ref)
    {
        if (!strcmp(ksc_str(ref, "uid"), owner_uid))
            return json_is_true(json_object_get(ref, "blockOwnerDeletion"));
    }
    return false;
}

/* An owner being deleted with the orphan or foregroundDeletion finalizer. */
static kc_code gc_owner(ksc_worker *w, const char *uid, kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype *t = NULL, *dt = NULL;
    json_t *owner = ksc_by_uid(c, uid, &t);
    if (!owner)
        return KC_OK;
    kc_code rc = KC_OK;
    json_t *deps = NULL, *uids = json_pack("[s]", uid);
    const char *ns = ksc_str(owner, "metadata.namespace"), *name = ksc_str(owner, "metadata.name");
    if (!ksc_deleting(owner))
        goto out;
    deps = ksc_dependents(c, uid, KSC_K_OTHER, false);
    size_t i;
    json_t *dep;
    if (ksc_has_finalizer(owner, "orphan")) {
        json_array_foreach(deps, i, dep)
        {
            json_t *d = ksc_by_uid(c, ksc_str(dep, "metadata.uid"), &dt);
            json_decref(d);
            if (!d)
                continue;
            rc = ignore_gone(ksc_mutate(w, dt, ksc_str(dep, "metadata.namespace"),
                                        ksc_str(dep, "metadata.name"), KS_WRITE_MAIN, strip_refs,
                                        uids, err),
                             err);
            if (rc != KC_OK)
                goto out;
        }
        rc = ignore_gone(ksc_mutate(w, t, ns, name, KS_WRITE_MAIN, drop_finalizer, "orphan", err),
                         err);
        goto out;
    }
    if (!ksc_has_finalizer(owner, "foregroundDeletion"))
        goto out;
    size_t blocking = 0;
    json_array_foreach(deps, i, dep)
    {
        if (ref_blocks(dep, uid))
            blocking++;
        if (!ksc_deleting(dep) && (rc = gc_dependent(w, ksc_str(dep, "metadata.uid"), err)))
            goto out;
    }
    /* Deletions just issued show up as events that requeue this owner; only a pass that finds
     * no blocking dependent left lets the owner go. */
    if (blocking == 0) {
        rc = ignore_gone(
            ksc_mutate(w, t, ns, name, KS_WRITE_MAIN, drop_finalizer, "foregroundDeletion", err),
            err);
    }
out:
    json_decref(deps);
    json_decref(uids);
    json_decref(owner);
    return rc;
}

kc_code ksc_gc_sync(ksc_worker *w, const char *key, kc_err *err)
{
    if (!strncmp(key, "d/", 2))
        return gc_dependent(w, key + 2, err);
    if (!strncmp(key, "o/", 2))
        return gc_owner(w, key + 2, err);
    return KC_OK;
}

/* ---- pod GC ---- */

kc_code ksc_podgc_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    bool node_deleted = key[0] == '!';
    if (node_deleted)
        key++;
    json_t *pod = ksc_get(c, KSC_K_POD, key);
    if (!pod) {
        free(kc_map_remove(c->podgc_missing, key));
        return KC_OK;
    }
    kc_code rc = KC_OK;
    const char *node = ksc_str(pod, "spec.nodeName");
    json_t *n = *node ? ksc_get(c, KSC_K_NODE, node) : NULL;
    const ks_rtype *nt = ksc_type(c, KSC_K_NODE), *pt = ksc_type(c, KSC_K_POD);
    if (!*node || n || !nt || !pt) {
        free(kc_map_remove(c->podgc_missing, key));
        goto out;
    }
    /* The cache may simply not have seen the node yet: ask the store. */
    kc_err gerr;
    kc_err_clear(&gerr);
    if (ks_get(c->st, nt, "", node, &n, &gerr) != KC_ENOTFOUND) {
        free(kc_map_remove(c->podgc_missing, key));
        goto out;
    }
    if (!node_deleted) {
        long long now = ksc_now_ms(), *since = kc_map_get(c->podgc_missing, key);
        if (!since) {
            if (!(since = malloc(sizeof *since))) {
                rc = kc_err_set(err, KC_ENOMEM, "pod gc: out of memory");
                goto out;
            }
            *since = now;
            if (kc_map_put(c->podgc_missing, key, since, NULL) != KC_OK) {
                free(since);
                rc = kc_err_set(err, KC_ENOMEM, "pod gc: out of memory");
                goto out;
            }
        }
        if (now - *since < c->podgc_quarantine_ms) {
            kc_workqueue_add_after(w->q, key, c->podgc_quarantine_ms - (now - *since));
            goto out;
        }
    }
    free(kc_map_remove(c->podgc_missing, key));
    kc_info("pod gc: deleting pod bound to a missing node", "ns=%s pod=%s node=%s",
            ksc_str(pod, "metadata.namespace"), ksc_str(pod, "metadata.name"), node);
    rc = ignore_gone(ksc_delete(w, pt, ksc_str(pod, "metadata.namespace"),
                                ksc_str(pod, "metadata.name"), ksc_str(pod, "metadata.uid"),
                                KS_PROPAGATE_BACKGROUND, 0, err),
                     err);
out:
    json_decref(n);
    json_decref(pod);
    return rc;
}
