/* Tests of kubesim's Deployment and ReplicaSet controllers, driven through the store. */
#include "ks_ctl_test.h"

#include "kc_patch.h"

static json_t *deployment(const char *name, int replicas, const char *image)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, "
                     "s:{s:[{s:s, s:s}]}}}}",
                     "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", name,
                     "namespace", "default", "spec", "replicas", replicas, "selector",
                     "matchLabels", "app", name, "template", "metadata", "labels", "app", name,
                     "spec", "containers", "name", "c", "image", image);
}

/* Nodes for the scheduler to bind to, so that the fake kubelet makes the pods Ready. */
static void add_nodes(kct *k)
{
    kct_node(k, "node-a", NULL, NULL, NULL);
    kct_node(k, "node-b", NULL, NULL, NULL);
}

static kc_code set_replicas(void *ud, json_t *d, kc_err *err)
{
    json_object_set_new(json_object_get(d, "spec"), "replicas", json_integer(*(int *)ud));
    return KC_OK;
}

static kc_code set_image(void *ud, json_t *d, kc_err *err)
{
    json_t *c = json_array_get(ksc_at(d, "spec.template.spec.containers"), 0);
    json_object_set_new(c, "image", json_string(ud));
    return KC_OK;
}

static kc_code set_image_as_kubectl(void *ud, json_t *d, kc_err *err)
{
    json_object_set_new(ksc_at(d, "spec.template.metadata"), "creationTimestamp", json_null());
    return set_image(ud, d, err);
}

static void update(kct *k, const ks_rtype *t, const char *name, ks_mutate_fn fn, void *ud)
{
    kc_err err = {0};
    cr_assert_eq(ks_mutate(k->st, t, "default", name, KS_WRITE_MAIN, fn, ud, NULL, &err), KC_OK,
                 "%s", err.msg);
}

static const char *ann(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(ksc_at(o, "metadata.annotations"), k));
    return v ? v : "";
}

/* The ReplicaSets controlled by the Deployment (new array). */
static json_t *owned_rs(kct *k, const json_t *d)
{
    json_t *all = kct_list(k, k->rs, "default"), *out = json_array();
    size_t i;
    json_t *rs;
    json_array_foreach(all, i, rs)
    {
        const json_t *ref = ksc_controller_ref(rs);
        if (ref && !strcmp(ksc_str(ref, "uid"), ksc_str(d, "metadata.uid")))
            json_array_append(out, rs);
    }
    json_decref(all);
    return out;
}

/* helm's --wait rule for Deployments: observedGeneration caught up, a ReplicaSet owned by it
 * whose template equals the Deployment's (ignoring pod-template-hash), and that ReplicaSet's
 * readyReplicas >= replicas - maxUnavailable. */
static bool helm_ready(kct *k, const char *name, long long max_unavail)
{
    json_t *d = kct_get(k, k->deploy, "default", name);
    if (!d)
        return false;
    bool ok = false;
    json_t *rss = NULL;
    if (ksc_int(d, "status.observedGeneration", -1) != ksc_int(d, "metadata.generation", -2))
        goto out;
    rss = owned_rs(k, d);
    size_t i;
    json_t *rs;
    json_array_foreach(rss, i, rs)
    {
        json_t *t = json_deep_copy(ksc_at(rs, "spec.template"));
        json_object_del(ksc_at(t, "metadata.labels"), "pod-template-hash");
        bool same = kc_json_equal(t, ksc_at(d, "spec.template"));
        json_decref(t);
        if (same &&
            ksc_int(rs, "status.readyReplicas", 0) >= ksc_int(d, "spec.replicas", 1) - max_unavail)
            ok = true;
    }
out:
    json_decref(rss);
    json_decref(d);
    return ok;
}

static const json_t *condition(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(ksc_at(obj, "status.conditions"), i, c)
    {
        if (!strcmp(ksc_str(c, "type"), type))
            return c;
    }
    return NULL;
}

