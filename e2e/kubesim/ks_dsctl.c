/* ks_dsctl: the DaemonSet controller: one pod per eligible node (nodeSelector, required node
 * affinity, taints against the pod's tolerations plus the ones DaemonSets add), pinned with
 * spec.nodeName and labelled controller-revision-hash / pod-template-generation;
 * ControllerRevisions per template; RollingUpdate within maxUnavailable or OnDelete; the status
 * helm and operators read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

#define HASH_LABEL "controller-revision-hash"
#define GEN_LABEL  "pod-template-generation"

typedef struct dsnode {
    const json_t *node;
    json_t *live; /* non-deleting pods of the DaemonSet on the node (new array) */
    size_t ndeleting;
    bool should_run, should_continue;
    bool touched; /* manage created or deleted a pod here in this sync */
} dsnode;

typedef struct dsctx {
    ksc_worker *w;
    json_t *ds;
    const ks_rtype *pt;
    const char *key;
    char hash[16];
    long long gen, min_ready;
} dsctx;

static bool pod_updated(const json_t *pod, const char *hash)
{
    return !strcmp(ksc_str(json_object_get(ksc_at(pod, "metadata"), "labels"), HASH_LABEL), hash);
}

static int by_creation(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c =
        strcmp(ksc_str(x, "metadata.creationTimestamp"), ksc_str(y, "metadata.creationTimestamp"));
    return c ? c : strcmp(ksc_str(x, "metadata.name"), ksc_str(y, "metadata.name"));
}

/* ---- ControllerRevisions ---- */

static kc_code set_revision(void *ud, json_t *cr, kc_err *err)
{
    json_object_set_new(cr, "revision", json_integer(*(const long long *)ud));
    return KC_OK;
}

static kc_code sync_revisions(dsctx *x, kc_err *err)
{
    ks_controllers *c = x->w->c;
    const ks_rtype *crt = ksc_type(c, KSC_K_CREV);
    if (!crt)
        return KC_OK; /* no ControllerRevisions served: nothing to record */
    json_t *crs = ksc_dependents(c, ksc_str(x->ds, "metadata.uid"), KSC_K_CREV, true);
    char name[400];
    snprintf(name, sizeof name, "%s-%s", ksc_str(x->ds, "metadata.name"), x->hash);
    long long max_rev = 0, cur_rev = -1;
    size_t i;
    json_t *cr;
    json_array_foreach(crs, i, cr)
    {
        long long r = ksc_int(cr, "revision", 0);
        if (r > max_rev)
            max_rev = r;
        if (!strcmp(ksc_str(cr, "metadata.name"), name))
            cur_rev = r;
    }
    kc_code rc = KC_OK;
    const char *ns = ksc_str(x->ds, "metadata.namespace");
    if (cur_rev >= 0 && cur_rev < max_rev) {
        long long next = max_rev + 1;
        rc = ksc_mutate(x->w, crt, ns, name, KS_WRITE_MAIN, set_revision, &next, err);
    } else if (cur_rev < 0) {
        /* data is the patch that restores the template, as the real controller stores it. */
        json_t *tmpl = json_deep_copy(ksc_at(x->ds, "spec.template"));
        if (json_is_object(tmpl))
            json_object_set_new(tmpl, "$patch", json_string("replace"));
        json_t *labels = json_deep_copy(ksc_at(x->ds, "spec.template.metadata.labels"));
        if (!json_is_object(labels)) {
            json_decref(labels);
            labels = json_object();
        }
        json_object_set_new(labels, HASH_LABEL, json_string(x->hash));
        json_t *body = json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:o, s:[o]}, s:{s:{s:o}}, s:I}", "apiVersion", "apps/v1",
            "kind", "ControllerRevision", "metadata", "name", name, "namespace", ns, "labels",
            labels, "ownerReferences", ksc_owner_ref(x->ds, "apps/v1", "DaemonSet"), "data", "spec",
            "template", tmpl ? tmpl : json_object(), "revision", (json_int_t)(max_rev + 1));
        rc = body ? ksc_create(x->w, crt, ns, body, NULL, err)
                  : kc_err_set(err, KC_ENOMEM, "out of memory building a ControllerRevision");
        if (rc == KC_EALREADYEXISTS) {
            kc_err_clear(err);
            rc = KC_OK;
        }
    }
    /* History: keep revisionHistoryLimit revisions besides the current one. */
    long long limit = ksc_int(x->ds, "spec.revisionHistoryLimit", 10);
    size_t n = json_array_size(crs);
    if (rc == KC_OK && (long long)n > limit + 1) {
        json_t **v = calloc(n, sizeof *v);
        for (i = 0; v && i < n; i++)
            v[i] = json_array_get(crs, i);
        size_t excess = n - (size_t)limit - 1;
        for (size_t k = 0; v && k < n && excess > 0; k++) {
            /* oldest revisions first */
            size_t m = k;
            for (size_t j = k + 1; j < n; j++)
                if (ksc_int(v[j], "revision", 0) < ksc_int(v[m], "revision", 0))
                    m = j;
            json_t *tmp = v[k];
            v[k] = v[m];
            v[m] = tmp;
            if (!strcmp(ksc_str(v[k], "metadata.name"), name))
                continue;
            ksc_delete(x->w, crt, ns, ksc_str(v[k], "metadata.name"), ksc_str(v[k], "metadata.uid"),
                       KS_PROPAGATE_BACKGROUND, -1, NULL);
            excess--;
        }
        free(v);
    }
    json_decref(crs);
    return rc;
}

