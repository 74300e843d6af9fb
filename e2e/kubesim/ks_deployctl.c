/* ks_deployctl: the Deployment controller: owns ReplicaSets named <deployment>-<pod-template-hash>,
 * rolls template changes (RollingUpdate within maxSurge/maxUnavailable, or Recreate), keeps the
 * revision annotations and revisionHistoryLimit, and reports the status helm and kubectl read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "ks_ctl_int.h"

#define ANN_REVISION "deployment.kubernetes.io/revision"
#define ANN_DESIRED  "deployment.kubernetes.io/desired-replicas"
#define ANN_MAX      "deployment.kubernetes.io/max-replicas"
#define HASH_LABEL   "pod-template-hash"

typedef struct drs {
    json_t *rs;     /* borrowed from the dependents array (or the created RS) */
    long long spec; /* spec.replicas as this sync leaves it */
    long long rev;
} drs;

typedef struct dsync {
    ksc_worker *w;
    json_t *d;
    const ks_rtype *rst;
    long long replicas, surge, unavail;
    bool recreate, created;
    drs *all; /* old ReplicaSets, then the new one last when present */
    size_t nall, nold;
    drs *nrs; /* the new ReplicaSet, or NULL */
    json_t *created_rs;
} dsync;

/* The annotation key has dots, so it is read by hand rather than by dotted path. */
static long long ann_revision(const json_t *obj)
{
    json_t *ann = ksc_at(obj, "metadata.annotations");
    const char *v = json_string_value(json_object_get(ann, ANN_REVISION));
    return v ? atoll(v) : 0;
}

static bool same_template(const json_t *rs, const json_t *tmpl)
{
    json_t *copy = json_deep_copy(ksc_at(rs, "spec.template"));
    json_t *labels = ksc_at(copy, "metadata.labels");
    if (labels)
        json_object_del(labels, HASH_LABEL);
    json_t *a = ksc_normalized(copy), *b = ksc_normalized(tmpl);
    bool eq = kc_json_equal(a, b);
    json_decref(a);
    json_decref(b);
    json_decref(copy);
    return eq;
}

typedef struct scale_req {
    long long replicas, desired, max;
    long long revision; /* 0: leave it */
} scale_req;

