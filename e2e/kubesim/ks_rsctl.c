/* ks_rsctl: the ReplicaSet controller: keeps spec.replicas active pods (created from the template
 * with a controller ownerReference, the least valuable deleted first) and reports replicas,
 * fullyLabeledReplicas, readyReplicas, availableReplicas and observedGeneration. */
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

#define RS_BURST 500 /* pods created or deleted per sync, as the real controller's burst */

typedef struct rs_status {
    long long replicas, labeled, ready, available, generation;
} rs_status;

static kc_code write_status(void *ud, json_t *rs, kc_err *err)
{
    const rs_status *s = ud;
    json_t *st = json_object_get(rs, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(rs, "status", st);
    }
    /* As the API serializes it: replicas always, the other counts only when non-zero. */
    json_object_set_new(st, "replicas", json_integer(s->replicas));
    const struct {
        const char *k;
        long long v;
    } f[] = {{"fullyLabeledReplicas", s->labeled},
             {"readyReplicas", s->ready},
             {"availableReplicas", s->available},
             {"observedGeneration", s->generation}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v)
            json_object_set_new(st, f[i].k, json_integer(f[i].v));
        else
            json_object_del(st, f[i].k);
    }
    return KC_OK;
}

static bool labels_cover(const json_t *pod, const json_t *want)
{
    json_t *have = ksc_at(pod, "metadata.labels");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        json_t *h = json_object_get(have, k);
        if (!json_is_string(h) || !json_is_string(v) ||
            strcmp(json_string_value(h), json_string_value(v)))
            return false;
    }
    return true;
}

static int phase_rank(const json_t *pod)
{
    const char *p = ksc_str(pod, "status.phase");
    if (!strcmp(p, "Pending") || !*p)
        return 0;
    if (!strcmp(p, "Unknown"))
        return 1;
    return 2;
}

/* Which pods go first when scaling down: unscheduled, then pending, then not ready, then the
 * newest, as the real controller ranks them. */
static int delete_order(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int xs = *ksc_str(x, "spec.nodeName") != '\0', ys = *ksc_str(y, "spec.nodeName") != '\0';
    if (xs != ys)
        return xs - ys;
    if (phase_rank(x) != phase_rank(y))
        return phase_rank(x) - phase_rank(y);
    int xr = ksc_pod_ready(x), yr = ksc_pod_ready(y);
    if (xr != yr)
        return xr - yr;
    int c =
        strcmp(ksc_str(y, "metadata.creationTimestamp"), ksc_str(x, "metadata.creationTimestamp"));
    if (c)
        return c;
    return strcmp(ksc_str(y, "metadata.name"), ksc_str(x, "metadata.name"));
}

static kc_code create_pods(ksc_worker *w, const json_t *rs, long long n, kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype *pt = ksc_type(c, KSC_K_POD);
    if (!pt)
        return kc_err_set(err, KC_ENOTFOUND, "replicaset controller: pods are not served");
    for (long long i = 0; i < n && !c->stopping; i++) {
        json_t *pod = ksc_pod_from_template(rs, ksc_at(rs, "spec.template"), "ReplicaSet");
        json_t *out = NULL;
        kc_code rc = pod ? ksc_create(w, pt, ksc_str(rs, "metadata.namespace"), pod, &out, err)
                         : kc_err_set(err, KC_ENOMEM, "out of memory building a pod");
        if (rc != KC_OK) {
            ksc_event(c, w->name, rs, "Warning", "FailedCreate", "Error creating: %s",
                      err ? err->msg : kc_code_name(rc));
            return rc;
        }
        ksc_event(c, w->name, rs, "Normal", "SuccessfulCreate", "Created pod: %s",
                  ksc_str(out, "metadata.name"));
        json_decref(out);
    }
    return KC_OK;
}

static kc_code delete_pods(ksc_worker *w, const json_t *rs, json_t *active, long long n,
                           kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype *pt = ksc_type(c, KSC_K_POD);
    size_t cnt = json_array_size(active);
    json_t **v = calloc(cnt ? cnt : 1, sizeof *v);
    if (!v)
        return kc_err_set(err, KC_ENOMEM, "out of memory ranking pods");
    for (size_t i = 0; i < cnt; i++)
        v[i] = json_array_get(active, i);
    qsort(v, cnt, sizeof *v, delete_order);
    kc_code rc = KC_OK;
    for (long long i = 0; i < n && (size_t)i < cnt && pt; i++) {
        const char *name = ksc_str(v[i], "metadata.name");
        rc = ksc_delete(w, pt, ksc_str(v[i], "metadata.namespace"), name,
                        ksc_str(v[i], "metadata.uid"), KS_PROPAGATE_BACKGROUND, -1, err);
        if (rc == KC_ENOTFOUND || rc == KC_ECONFLICT) {
            kc_err_clear(err);
            rc = KC_OK;
            continue;
        }
        if (rc != KC_OK)
            break;
        ksc_event(c, w->name, rs, "Normal", "SuccessfulDelete", "Deleted pod: %s", name);
    }
    free(v);
    return rc;
}

kc_code ksc_rs_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    json_t *rs = ksc_get(c, KSC_K_REPLICASET, key);
    if (!rs)
        return KC_OK;
    kc_code rc = KC_OK;
    json_t *pods = ksc_dependents(c, ksc_str(rs, "metadata.uid"), KSC_K_POD, true);
    json_t *active = json_array();
    long long min_ready = ksc_int(rs, "spec.minReadySeconds", 0), soonest = 0;
    rs_status s = {.generation = ksc_int(rs, "metadata.generation", 0)};
    json_t *want_labels = ksc_at(rs, "spec.template.metadata.labels");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        if (!ksc_pod_active(p))
            continue;
        json_array_append(active, p);
        s.replicas++;
        if (!json_is_object(want_labels) || labels_cover(p, want_labels))
            s.labeled++;
        if (ksc_pod_ready(p))
            s.ready++;
        long long wait_ms = 0;
        if (ksc_pod_available(p, min_ready, &wait_ms))
            s.available++;
        else if (wait_ms > 0 && (soonest == 0 || wait_ms < soonest))
            soonest = wait_ms;
    }
    if (!ksc_deleting(rs)) {
        long long diff = s.replicas - ksc_int(rs, "spec.replicas", 1);
        if (diff < 0)
            rc = create_pods(w, rs, -diff > RS_BURST ? RS_BURST : -diff, err);
        else if (diff > 0)
            rc = delete_pods(w, rs, active, diff > RS_BURST ? RS_BURST : diff, err);
    }
    const ks_rtype *t = ksc_type(c, KSC_K_REPLICASET);
    kc_err serr;
    kc_err_clear(&serr);
    kc_code src =
        t ? ksc_mutate(w, t, ksc_str(rs, "metadata.namespace"), ksc_str(rs, "metadata.name"),
                       KS_WRITE_STATUS, write_status, &s, &serr)
          : KC_OK;
    if (src != KC_OK && src != KC_ENOTFOUND && rc == KC_OK) {
        rc = src;
        if (err)
            *err = serr;
    }
    if (soonest > 0) /* a ready pod becomes available after minReadySeconds */
        kc_workqueue_add_after(w->q, key, soonest);
    json_decref(active);
    json_decref(pods);
    json_decref(rs);
    return rc;
}