/* ---- pods ---- */

static json_t *ds_pod(dsctx *x, const char *node)
{
    json_t *pod = ksc_pod_from_template(x->ds, ksc_at(x->ds, "spec.template"), "DaemonSet");
    json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    if (!pod || !json_is_object(spec))
        return pod;
    json_t *labels = json_object_get(meta, "labels");
    if (!json_is_object(labels)) {
        labels = json_object();
        json_object_set_new(meta, "labels", labels);
    }
    char gen[32];
    snprintf(gen, sizeof gen, "%lld", x->gen);
    json_object_set_new(labels, HASH_LABEL, json_string(x->hash));
    json_object_set_new(labels, GEN_LABEL, json_string(gen));
    json_object_set_new(spec, "nodeName", json_string(node));
    /* What the real controller pins the pod with (its scheduler then binds it to the node). */
    json_t *aff = json_object_get(spec, "affinity");
    if (!json_is_object(aff)) {
        aff = json_object();
        json_object_set_new(spec, "affinity", aff);
    }
    json_t *na = json_object_get(aff, "nodeAffinity");
    if (!json_is_object(na)) {
        na = json_object();
        json_object_set_new(aff, "nodeAffinity", na);
    }
    json_object_set_new(na, "requiredDuringSchedulingIgnoredDuringExecution",
                        json_pack("{s:[{s:[{s:s, s:s, s:[s]}]}]}", "nodeSelectorTerms",
                                  "matchFields", "key", "metadata.name", "operator", "In", "values",
                                  node));
    json_t *tols = json_object_get(spec, "tolerations");
    if (!json_is_array(tols)) {
        tols = json_array();
        json_object_set_new(spec, "tolerations", tols);
    }
    json_t *add = ksc_ds_tolerations(spec);
    size_t i, j;
    json_t *t, *have;
    json_array_foreach(add, i, t)
    {
        bool dup = false;
        json_array_foreach(tols, j, have)
        {
            if (!strcmp(ksc_str(have, "key"), ksc_str(t, "key")) &&
                !strcmp(ksc_str(have, "effect"), ksc_str(t, "effect")))
                dup = true;
        }
        if (!dup)
            json_array_append(tols, t);
    }
    json_decref(add);
    return pod;
}