static bool status_settled(kct *k, const char *name, long long n)
{
    json_t *d = kct_get(k, k->deploy, "default", name);
    bool ok = d && ksc_int(d, "status.replicas", 0) == n &&
              ksc_int(d, "status.updatedReplicas", 0) == n &&
              ksc_int(d, "status.readyReplicas", 0) == n &&
              ksc_int(d, "status.availableReplicas", 0) == n &&
              ksc_int(d, "status.observedGeneration", -1) == ksc_int(d, "metadata.generation", 0);
    const json_t *p = ok ? condition(d, "Progressing") : NULL;
    ok = ok && p && !strcmp(ksc_str(p, "reason"), "NewReplicaSetAvailable");
    json_decref(d);
    return ok;
}

Test(deploy, creates_replicaset_and_pods_and_reports_status)
{
    kct k;
    kct_start(&k, false, true);
    add_nodes(&k);
    json_decref(kct_create(&k, k.deploy, "default", deployment("web", 3, "nginx:1")));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "app", "web", true) == 3, 5000));
    cr_assert(KCT_WAIT(status_settled(&k, "web", 3), 5000), "deployment status never settled");
    json_t *d = kct_get(&k, k.deploy, "default", "web");
    json_t *rss = owned_rs(&k, d);
    cr_assert_eq(json_array_size(rss), 1);
    json_t *rs = json_array_get(rss, 0);
    const char *hash =
        json_string_value(json_object_get(ksc_at(rs, "metadata.labels"), "pod-template-hash"));
    cr_assert_not_null(hash);
    char want[64];
    snprintf(want, sizeof want, "web-%s", hash);
    cr_assert_str_eq(ksc_str(rs, "metadata.name"), want);
    cr_assert_str_eq(ksc_str(ksc_at(rs, "spec.selector.matchLabels"), "pod-template-hash"), hash);
    cr_assert_eq(ksc_int(rs, "spec.replicas", 0), 3);
    cr_assert_str_eq(ann(rs, "deployment.kubernetes.io/revision"), "1");
    cr_assert_str_eq(ann(d, "deployment.kubernetes.io/revision"), "1");
    cr_assert_eq(ksc_int(d, "status.unavailableReplicas", 0), 0);
    const json_t *av = condition(d, "Available");
    cr_assert_not_null(av);
    cr_assert_str_eq(ksc_str(av, "status"), "True");
    cr_assert_str_eq(ksc_str(av, "reason"), "MinimumReplicasAvailable");
    const json_t *pr = condition(d, "Progressing");
    char msg[128];
    snprintf(msg, sizeof msg, "ReplicaSet \"%s\" has successfully progressed.", want);
    cr_assert_str_eq(ksc_str(pr, "message"), msg);
    /* Every pod is controlled by the ReplicaSet and carries the template's labels. */
    json_t *pods = kct_pods(&k, "default", "app", "web");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        const json_t *ref = ksc_controller_ref(p);
        cr_assert_not_null(ref);
        cr_assert_str_eq(ksc_str(ref, "kind"), "ReplicaSet");
        cr_assert_str_eq(ksc_str(ref, "uid"), ksc_str(rs, "metadata.uid"));
        cr_assert(json_is_true(json_object_get(ref, "blockOwnerDeletion")));
        cr_assert_eq(strncmp(ksc_str(p, "metadata.name"), want, strlen(want)), 0);
    }
    /* ReplicaSet status and the Events both controllers write. */
    json_t *rsnow = kct_get(&k, k.rs, "default", want);
    cr_assert_eq(ksc_int(rsnow, "status.replicas", 0), 3);
    cr_assert_eq(ksc_int(rsnow, "status.fullyLabeledReplicas", 0), 3);
    cr_assert_eq(ksc_int(rsnow, "status.readyReplicas", 0), 3);
    cr_assert_eq(ksc_int(rsnow, "status.availableReplicas", 0), 3);
    cr_assert_eq(ksc_int(rsnow, "status.observedGeneration", 0), 1);
    json_t *scaling = kct_events(&k, "default", "ScalingReplicaSet");
    cr_assert_eq(json_array_size(scaling), 1);
    snprintf(msg, sizeof msg, "Scaled up replica set %s from 0 to 3", want);
    cr_assert_str_eq(ksc_str(json_array_get(scaling, 0), "message"), msg);
    cr_assert_str_eq(ksc_str(json_array_get(scaling, 0), "involvedObject.kind"), "Deployment");
    cr_assert_str_eq(ksc_str(json_array_get(scaling, 0), "source.component"),
                     "deployment-controller");
    json_t *created = kct_events(&k, "default", "SuccessfulCreate");
    cr_assert_eq(json_array_size(created), 3);
    cr_assert_eq(strncmp(ksc_str(json_array_get(created, 0), "message"), "Created pod: web-", 17),
                 0);
    cr_assert(helm_ready(&k, "web", 0));
    json_decref(created);
    json_decref(scaling);
    json_decref(rsnow);
    json_decref(pods);
    json_decref(rss);
    json_decref(d);
    kct_stop(&k);
}