static void set_ann(json_t *obj, const char *k, long long v)
{
    json_t *meta = json_object_get(obj, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    if (!json_is_object(ann)) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    json_object_set_new(ann, k, json_string(buf));
}

static kc_code scale_fn(void *ud, json_t *rs, kc_err *err)
{
    const scale_req *r = ud;
    json_t *spec = json_object_get(rs, "spec");
    if (json_is_object(spec))
        json_object_set_new(spec, "replicas", json_integer(r->replicas));
    set_ann(rs, ANN_DESIRED, r->desired);
    set_ann(rs, ANN_MAX, r->max);
    if (r->revision > 0)
        set_ann(rs, ANN_REVISION, r->revision);
    return KC_OK;
}

static kc_code scale(dsync *s, drs *r, long long to, long long revision, kc_err *err)
{
    long long from = r->spec;
    if (from == to && revision == 0)
        return KC_OK;
    scale_req req = {to, s->replicas, s->replicas + s->surge, revision};
    kc_code rc = ksc_mutate(s->w, s->rst, ksc_str(r->rs, "metadata.namespace"),
                            ksc_str(r->rs, "metadata.name"), KS_WRITE_MAIN, scale_fn, &req, err);
    if (rc != KC_OK)
        return rc;
    r->spec = to;
    if (from != to)
        ksc_event(s->w->c, s->w->name, s->d, "Normal", "ScalingReplicaSet",
                  "Scaled %s replica set %s from %lld to %lld", to > from ? "up" : "down",
                  ksc_str(r->rs, "metadata.name"), from, to);
    return KC_OK;
}

static json_t *new_rs_body(dsync *s, const char *hash, long long replicas, long long revision)
{
    const json_t *d = s->d;
    char name[400];
    snprintf(name, sizeof name, "%s-%s", ksc_str(d, "metadata.name"), hash);
    json_t *tmpl = json_deep_copy(ksc_at(d, "spec.template"));
    json_t *sel = json_deep_copy(ksc_at(d, "spec.selector"));
    if (!json_is_object(tmpl) || !json_is_object(sel)) {
        json_decref(tmpl);
        json_decref(sel);
        return NULL;
    }
    json_t *tmeta = json_object_get(tmpl, "metadata");
    if (!json_is_object(tmeta)) {
        tmeta = json_object();
        json_object_set_new(tmpl, "metadata", tmeta);
    }
    json_t *labels = json_object_get(tmeta, "labels");
    if (!json_is_object(labels)) {
        labels = json_object();
        json_object_set_new(tmeta, "labels", labels);
    }
    json_object_set_new(labels, HASH_LABEL, json_string(hash));
    json_t *ml = json_object_get(sel, "matchLabels");
    if (!json_is_object(ml)) {
        ml = json_object();
        json_object_set_new(sel, "matchLabels", ml);
    }
    json_object_set_new(ml, HASH_LABEL, json_string(hash));
    /* The Deployment's annotations travel to its ReplicaSets, minus kubectl's and our own. */
    json_t *ann = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(ksc_at(d, "metadata.annotations"), k, v)
    {
        if (strcmp(k, "kubectl.kubernetes.io/last-applied-configuration") &&
            strncmp(k, "deployment.kubernetes.io/", 25))
            json_object_set(ann, k, v);
    }
    json_t *rs =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:o, s:[o]}, s:{s:I, s:o, s:o}}", "apiVersion",
                  "apps/v1", "kind", "ReplicaSet", "metadata", "name", name, "namespace",
                  ksc_str(d, "metadata.namespace"), "labels", json_deep_copy(labels), "annotations",
                  ann, "ownerReferences", ksc_owner_ref(d, "apps/v1", "Deployment"), "spec",
                  "replicas", (json_int_t)replicas, "selector", sel, "template", tmpl);
    if (!rs)
        return NULL;
    long long mrs = ksc_int(d, "spec.minReadySeconds", 0);
    if (mrs > 0)
        json_object_set_new(json_object_get(rs, "spec"), "minReadySeconds", json_integer(mrs));
    set_ann(rs, ANN_DESIRED, s->replicas);
    set_ann(rs, ANN_MAX, s->replicas + s->surge);
    set_ann(rs, ANN_REVISION, revision);
    return rs;
}

static kc_code bump_collisions(void *ud, json_t *d, kc_err *err)
{
    json_t *st = json_object_get(d, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(d, "status", st);
    }
    json_object_set_new(st, "collisionCount",
                        json_integer(ksc_int(d, "status.collisionCount", 0) + 1));
    return KC_OK;
}

static kc_code create_new_rs(dsync *s, const char *hash, long long replicas, long long revision,
                             kc_err *err)
{
    json_t *body = new_rs_body(s, hash, replicas, revision);
    if (!body)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a ReplicaSet");
    kc_code rc =
        ksc_create(s->w, s->rst, ksc_str(s->d, "metadata.namespace"), body, &s->created_rs, err);
    if (rc == KC_EALREADYEXISTS) {
        /* Someone else's object holds the name: hash again with a new collision count. */
        const ks_rtype *dt = ksc_type(s->w->c, KSC_K_DEPLOYMENT);
        kc_err_clear(err);
        rc =
            ksc_mutate(s->w, dt, ksc_str(s->d, "metadata.namespace"),
                       ksc_str(s->d, "metadata.name"), KS_WRITE_STATUS, bump_collisions, NULL, err);
        return rc == KC_OK ? kc_err_set(err, KC_ECONFLICT, "ReplicaSet name collision") : rc;
    }
    if (rc != KC_OK)
        return rc;
    s->created = true;
    if (replicas > 0)
        ksc_event(s->w->c, s->w->name, s->d, "Normal", "ScalingReplicaSet",
                  "Scaled up replica set %s from 0 to %lld",
                  ksc_str(s->created_rs, "metadata.name"), replicas);
    s->all[s->nall] = (drs){s->created_rs, replicas, revision};
    s->nrs = &s->all[s->nall++];
    return KC_OK;
}

static long long avail_of(const drs *r)
{
    return ksc_int(r->rs, "status.availableReplicas", 0);
}

static int by_revision(const void *a, const void *b)
{
    const drs *x = a, *y = b;
    return x->rev < y->rev ? -1 : x->rev > y->rev;
}