static kc_code create_on(dsctx *x, const char *node, kc_err *err)
{
    ks_controllers *c = x->w->c;
    json_t *pod = ds_pod(x, node), *out = NULL;
    kc_code rc = pod ? ksc_create(x->w, x->pt, ksc_str(x->ds, "metadata.namespace"), pod, &out, err)
                     : kc_err_set(err, KC_ENOMEM, "out of memory building a pod");
    if (rc != KC_OK) {
        ksc_event(c, x->w->name, x->ds, "Warning", "FailedCreate", "Error creating: %s",
                  err ? err->msg : kc_code_name(rc));
        return rc;
    }
    ksc_event(c, x->w->name, x->ds, "Normal", "SuccessfulCreate", "Created pod: %s",
              ksc_str(out, "metadata.name"));
    json_decref(out);
    return KC_OK;
}

static kc_code delete_pod(dsctx *x, const json_t *pod, kc_err *err)
{
    const char *name = ksc_str(pod, "metadata.name");
    kc_code rc = ksc_delete(x->w, x->pt, ksc_str(pod, "metadata.namespace"), name,
                            ksc_str(pod, "metadata.uid"), KS_PROPAGATE_BACKGROUND, -1, err);
    if (rc == KC_ENOTFOUND || rc == KC_ECONFLICT) {
        kc_err_clear(err);
        return KC_OK;
    }
    if (rc == KC_OK)
        ksc_event(x->w->c, x->w->name, x->ds, "Normal", "SuccessfulDelete", "Deleted pod: %s",
                  name);
    return rc;
}

/* Creates missing pods, deletes pods on nodes that no longer qualify, extras and failed ones. */
static kc_code manage(dsctx *x, dsnode *nodes, size_t n, kc_err *err)
{
    kc_code rc = KC_OK;
    for (size_t i = 0; i < n && rc == KC_OK && !x->w->c->stopping; i++) {
        dsnode *d = &nodes[i];
        size_t nlive = json_array_size(d->live);
        const char *name = ksc_str(d->node, "metadata.name");
        if (!d->should_continue) {
            for (size_t j = 0; j < nlive && rc == KC_OK; j++)
                rc = delete_pod(x, json_array_get(d->live, j), err);
            d->touched = nlive > 0;
            continue;
        }
        for (size_t j = 0; j < nlive && rc == KC_OK; j++) {
            const json_t *p = json_array_get(d->live, j);
            /* A failed daemon pod is replaced; extras beyond the oldest go. */
            if (!strcmp(ksc_str(p, "status.phase"), "Failed") || j > 0) {
                rc = delete_pod(x, p, err);
                d->touched = true;
            }
        }
        if (rc == KC_OK && d->should_run && nlive == 0 && d->ndeleting == 0) {
            rc = create_on(x, name, err);
            d->touched = true;
        }
    }
    return rc;
}

static int by_node_name(const void *a, const void *b)
{
    const dsnode *x = *(dsnode *const *)a, *y = *(dsnode *const *)b;
    return strcmp(ksc_str(x->node, "metadata.name"), ksc_str(y->node, "metadata.name"));
}

/* Replaces old-template pods, keeping at most maxUnavailable nodes without an available pod
 * (percentages of the desired count rounded up; at least 1). maxSurge is not simulated: a
 * node's old pod always goes before its new one starts, as with the default maxSurge 0. */