Test(deploy, scales_up_and_down)
{
    kct k;
    kct_start(&k, false, true);
    add_nodes(&k);
    json_decref(kct_create(&k, k.deploy, "default", deployment("api", 2, "api:1")));
    cr_assert(KCT_WAIT(status_settled(&k, "api", 2), 5000));
    int n = 5;
    update(&k, k.deploy, "api", set_replicas, &n);
    cr_assert(KCT_WAIT(status_settled(&k, "api", 5), 5000));
    cr_assert_eq(kct_npods(&k, "default", "app", "api", true), 5);
    n = 1;
    update(&k, k.deploy, "api", set_replicas, &n);
    cr_assert(KCT_WAIT(status_settled(&k, "api", 1), 5000));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "app", "api", false) == 1, 5000));
    /* Scaling is not a rollout: still one ReplicaSet at revision 1. */
    json_t *d = kct_get(&k, k.deploy, "default", "api");
    json_t *rss = owned_rs(&k, d);
    cr_assert_eq(json_array_size(rss), 1);
    cr_assert_str_eq(ann(json_array_get(rss, 0), "deployment.kubernetes.io/revision"), "1");
    json_t *down = kct_events(&k, "default", "ScalingReplicaSet");
    bool saw_down = false;
    size_t i;
    json_t *e;
    json_array_foreach(down, i, e) saw_down |=
        strstr(ksc_str(e, "message"), "Scaled down replica set") != NULL &&
        strstr(ksc_str(e, "message"), "from 5 to 1") != NULL;
    cr_assert(saw_down, "a ScalingReplicaSet event for the scale down");
    json_decref(down);
    json_decref(rss);
    json_decref(d);
    kct_stop(&k);
}

typedef struct sampler {
    kct *k;
    volatile int stop;
    long long min_ready, max_live;
} sampler;

static void *sample_main(void *arg)
{
    sampler *s = arg;
    while (!s->stop) {
        json_t *pods = kct_pods(s->k, "default", "app", "roll");
        long long ready = 0, live = 0;
        size_t i;
        json_t *p;
        json_array_foreach(pods, i, p)
        {
            if (ksc_deleting(p))
                continue;
            live++;
            ready += ksc_pod_ready(p);
        }
        if (ready < s->min_ready)
            s->min_ready = ready;
        if (live > s->max_live)
            s->max_live = live;
        json_decref(pods);
        kct_sleep_ms(1);
    }
    return NULL;
}