static kc_code roll(dsync *s, const char *hash, long long max_rev, kc_err *err)
{
    kc_code rc = KC_OK;
    long long old_spec = 0, old_pods = 0;
    for (size_t i = 0; i < s->nold; i++) {
        old_spec += s->all[i].spec;
        old_pods += ksc_int(s->all[i].rs, "status.replicas", 0);
    }
    if (s->recreate) {
        for (size_t i = 0; i < s->nold && rc == KC_OK; i++)
            rc = scale(s, &s->all[i], 0, 0, err);
        if (rc != KC_OK || old_pods > 0)
            return rc; /* the new pods start once the old ones are gone */
        if (!s->nrs)
            return create_new_rs(s, hash, s->replicas, max_rev + 1, err);
        return scale(s, s->nrs, s->replicas, 0, err);
    }
    if (!s->nrs) {
        long long n = old_spec == 0 ? s->replicas : s->replicas + s->surge - old_spec;
        if (n > s->replicas)
            n = s->replicas;
        if (n < 0)
            n = 0;
        if ((rc = create_new_rs(s, hash, n, max_rev + 1, err)) != KC_OK)
            return rc;
    } else if (old_spec == 0 || s->nrs->spec > s->replicas) {
        return scale(s, s->nrs, s->replicas, 0, err);
    } else if (s->nrs->spec < s->replicas) {
        long long allowed = s->replicas + s->surge - old_spec - s->nrs->spec;
        if (allowed > 0) {
            long long to = s->nrs->spec + allowed;
            if ((rc = scale(s, s->nrs, to > s->replicas ? s->replicas : to, 0, err)) != KC_OK)
                return rc;
        }
    }
    /* Scale old ReplicaSets down as far as availability allows: unhealthy replicas first. */
    long long total = s->nrs->spec + old_spec;
    long long min_avail = s->replicas - s->unavail;
    long long new_unavail = s->nrs->spec - avail_of(s->nrs);
    long long max_down = total - min_avail - new_unavail;
    if (max_down <= 0)
        return KC_OK;
    qsort(s->all, s->nold, sizeof *s->all, by_revision);
    long long cleaned = 0;
    for (size_t i = 0; i < s->nold && cleaned < max_down && rc == KC_OK; i++) {
        long long unhealthy = s->all[i].spec - avail_of(&s->all[i]);
        if (unhealthy <= 0)
            continue;
        long long d = unhealthy < max_down - cleaned ? unhealthy : max_down - cleaned;
        rc = scale(s, &s->all[i], s->all[i].spec - d, 0, err);
        cleaned += d;
    }
    long long available = 0;
    for (size_t i = 0; i < s->nall; i++)
        available += avail_of(&s->all[i]);
    long long budget = available - min_avail;
    if (budget > max_down - cleaned)
        budget = max_down - cleaned;
    for (size_t i = 0; i < s->nold && budget > 0 && rc == KC_OK; i++) {
        long long d = s->all[i].spec < budget ? s->all[i].spec : budget;
        if (d <= 0)
            continue;
        rc = scale(s, &s->all[i], s->all[i].spec - d, 0, err);
        budget -= d;
    }
    return rc;
}

static kc_code cleanup_history(dsync *s, kc_err *err)
{
    long long limit = ksc_int(s->d, "spec.revisionHistoryLimit", 10);
    size_t idle = 0;
    for (size_t i = 0; i < s->nold; i++)
        if (s->all[i].spec == 0 && ksc_int(s->all[i].rs, "status.replicas", 0) == 0)
            idle++;
    qsort(s->all, s->nold, sizeof *s->all, by_revision);
    for (size_t i = 0; i < s->nold && (long long)idle > limit; i++) {
        const json_t *rs = s->all[i].rs;
        if (s->all[i].spec != 0 || ksc_int(rs, "status.replicas", 0) != 0 ||
            ksc_int(rs, "metadata.generation", 0) > ksc_int(rs, "status.observedGeneration", 0))
            continue;
        kc_code rc = ksc_delete(s->w, s->rst, ksc_str(rs, "metadata.namespace"),
                                ksc_str(rs, "metadata.name"), ksc_str(rs, "metadata.uid"),
                                KS_PROPAGATE_BACKGROUND, -1, err);
        if (rc != KC_OK && rc != KC_ENOTFOUND && rc != KC_ECONFLICT)
            return rc;
        kc_err_clear(err);
        idle--;
    }
    return KC_OK;
}