static kc_code rolling_update(dsctx *x, dsnode *nodes, size_t n, long long desired, kc_err *err)
{
    json_t *mu = ksc_at(x->ds, "spec.updateStrategy.rollingUpdate.maxUnavailable");
    json_t *one = json_integer(1);
    long long max_unavail = ksc_int_or_percent(mu ? mu : one, desired, true, 1);
    json_decref(one);
    if (max_unavail < 1)
        max_unavail = 1;
    long long unavailable = 0;
    dsnode **replace = calloc(n ? n : 1, sizeof *replace);
    dsnode **candidates = calloc(n ? n : 1, sizeof *candidates);
    size_t nrep = 0, ncand = 0;
    kc_code rc = KC_OK;
    if (!replace || !candidates) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory planning a rolling update");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        dsnode *d = &nodes[i];
        if (!d->should_run)
            continue; /* pods that must go are handled by manage */
        size_t nlive = json_array_size(d->live);
        if (nlive != 1 || d->ndeleting > 0 || d->touched) {
            unavailable++; /* missing, being replaced, or duplicated: manage sorts it out */
            continue;
        }
        const json_t *p = json_array_get(d->live, 0);
        bool avail = ksc_pod_available(p, x->min_ready, NULL);
        if (pod_updated(p, x->hash)) {
            if (!avail)
                unavailable++;
        } else if (!avail) {
            replace[nrep++] = d; /* already unavailable: replacing it costs nothing */
        } else {
            candidates[ncand++] = d;
        }
    }
    long long budget = max_unavail - unavailable - (long long)nrep;
    if (budget < 0)
        budget = 0;
    qsort(candidates, ncand, sizeof *candidates, by_node_name);
    for (size_t i = 0; i < nrep && rc == KC_OK; i++)
        rc = delete_pod(x, json_array_get(replace[i]->live, 0), err);
    for (size_t i = 0; i < ncand && (long long)i < budget && rc == KC_OK; i++)
        rc = delete_pod(x, json_array_get(candidates[i]->live, 0), err);
out:
    free(replace);
    free(candidates);
    return rc;
}

/* ---- status ---- */

typedef struct ds_status {
    long long gen, desired, current, misscheduled, ready, available, updated, collisions;
} ds_status;