Test(deploy, template_change_rolls_within_surge_and_unavailability)
{
    kct k;
    kct_start(&k, false, true);
    add_nodes(&k);
    json_t *d = deployment("roll", 4, "app:1");
    json_object_set_new(json_object_get(d, "spec"), "strategy",
                        json_pack("{s:s, s:{s:i, s:i}}", "type", "RollingUpdate", "rollingUpdate",
                                  "maxSurge", 1, "maxUnavailable", 0));
    json_decref(kct_create(&k, k.deploy, "default", d));
    cr_assert(KCT_WAIT(status_settled(&k, "roll", 4), 5000));
    sampler s = {.k = &k, .min_ready = 1000};
    pthread_t th;
    pthread_create(&th, NULL, sample_main, &s);
    update(&k, k.deploy, "roll", set_image, "app:2");
    cr_assert(KCT_WAIT(status_settled(&k, "roll", 4) &&
                           kct_npods(&k, "default", "app", "roll", false) == 4,
                       10000),
              "rollout never completed");
    s.stop = 1;
    pthread_join(th, NULL);
    cr_assert_geq(s.min_ready, 4, "ready pods dropped to %lld with maxUnavailable 0", s.min_ready);
    cr_assert_leq(s.max_live, 5, "%lld pods at once with maxSurge 1", s.max_live);
    json_t *dep = kct_get(&k, k.deploy, "default", "roll");
    cr_assert_str_eq(ann(dep, "deployment.kubernetes.io/revision"), "2");
    json_t *rss = owned_rs(&k, dep);
    cr_assert_eq(json_array_size(rss), 2);
    size_t i;
    json_t *rs;
    int news = 0;
    json_array_foreach(rss, i, rs)
    {
        const char *img =
            ksc_str(json_array_get(ksc_at(rs, "spec.template.spec.containers"), 0), "image");
        if (!strcmp(img, "app:2")) {
            news++;
            cr_assert_eq(ksc_int(rs, "spec.replicas", -1), 4);
            cr_assert_str_eq(ann(rs, "deployment.kubernetes.io/revision"), "2");
        } else {
            cr_assert_eq(ksc_int(rs, "spec.replicas", -1), 0);
            cr_assert_str_eq(ann(rs, "deployment.kubernetes.io/revision"), "1");
        }
    }
    cr_assert_eq(news, 1);
    cr_assert(helm_ready(&k, "roll", 0));
    /* Rolling back to the first template reuses its ReplicaSet as revision 3, even written the
     * way `kubectl rollout undo` writes it (with creationTimestamp: null). */
    update(&k, k.deploy, "roll", set_image_as_kubectl, "app:1");
    cr_assert(KCT_WAIT(status_settled(&k, "roll", 4) &&
                           kct_npods(&k, "default", "app", "roll", false) == 4,
                       10000));
    json_decref(rss);
    json_decref(dep);
    dep = kct_get(&k, k.deploy, "default", "roll");
    rss = owned_rs(&k, dep);
    cr_assert_eq(json_array_size(rss), 2);
    cr_assert_str_eq(ann(dep, "deployment.kubernetes.io/revision"), "3");
    json_decref(rss);
    json_decref(dep);
    kct_stop(&k);
}

static kc_code set_recreate_image(void *ud, json_t *d, kc_err *err)
{
    set_image(ud, d, err);
    json_object_set_new(json_object_get(d, "spec"), "revisionHistoryLimit", json_integer(1));
    return KC_OK;
}

Test(deploy, recreate_and_history_limit)
{
    kct k;
    kct_start(&k, false, true);
    add_nodes(&k);
    json_t *d = deployment("rec", 2, "v:1");
    json_object_set_new(json_object_get(d, "spec"), "strategy",
                        json_pack("{s:s}", "type", "Recreate"));
    json_decref(kct_create(&k, k.deploy, "default", d));
    cr_assert(KCT_WAIT(status_settled(&k, "rec", 2), 5000));
    const char *images[] = {"v:2", "v:3", "v:4"};
    for (int r = 0; r < 3; r++) {
        update(&k, k.deploy, "rec", set_recreate_image, (void *)images[r]);
        cr_assert(KCT_WAIT(status_settled(&k, "rec", 2) &&
                               kct_npods(&k, "default", "app", "rec", false) == 2,
                           10000),
                  "rollout %d", r);
    }
    json_t *dep = kct_get(&k, k.deploy, "default", "rec");
    /* revisionHistoryLimit 1: the current ReplicaSet plus one old one. */
    cr_assert(KCT_WAIT(({
                           json_t *r_ = owned_rs(&k, dep);
                           size_t n_ = json_array_size(r_);
                           json_decref(r_);
                           n_ == 2;
                       }),
                       5000));
    cr_assert_str_eq(ann(dep, "deployment.kubernetes.io/revision"), "4");
    /* Recreate: the Available condition needs every replica (maxUnavailable is 0). */
    cr_assert(helm_ready(&k, "rec", 0));
    json_decref(dep);
    kct_stop(&k);
}