typedef struct dstatus {
    long long gen, replicas, updated, ready, available, unavailable;
    const char *avail_status, *avail_reason, *avail_msg;
    const char *prog_status, *prog_reason;
    char prog_msg[512];
} dstatus;

static void set_or_drop(json_t *st, const char *k, long long v)
{
    if (v)
        json_object_set_new(st, k, json_integer(v));
    else
        json_object_del(st, k);
}

static kc_code write_status(void *ud, json_t *d, kc_err *err)
{
    const dstatus *x = ud;
    json_t *st = json_object_get(d, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(d, "status", st);
    }
    json_object_set_new(st, "observedGeneration", json_integer(x->gen));
    set_or_drop(st, "replicas", x->replicas);
    set_or_drop(st, "updatedReplicas", x->updated);
    set_or_drop(st, "readyReplicas", x->ready);
    set_or_drop(st, "availableReplicas", x->available);
    set_or_drop(st, "unavailableReplicas", x->unavailable);
    ksc_set_condition(st, "Available", x->avail_status, x->avail_reason, x->avail_msg, false, true);
    ksc_set_condition(st, "Progressing", x->prog_status, x->prog_reason, x->prog_msg, false, true);
    return KC_OK;
}

static kc_code sync_status(dsync *s, bool paused, kc_err *err)
{
    dstatus x = {.gen = ksc_int(s->d, "metadata.generation", 0)};
    long long spec_total = 0;
    for (size_t i = 0; i < s->nall; i++) {
        const json_t *rs = s->all[i].rs;
        x.replicas += ksc_int(rs, "status.replicas", 0);
        x.ready += ksc_int(rs, "status.readyReplicas", 0);
        x.available += ksc_int(rs, "status.availableReplicas", 0);
        spec_total += s->all[i].spec;
    }
    if (s->nrs)
        x.updated = ksc_int(s->nrs->rs, "status.replicas", 0);
    x.unavailable = spec_total - x.available > 0 ? spec_total - x.available : 0;
    bool min_ok = x.available >= s->replicas - s->unavail;
    x.avail_status = min_ok ? "True" : "False";
    x.avail_reason = min_ok ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable";
    x.avail_msg = min_ok ? "Deployment has minimum availability."
                         : "Deployment does not have minimum availability.";
    const char *nname = s->nrs ? ksc_str(s->nrs->rs, "metadata.name") : "";
    x.prog_status = "True";
    if (paused) {
        x.prog_status = "Unknown";
        x.prog_reason = "DeploymentPaused";
        snprintf(x.prog_msg, sizeof x.prog_msg, "Deployment is paused");
    } else if (s->nrs && x.updated == s->replicas && x.replicas == s->replicas &&
               x.available == s->replicas) {
        x.prog_reason = "NewReplicaSetAvailable";
        snprintf(x.prog_msg, sizeof x.prog_msg, "ReplicaSet \"%s\" has successfully progressed.",
                 nname);
    } else if (s->created) {
        x.prog_reason = "NewReplicaSetCreated";
        snprintf(x.prog_msg, sizeof x.prog_msg, "Created new replica set \"%s\"", nname);
    } else {
        x.prog_reason = "ReplicaSetUpdated";
        snprintf(x.prog_msg, sizeof x.prog_msg, "ReplicaSet \"%s\" is progressing.", nname);
    }
    const ks_rtype *dt = ksc_type(s->w->c, KSC_K_DEPLOYMENT);
    kc_code rc = ksc_mutate(s->w, dt, ksc_str(s->d, "metadata.namespace"),
                            ksc_str(s->d, "metadata.name"), KS_WRITE_STATUS, write_status, &x, err);
    return rc == KC_ENOTFOUND ? KC_OK : rc;
}

static kc_code annotate_revision(void *ud, json_t *d, kc_err *err)
{
    set_ann(d, ANN_REVISION, *(const long long *)ud);
    return KC_OK;
}