static kc_code write_status(void *ud, json_t *ds, kc_err *err)
{
    const ds_status *s = ud;
    json_t *st = json_object_get(ds, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(ds, "status", st);
    }
    const struct {
        const char *k;
        long long v;
    } f[] = {
        {"observedGeneration", s->gen},
        {"desiredNumberScheduled", s->desired},
        {"currentNumberScheduled", s->current},
        {"numberMisscheduled", s->misscheduled},
        {"numberReady", s->ready},
        {"numberAvailable", s->available},
        {"numberUnavailable", s->desired - s->available > 0 ? s->desired - s->available : 0},
        {"updatedNumberScheduled", s->updated},
        {"collisionCount", s->collisions},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        json_object_set_new(st, f[i].k, json_integer(f[i].v));
    return KC_OK;
}

static kc_code sync_status(dsctx *x, dsnode *nodes, size_t n, kc_err *err)
{
    ds_status s = {.gen = ksc_int(x->ds, "metadata.generation", 0),
                   .collisions = ksc_int(x->ds, "status.collisionCount", 0)};
    long long soonest = 0;
    for (size_t i = 0; i < n; i++) {
        dsnode *d = &nodes[i];
        bool scheduled = json_array_size(d->live) > 0;
        if (!d->should_run) {
            if (scheduled)
                s.misscheduled++;
            continue;
        }
        s.desired++;
        if (!scheduled)
            continue;
        s.current++;
        const json_t *p = json_array_get(d->live, 0);
        long long wait_ms = 0;
        if (ksc_pod_ready(p))
            s.ready++;
        if (ksc_pod_available(p, x->min_ready, &wait_ms))
            s.available++;
        else if (wait_ms > 0 && (soonest == 0 || wait_ms < soonest))
            soonest = wait_ms;
        if (pod_updated(p, x->hash))
            s.updated++;
    }
    if (soonest > 0) /* a ready pod becomes available after minReadySeconds */
        kc_workqueue_add_after(x->w->q, x->key, soonest);
    const ks_rtype *t = ksc_type(x->w->c, KSC_K_DAEMONSET);
    kc_code rc =
        ksc_mutate(x->w, t, ksc_str(x->ds, "metadata.namespace"), ksc_str(x->ds, "metadata.name"),
                   KS_WRITE_STATUS, write_status, &s, err);
    return rc == KC_ENOTFOUND ? KC_OK : rc;
}

void ksc_ds_node_eligibility(const json_t *ds, const json_t *node, bool *run, bool *cont)
{
    const json_t *spec = ksc_at(ds, "spec.template.spec");
    *run = *cont = ksc_node_matches(spec, node);
    if (!*run || json_array_size(ksc_at(node, "spec.taints")) == 0)
        return; /* the added tolerations matter only against taints */
    json_t *extra = ksc_ds_tolerations(spec);
    *run = !ksc_untolerated_taint(spec, extra, node, false);
    *cont = !ksc_untolerated_taint(spec, extra, node, true);
    json_decref(extra);
}

kc_code ksc_ds_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    dsctx x = {
        .w = w, .ds = ksc_get(c, KSC_K_DAEMONSET, key), .pt = ksc_type(c, KSC_K_POD), .key = key};
    if (!x.ds || !x.pt || ksc_deleting(x.ds)) {
        json_decref(x.ds);
        return KC_OK;
    }
    kc_code rc = KC_OK;
    x.gen = ksc_int(x.ds, "metadata.generation", 0);
    x.min_ready = ksc_int(x.ds, "spec.minReadySeconds", 0);
    ksc_template_hash(ksc_at(x.ds, "spec.template"), ksc_int(x.ds, "status.collisionCount", 0),
                      x.hash);
    json_t *nodes = ksc_all(c, KSC_K_NODE);
    json_t *pods = ksc_dependents(c, ksc_str(x.ds, "metadata.uid"), KSC_K_POD, true);
    size_t n = json_array_size(nodes);
    dsnode *dn = calloc(n ? n : 1, sizeof *dn);
    kc_map *idx = kc_map_new();
    if (!dn || !idx) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory syncing daemonset %s", key);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        dsnode *d = &dn[i];
        d->node = json_array_get(nodes, i);
        d->live = json_array();
        ksc_ds_node_eligibility(x.ds, d->node, &d->should_run, &d->should_continue);
        kc_map_put(idx, ksc_str(d->node, "metadata.name"), d, NULL);
    }
    /* Pods on nodes that are gone are the pod GC's; the rest are grouped by node. */
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        dsnode *d = kc_map_get(idx, ksc_str(p, "spec.nodeName"));
        if (!d || (ksc_pod_terminated(p) && strcmp(ksc_str(p, "status.phase"), "Failed")))
            continue;
        if (ksc_deleting(p))
            d->ndeleting++;
        else
            json_array_append(d->live, p);
    }
    for (i = 0; i < n; i++) {
        size_t nl = json_array_size(dn[i].live);
        if (nl > 1) {
            json_t **v = calloc(nl, sizeof *v);
            for (size_t j = 0; v && j < nl; j++)
                v[j] = json_incref(json_array_get(dn[i].live, j));
            if (v) {
                qsort(v, nl, sizeof *v, by_creation);
                json_array_clear(dn[i].live);
                for (size_t j = 0; j < nl; j++)
                    json_array_append_new(dn[i].live, v[j]);
            }
            free(v);
        }
    }
    if ((rc = sync_revisions(&x, err)) != KC_OK)
        goto out;
    if ((rc = manage(&x, dn, n, err)) != KC_OK)
        goto out;
    long long desired = 0;
    for (i = 0; i < n; i++)
        desired += dn[i].should_run;
    const char *strategy = ksc_str(x.ds, "spec.updateStrategy.type");
    if (strcmp(strategy, "OnDelete") && (rc = rolling_update(&x, dn, n, desired, err)) != KC_OK)
        goto out;
    rc = sync_status(&x, dn, n, err);
out:
    for (i = 0; dn && i < n; i++)
        json_decref(dn[i].live);
    free(dn);
    kc_map_free(idx, NULL);
    json_decref(pods);
    json_decref(nodes);
    json_decref(x.ds);
    return rc;
}