static json_t *replicaset(const char *name, int replicas)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, "
                     "s:{s:[{s:s, s:s}]}}}}",
                     "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", name,
                     "namespace", "default", "spec", "replicas", replicas, "selector",
                     "matchLabels", "rs", name, "template", "metadata", "labels", "rs", name,
                     "spec", "containers", "name", "c", "image", "x");
}

Test(replicaset, replaces_deleted_pods_and_scales_down_unready_first)
{
    kct k;
    kct_start(&k, false, true);
    k.auto_ready = 0;
    json_decref(kct_create(&k, k.rs, "default", replicaset("plain", 3)));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "rs", "plain", true) == 3, 5000));
    /* Pods the RS made have no node here (no scheduler nodes): unscheduled pods go at once. */
    json_t *pods = kct_pods(&k, "default", "rs", "plain");
    const char *victim = ksc_str(json_array_get(pods, 0), "metadata.name");
    ks_delete_opts o = {.grace_period_seconds = -1};
    cr_assert_eq(ks_delete(k.st, k.pods, "default", victim, &o, NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "rs", "plain", true) == 3 && ({
                           json_t *g_ = kct_get(&k, k.pods, "default", victim);
                           json_decref(g_);
                           g_ == NULL;
                       }),
                       5000));
    json_decref(pods);
    /* One Ready pod survives a scale down to 1: not-ready pods are deleted first. */
    pods = kct_pods(&k, "default", "rs", "plain");
    char keep[128];
    snprintf(keep, sizeof keep, "%s", ksc_str(json_array_get(pods, 1), "metadata.name"));
    cr_assert_eq(kct_set_ready(&k, "default", keep, true), KC_OK);
    cr_assert(KCT_WAIT(kct_int(&k, k.rs, "default", "plain", "status.readyReplicas") == 1, 5000));
    int one = 1;
    update(&k, k.rs, "plain", set_replicas, &one);
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "rs", "plain", false) == 1, 5000));
    json_t *left = kct_pods(&k, "default", "rs", "plain");
    cr_assert_str_eq(ksc_str(json_array_get(left, 0), "metadata.name"), keep);
    cr_assert(KCT_WAIT(kct_int(&k, k.rs, "default", "plain", "status.replicas") == 1 &&
                           kct_int(&k, k.rs, "default", "plain", "status.observedGeneration") == 2,
                       5000));
    json_t *deleted = kct_events(&k, "default", "SuccessfulDelete");
    cr_assert_eq(json_array_size(deleted), 2);
    json_decref(deleted);
    json_decref(left);
    json_decref(pods);
    kct_stop(&k);
}

Test(deploy, helm_wait_with_admission_defaults)
{
    kct k;
    kct_start(&k, true, true);
    add_nodes(&k);
    json_decref(kct_create(&k, k.deploy, "default", deployment("helmy", 2, "img:1")));
    cr_assert(KCT_WAIT(helm_ready(&k, "helmy", 0) && status_settled(&k, "helmy", 2), 5000),
              "helm --wait would not see the Deployment ready");
    update(&k, k.deploy, "helmy", set_image, "img:2");
    cr_assert(KCT_WAIT(helm_ready(&k, "helmy", 0) && status_settled(&k, "helmy", 2) &&
                           kct_npods(&k, "default", "app", "helmy", false) == 2,
                       10000),
              "helm --wait would not see the upgraded Deployment ready");
    kct_stop(&k);
}