kc_code ksc_deploy_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    dsync s = {
        .w = w, .d = ksc_get(c, KSC_K_DEPLOYMENT, key), .rst = ksc_type(c, KSC_K_REPLICASET)};
    if (!s.d || !s.rst) {
        json_decref(s.d);
        return KC_OK;
    }
    kc_code rc = KC_OK;
    json_t *rss = ksc_dependents(c, ksc_str(s.d, "metadata.uid"), KSC_K_REPLICASET, true);
    s.all = calloc(json_array_size(rss) + 1, sizeof *s.all);
    if (!s.all) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory syncing deployment %s", key);
        goto out;
    }
    s.replicas = ksc_int(s.d, "spec.replicas", 1);
    s.recreate = !strcmp(ksc_str(s.d, "spec.strategy.type"), "Recreate");
    if (!s.recreate) {
        json_t *ru = ksc_at(s.d, "spec.strategy.rollingUpdate");
        json_t *pct = json_string("25%"), *ms = json_object_get(ru, "maxSurge"),
               *mu = json_object_get(ru, "maxUnavailable");
        s.surge = ksc_int_or_percent(ms ? ms : pct, s.replicas, true, 0);
        s.unavail = ksc_int_or_percent(mu ? mu : pct, s.replicas, false, 0);
        json_decref(pct);
        if (s.surge == 0 && s.unavail == 0)
            s.unavail = 1;
        if (s.unavail > s.replicas)
            s.unavail = s.replicas;
    }
    char hash[16];
    json_t *tmpl = ksc_at(s.d, "spec.template");
    ksc_template_hash(tmpl, ksc_int(s.d, "status.collisionCount", 0), hash);
    char want_name[400];
    snprintf(want_name, sizeof want_name, "%s-%s", ksc_str(s.d, "metadata.name"), hash);
    /* The new ReplicaSet is the one named after the current hash, else one whose template
     * equals the Deployment's (ignoring the hash label). */
    long long new_idx = -1, max_rev = 0;
    size_t i;
    json_t *rs;
    json_array_foreach(rss, i, rs)
    {
        if (ksc_deleting(rs))
            continue;
        if (!strcmp(ksc_str(rs, "metadata.name"), want_name))
            new_idx = (long long)i;
    }
    json_array_foreach(rss, i, rs)
    {
        if (new_idx < 0 && !ksc_deleting(rs) && same_template(rs, tmpl))
            new_idx = (long long)i;
    }
    json_array_foreach(rss, i, rs)
    {
        if ((long long)i == new_idx)
            continue;
        s.all[s.nall++] = (drs){rs, ksc_int(rs, "spec.replicas", 1), ann_revision(rs)};
        if (ann_revision(rs) > max_rev)
            max_rev = ann_revision(rs);
    }
    s.nold = s.nall;
    if (new_idx >= 0) {
        rs = json_array_get(rss, (size_t)new_idx);
        s.all[s.nall] = (drs){rs, ksc_int(rs, "spec.replicas", 1), ann_revision(rs)};
        s.nrs = &s.all[s.nall++];
    }
    bool paused = json_is_true(ksc_at(s.d, "spec.paused"));
    if (!ksc_deleting(s.d) && !paused) {
        if (s.nrs && s.nrs->rev <= max_rev) {
            /* Rolling back to an older template makes it the newest revision. */
            if ((rc = scale(&s, s.nrs, s.nrs->spec, max_rev + 1, err)) != KC_OK)
                goto out;
            s.nrs->rev = max_rev + 1;
        }
        if ((rc = roll(&s, hash, max_rev, err)) != KC_OK)
            goto out;
        long long rev = s.nrs ? s.nrs->rev : 0;
        if (rev > 0 && ann_revision(s.d) != rev) {
            const ks_rtype *dt = ksc_type(c, KSC_K_DEPLOYMENT);
            if ((rc = ksc_mutate(w, dt, ksc_str(s.d, "metadata.namespace"),
                                 ksc_str(s.d, "metadata.name"), KS_WRITE_MAIN, annotate_revision,
                                 &rev, err)) != KC_OK)
                goto out;
        }
        if ((rc = cleanup_history(&s, err)) != KC_OK)
            goto out;
    }
    rc = sync_status(&s, paused, err);
out:
    json_decref(s.created_rs);
    free(s.all);
    json_decref(rss);
    json_decref(s.d);
    return rc;
}
