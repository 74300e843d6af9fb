/* Tests of kubesim's DaemonSet controller and its node rules, driven through the store. */
#include "ks_ctl_test.h"

static json_t *daemonset(const char *name, json_t *pod_spec_extra, json_t *update_strategy)
{
    json_t *ds = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:{s:s}}, s:{s:{s:{s:s}}, "
                           "s:{s:[{s:s, s:s}]}}}}",
                           "apiVersion", "apps/v1", "kind", "DaemonSet", "metadata", "name", name,
                           "namespace", "default", "spec", "selector", "matchLabels", "ds", name,
                           "template", "metadata", "labels", "ds", name, "spec", "containers",
                           "name", "c", "image", "agent:1");
    json_t *pspec = ksc_at(ds, "spec.template.spec");
    const char *k;
    json_t *v;
    json_object_foreach(pod_spec_extra, k, v) json_object_set(pspec, k, v);
    json_decref(pod_spec_extra);
    if (update_strategy)
        json_object_set_new(json_object_get(ds, "spec"), "updateStrategy", update_strategy);
    return ds;
}

static kc_code set_image(void *ud, json_t *ds, kc_err *err)
{
    json_t *c = json_array_get(ksc_at(ds, "spec.template.spec.containers"), 0);
    json_object_set_new(c, "image", json_string(ud));
    return KC_OK;
}

static kc_code set_labels(void *ud, json_t *node, kc_err *err)
{
    json_object_set(json_object_get(node, "metadata"), "labels", ud);
    return KC_OK;
}

static kc_code set_taints(void *ud, json_t *node, kc_err *err)
{
    json_object_set(json_object_get(node, "spec"), "taints", ud);
    return KC_OK;
}

static void mutate_node(kct *k, const char *name, ks_mutate_fn fn, json_t *v)
{
    kc_err err = {0};
    cr_assert_eq(ks_mutate(k->st, k->nodes, "", name, KS_WRITE_MAIN, fn, v, NULL, &err), KC_OK,
                 "%s", err.msg);
    json_decref(v);
}

/* The DaemonSet's live pods by node: true when exactly one is on node. */
static bool pod_on(kct *k, const char *ds, const char *node)
{
    json_t *pods = kct_pods(k, "default", "ds", ds);
    int n = 0;
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p) n +=
        !ksc_deleting(p) && !strcmp(ksc_str(p, "spec.nodeName"), node);
    json_decref(pods);
    return n == 1;
}

static bool ds_status(kct *k, const char *name, long long desired, long long ready,
                      long long updated)
{
    json_t *d = kct_get(k, k->ds, "default", name);
    bool ok = d && ksc_int(d, "status.desiredNumberScheduled", -1) == desired &&
              ksc_int(d, "status.currentNumberScheduled", -1) == desired &&
              ksc_int(d, "status.numberReady", -1) == ready &&
              ksc_int(d, "status.numberAvailable", -1) == ready &&
              ksc_int(d, "status.numberUnavailable", -1) == desired - ready &&
              ksc_int(d, "status.updatedNumberScheduled", -1) == updated &&
              ksc_int(d, "status.numberMisscheduled", -1) == 0 &&
              ksc_int(d, "status.collisionCount", -1) == 0 &&
              ksc_int(d, "status.observedGeneration", -1) == ksc_int(d, "metadata.generation", 0);
    json_decref(d);
    return ok;
}

Test(daemonset, one_pod_per_selected_node_with_revision_labels)
{
    kct k;
    kct_start(&k, false, true);
    for (int i = 0; i < 5; i++) {
        char n[16];
        snprintf(n, sizeof n, "n%d", i);
        kct_node(&k, n, i < 3 ? json_pack("{s:s}", "gpu", "true") : NULL, NULL, NULL);
    }
    json_decref(kct_create(
        &k, k.ds, "default",
        daemonset("agent", json_pack("{s:{s:s}}", "nodeSelector", "gpu", "true"), NULL)));
    cr_assert(KCT_WAIT(ds_status(&k, "agent", 3, 3, 3), 5000), "status never settled");
    cr_assert_eq(kct_npods(&k, "default", "ds", "agent", false), 3);
    cr_assert(pod_on(&k, "agent", "n0") && pod_on(&k, "agent", "n1") && pod_on(&k, "agent", "n2"));
    json_t *crs = kct_list(&k, k.crev, "default");
    cr_assert_eq(json_array_size(crs), 1);
    json_t *cr = json_array_get(crs, 0);
    cr_assert_eq(ksc_int(cr, "revision", 0), 1);
    const char *hash =
        ksc_str(json_object_get(ksc_at(cr, "metadata"), "labels"), "controller-revision-hash");
    char want[64];
    snprintf(want, sizeof want, "agent-%s", hash);
    cr_assert_str_eq(ksc_str(cr, "metadata.name"), want);
    cr_assert_str_eq(ksc_str(ksc_at(cr, "data.spec.template"), "$patch"), "replace");
    json_t *pods = kct_pods(&k, "default", "ds", "agent");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        json_t *labels = ksc_at(p, "metadata.labels");
        cr_assert_str_eq(json_string_value(json_object_get(labels, "controller-revision-hash")),
                         hash);
        cr_assert_str_eq(json_string_value(json_object_get(labels, "pod-template-generation")),
                         "1");
        cr_assert_str_eq(ksc_str(ksc_controller_ref(p), "kind"), "DaemonSet");
        /* DaemonSet pods tolerate what the real controller adds. */
        bool unsched = false;
        size_t j;
        json_t *t;
        json_array_foreach(ksc_at(p, "spec.tolerations"), j, t) unsched |=
            !strcmp(ksc_str(t, "key"), "node.kubernetes.io/unschedulable");
        cr_assert(unsched);
        json_t *term = json_array_get(
            ksc_at(p, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                      "nodeSelectorTerms"),
            0);
        cr_assert_str_eq(ksc_str(json_array_get(json_object_get(term, "matchFields"), 0), "key"),
                         "metadata.name");
    }
    json_t *ev = kct_events(&k, "default", "SuccessfulCreate");
    cr_assert_eq(json_array_size(ev), 3);
    cr_assert_str_eq(ksc_str(json_array_get(ev, 0), "involvedObject.kind"), "DaemonSet");
    json_decref(ev);
    json_decref(pods);
    json_decref(crs);
    kct_stop(&k);
}

Test(daemonset, follows_node_labels_taints_and_new_nodes)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "a", json_pack("{s:s}", "role", "gpu"), NULL, NULL);
    kct_node(
        &k, "b", json_pack("{s:s}", "role", "gpu"),
        json_pack("[{s:s, s:s, s:s}]", "key", "dedicated", "value", "x", "effect", "NoSchedule"),
        NULL);
    kct_node(&k, "c", json_pack("{s:s}", "role", "cpu"), NULL, NULL);
    json_t *aff = json_pack("{s:{s:{s:{s:[{s:[{s:s, s:s, s:[s]}]}]}}}}", "affinity", "nodeAffinity",
                            "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                            "matchExpressions", "key", "role", "operator", "In", "values", "gpu");
    json_decref(kct_create(&k, k.ds, "default", daemonset("gpu", aff, NULL)));
    /* b's NoSchedule taint is not tolerated; c does not match. */
    cr_assert(KCT_WAIT(ds_status(&k, "gpu", 1, 1, 1), 5000));
    cr_assert(pod_on(&k, "gpu", "a"));
    /* Removing the label removes the pod (how the GPU operator's deploy labels work). */
    mutate_node(&k, "a", set_labels, json_pack("{s:s}", "role", "none"));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "ds", "gpu", false) == 0, 5000));
    cr_assert(KCT_WAIT(ds_status(&k, "gpu", 0, 0, 0), 5000));
    /* Labelling c brings one. */
    mutate_node(&k, "c", set_labels, json_pack("{s:s}", "role", "gpu"));
    cr_assert(KCT_WAIT(pod_on(&k, "gpu", "c") && ds_status(&k, "gpu", 1, 1, 1), 5000));
    /* A NoExecute taint evicts; a new matching node gets a pod. */
    mutate_node(&k, "c", set_taints,
                json_pack("[{s:s, s:s}]", "key", "maintenance", "effect", "NoExecute"));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "ds", "gpu", false) == 0, 5000));
    kct_node(&k, "d", json_pack("{s:s}", "role", "gpu"), NULL, NULL);
    cr_assert(KCT_WAIT(pod_on(&k, "gpu", "d") && ds_status(&k, "gpu", 1, 1, 1), 5000));
    /* An unschedulable (cordoned) node still runs daemon pods. */
    json_t *n =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:b}}", "apiVersion", "v1", "kind", "Node",
                  "metadata", "name", "e", "labels", "role", "gpu", "spec", "unschedulable", 1);
    json_decref(kct_create(&k, k.nodes, "", n));
    cr_assert(KCT_WAIT(pod_on(&k, "gpu", "e"), 5000));
    kct_stop(&k);
}

Test(daemonset, node_changes_wake_only_the_daemonsets_they_concern)
{
    /* As the real controller's updateNode: a node update enqueues a DaemonSet only when it
     * changes whether the DaemonSet should run (or keep running) a pod there. A GPU rollout's
     * deploy-label patches then wake one DaemonSet each, not every one. */
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "a", json_pack("{s:s}", "role", "gpu"), NULL, NULL);
    kct_node(&k, "b", json_pack("{s:s}", "role", "cpu"), NULL, NULL);
    json_decref(
        kct_create(&k, k.ds, "default",
                   daemonset("gpu", json_pack("{s:{s:s}}", "nodeSelector", "role", "gpu"), NULL)));
    cr_assert(KCT_WAIT(ds_status(&k, "gpu", 1, 1, 1), 5000));
    unsigned long before = kct_syncs_settled(&k, KSC_W_DS);
    /* Labels the DaemonSet does not select on, on both nodes: no sync. */
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        mutate_node(&k, "a", set_labels, json_pack("{s:s, s:s}", "role", "gpu", "other", v));
        mutate_node(&k, "b", set_labels, json_pack("{s:s, s:s}", "role", "cpu", "other", v));
    }
    /* A taint its pods tolerate (DaemonSets add the unschedulable toleration): no sync either. */
    mutate_node(&k, "a", set_taints,
                json_pack("[{s:s, s:s}]", "key", "node.kubernetes.io/unschedulable", "effect",
                          "NoSchedule"));
    cr_assert_eq(kct_syncs_settled(&k, KSC_W_DS), before,
                 "unrelated node changes synced the DaemonSet");
    /* A change of its decision for b: synced, and b gets its pod. */
    mutate_node(&k, "b", set_labels, json_pack("{s:s}", "role", "gpu"));
    cr_assert(KCT_WAIT(pod_on(&k, "gpu", "b") && ds_status(&k, "gpu", 2, 2, 2), 5000));
    cr_assert_gt(kct_syncs(&k, KSC_W_DS), before);
    kct_stop(&k);
}

Test(daemonset, tolerations_admit_tainted_nodes)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "t1", NULL,
             json_pack("[{s:s, s:s, s:s}]", "key", "nvidia.com/gpu", "value", "present", "effect",
                       "NoSchedule"),
             NULL);
    kct_node(&k, "t2", NULL, json_pack("[{s:s, s:s}]", "key", "other", "effect", "NoSchedule"),
             NULL);
    json_decref(kct_create(
        &k, k.ds, "default",
        daemonset("tol",
                  json_pack("{s:[{s:s, s:s, s:s}]}", "tolerations", "key", "nvidia.com/gpu",
                            "operator", "Exists", "effect", "NoSchedule"),
                  NULL)));
    json_decref(kct_create(
        &k, k.ds, "default",
        daemonset("all", json_pack("{s:[{s:s}]}", "tolerations", "operator", "Exists"), NULL)));
    cr_assert(KCT_WAIT(ds_status(&k, "tol", 1, 1, 1) && ds_status(&k, "all", 2, 2, 2), 5000));
    cr_assert(pod_on(&k, "tol", "t1"));
    cr_assert(!pod_on(&k, "tol", "t2"));
    kct_stop(&k);
}

typedef struct roll_sampler {
    kct *k;
    int nodes;
    volatile int stop;
    long long max_unavail, samples;
} roll_sampler;

/* Unavailable = a node without a Ready pod that is not being deleted. */
static void *roll_sample(void *arg)
{
    roll_sampler *s = arg;
    while (!s->stop) {
        json_t *pods = kct_pods(s->k, "default", "ds", "fleet");
        long long avail = 0;
        size_t i;
        json_t *p;
        json_array_foreach(pods, i, p) avail += !ksc_deleting(p) && ksc_pod_ready(p);
        if (s->nodes - avail > s->max_unavail)
            s->max_unavail = s->nodes - avail;
        s->samples++;
        json_decref(pods);
        kct_sleep_ms(1);
    }
    return NULL;
}

static bool all_updated(kct *k, const char *image)
{
    json_t *pods = kct_pods(k, "default", "ds", "fleet");
    bool ok = json_array_size(pods) > 0;
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p) ok &=
        !strcmp(ksc_str(json_array_get(ksc_at(p, "spec.containers"), 0), "image"), image);
    json_decref(pods);
    return ok;
}

static void rolling(int nodes, json_t *strategy, long long limit)
{
    kct k;
    kct_start(&k, false, true);
    for (int i = 0; i < nodes; i++) {
        char n[16];
        snprintf(n, sizeof n, "node-%03d", i);
        kct_node(&k, n, NULL, NULL, NULL);
    }
    json_decref(kct_create(&k, k.ds, "default", daemonset("fleet", NULL, strategy)));
    cr_assert(KCT_WAIT(ds_status(&k, "fleet", nodes, nodes, nodes), 20000), "initial rollout");
    /* Readiness takes a moment, so that the sampler sees the nodes in between. */
    k.ready_delay_ms = 3;
    roll_sampler s = {.k = &k, .nodes = nodes};
    pthread_t th;
    pthread_create(&th, NULL, roll_sample, &s);
    kc_err err = {0};
    cr_assert_eq(
        ks_mutate(k.st, k.ds, "default", "fleet", KS_WRITE_MAIN, set_image, "agent:2", NULL, &err),
        KC_OK);
    cr_assert(KCT_WAIT(ds_status(&k, "fleet", nodes, nodes, nodes) &&
                           kct_npods(&k, "default", "ds", "fleet", false) == (size_t)nodes &&
                           all_updated(&k, "agent:2"),
                       60000),
              "rolling update never finished");
    s.stop = 1;
    pthread_join(th, NULL);
    cr_log_info("rolled %d nodes: at most %lld unavailable over %lld samples", nodes, s.max_unavail,
                s.samples);
    cr_assert_gt(s.samples, 0);
    cr_assert_leq(s.max_unavail, limit, "%lld nodes unavailable at once (limit %lld)",
                  s.max_unavail, limit);
    cr_assert_gt(s.max_unavail, 0, "the sampler saw the roll");
    /* helm --wait: observedGeneration, updated == desired, ready >= desired - maxUnavailable. */
    json_t *d = kct_get(&k, k.ds, "default", "fleet");
    cr_assert_eq(ksc_int(d, "status.observedGeneration", 0), 2);
    cr_assert_eq(ksc_int(d, "metadata.generation", 0), 2);
    json_decref(d);
    json_t *crs = kct_list(&k, k.crev, "default");
    cr_assert_eq(json_array_size(crs), 2);
    long long maxrev = 0;
    size_t i;
    json_t *cr;
    json_array_foreach(crs, i, cr) if (ksc_int(cr, "revision", 0) > maxrev) maxrev =
        ksc_int(cr, "revision", 0);
    cr_assert_eq(maxrev, 2);
    json_decref(crs);
    json_t *pods = kct_pods(&k, "default", "ds", "fleet");
    json_array_foreach(pods, i, cr)
        cr_assert_str_eq(json_string_value(json_object_get(ksc_at(cr, "metadata.labels"),
                                                           "pod-template-generation")),
                         "2");
    json_decref(pods);
    kct_stop(&k);
}

Test(daemonset, rolling_update_10_percent_of_100_nodes)
{
    rolling(100,
            json_pack("{s:s, s:{s:s}}", "type", "RollingUpdate", "rollingUpdate", "maxUnavailable",
                      "10%"),
            10);
}

Test(daemonset, rolling_update_default_one_at_a_time)
{
    rolling(6, NULL, 1);
}

Test(daemonset, on_delete_keeps_old_pods_until_deleted)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "x", NULL, NULL, NULL);
    kct_node(&k, "y", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.ds, "default",
                           daemonset("od", NULL, json_pack("{s:s}", "type", "OnDelete"))));
    cr_assert(KCT_WAIT(ds_status(&k, "od", 2, 2, 2), 5000));
    cr_assert_eq(
        ks_mutate(k.st, k.ds, "default", "od", KS_WRITE_MAIN, set_image, "agent:2", NULL, NULL),
        KC_OK);
    cr_assert(KCT_WAIT(ds_status(&k, "od", 2, 2, 0), 5000));
    kct_sleep_ms(100);
    cr_assert_eq(kct_npods(&k, "default", "ds", "od", false), 2, "old pods are kept");
    /* The user deletes the pod on x: its replacement runs the new template. */
    json_t *pods = kct_pods(&k, "default", "ds", "od");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        if (!strcmp(ksc_str(p, "spec.nodeName"), "x")) {
            ks_delete_opts o = {.grace_period_seconds = -1};
            cr_assert_eq(
                ks_delete(k.st, k.pods, "default", ksc_str(p, "metadata.name"), &o, NULL, NULL),
                KC_OK);
        }
    }
    cr_assert(KCT_WAIT(ds_status(&k, "od", 2, 2, 1), 5000));
    json_decref(pods);
    pods = kct_pods(&k, "default", "ds", "od");
    json_array_foreach(pods, i, p)
    {
        const char *img = ksc_str(json_array_get(ksc_at(p, "spec.containers"), 0), "image");
        cr_assert_str_eq(img, !strcmp(ksc_str(p, "spec.nodeName"), "x") ? "agent:2" : "agent:1");
    }
    json_decref(pods);
    kct_stop(&k);
}

Test(daemonset, pods_pass_admission_and_roll)
{
    kct k;
    kct_start(&k, true, true);
    kct_node(&k, "a1", NULL, NULL, NULL);
    kct_node(&k, "a2", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.ds, "default", daemonset("adm", NULL, NULL)));
    cr_assert(KCT_WAIT(ds_status(&k, "adm", 2, 2, 2), 5000), "pods created through admission");
    cr_assert_eq(
        ks_mutate(k.st, k.ds, "default", "adm", KS_WRITE_MAIN, set_image, "agent:2", NULL, NULL),
        KC_OK);
    cr_assert(KCT_WAIT(ds_status(&k, "adm", 2, 2, 2) &&
                           kct_npods(&k, "default", "ds", "adm", false) == 2 && ({
                               json_t *d_ = kct_get(&k, k.ds, "default", "adm");
                               bool r_ = ksc_int(d_, "status.observedGeneration", 0) == 2;
                               json_decref(d_);
                               r_;
                           }),
                       5000));
    kct_stop(&k);
}

Test(daemonset, status_counts_unready_pods)
{
    kct k;
    kct_start(&k, false, true);
    k.auto_ready = 0;
    kct_node(&k, "u1", NULL, NULL, NULL);
    kct_node(&k, "u2", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.ds, "default", daemonset("slow", NULL, NULL)));
    cr_assert(KCT_WAIT(ds_status(&k, "slow", 2, 0, 2), 5000));
    json_t *pods = kct_pods(&k, "default", "ds", "slow");
    cr_assert_eq(
        kct_set_ready(&k, "default", ksc_str(json_array_get(pods, 0), "metadata.name"), true),
        KC_OK);
    cr_assert(KCT_WAIT(ds_status(&k, "slow", 2, 1, 2), 5000));
    json_decref(pods);
    kct_stop(&k);
}

/* ---- the node rules on their own ---- */

static json_t *node(const char *name, json_t *labels, json_t *taints)
{
    json_t *n = json_pack("{s:{s:s, s:o}, s:{}}", "metadata", "name", name, "labels",
                          labels ? labels : json_object(), "spec");
    if (taints)
        json_object_set_new(json_object_get(n, "spec"), "taints", taints);
    return n;
}

static bool matches_expr(const char *op, json_t *values, json_t *node_labels)
{
    json_t *spec = json_pack("{s:{s:{s:{s:[{s:[{s:s, s:s}]}]}}}}", "affinity", "nodeAffinity",
                             "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                             "matchExpressions", "key", "k", "operator", op);
    if (values)
        json_object_set_new(
            json_array_get(
                json_object_get(json_array_get(ksc_at(spec, "affinity.nodeAffinity."
                                                            "requiredDuringSchedulingIgnoredDu"
                                                            "ringExecution.nodeSelectorTerms"),
                                               0),
                                "matchExpressions"),
                0),
            "values", values);
    json_t *n = node("n", node_labels, NULL);
    bool r = ksc_node_matches(spec, n);
    json_decref(n);
    json_decref(spec);
    return r;
}

Test(node_rules, normalized_templates_hash_alike)
{
    json_t *a = json_pack("{s:{s:{s:s}}, s:{s:[{s:s}]}}", "metadata", "labels", "x", "y", "spec",
                          "containers", "name", "c");
    json_t *b = json_pack("{s:{s:n, s:{s:s}, s:{}}, s:{s:[{s:s, s:[]}], s:n}}", "metadata",
                          "creationTimestamp", "labels", "x", "y", "annotations", "spec",
                          "containers", "name", "c", "env", "nodeSelector");
    char ha[16], hb[16];
    ksc_template_hash(a, 0, ha);
    ksc_template_hash(b, 0, hb);
    cr_assert_str_eq(ha, hb, "null, {} and [] are unset, as in Go structs");
    json_t *na = ksc_normalized(a), *nb = ksc_normalized(b);
    cr_assert(json_equal(na, nb));
    json_decref(na);
    json_decref(nb);
    json_object_set_new(json_object_get(b, "spec"), "hostNetwork", json_true());
    ksc_template_hash(b, 0, hb);
    cr_assert_str_neq(ha, hb);
    json_decref(a);
    json_decref(b);
}

Test(node_rules, affinity_operators)
{
    cr_assert(matches_expr("In", json_pack("[s,s]", "a", "b"), json_pack("{s:s}", "k", "b")));
    cr_assert(!matches_expr("In", json_pack("[s]", "a"), json_pack("{s:s}", "k", "b")));
    cr_assert(!matches_expr("In", json_pack("[s]", "a"), NULL));
    cr_assert(matches_expr("NotIn", json_pack("[s]", "a"), NULL));
    cr_assert(!matches_expr("NotIn", json_pack("[s]", "a"), json_pack("{s:s}", "k", "a")));
    cr_assert(matches_expr("Exists", NULL, json_pack("{s:s}", "k", "")));
    cr_assert(!matches_expr("Exists", NULL, NULL));
    cr_assert(matches_expr("DoesNotExist", NULL, NULL));
    cr_assert(!matches_expr("DoesNotExist", NULL, json_pack("{s:s}", "k", "x")));
    cr_assert(matches_expr("Gt", json_pack("[s]", "4"), json_pack("{s:s}", "k", "8")));
    cr_assert(!matches_expr("Gt", json_pack("[s]", "8"), json_pack("{s:s}", "k", "8")));
    cr_assert(matches_expr("Lt", json_pack("[s]", "8"), json_pack("{s:s}", "k", "4")));
    cr_assert(!matches_expr("Lt", json_pack("[s]", "8"), json_pack("{s:s}", "k", "abc")));
    cr_assert(!matches_expr("Bogus", json_pack("[s]", "8"), json_pack("{s:s}", "k", "8")));
}

Test(node_rules, terms_fields_and_selector)
{
    json_t *n = node("gpu-1", json_pack("{s:s, s:s}", "zone", "a", "gpu", "yes"), NULL);
    /* Terms are ORed; matchFields on metadata.name. */
    json_t *spec = json_pack(
        "{s:{s:{s:{s:[{s:[{s:s, s:s, s:[s]}]}, {s:[{s:s, s:s, s:[s]}]}]}}}}", "affinity",
        "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
        "matchExpressions", "key", "zone", "operator", "In", "values", "b", "matchFields", "key",
        "metadata.name", "operator", "In", "values", "gpu-1");
    cr_assert(ksc_node_matches(spec, n));
    json_object_set_new(spec, "nodeSelector", json_pack("{s:s}", "gpu", "no"));
    cr_assert(!ksc_node_matches(spec, n), "nodeSelector must also hold");
    json_decref(spec);
    /* An empty term selects nothing. */
    spec = json_pack("{s:{s:{s:{s:[{}]}}}}", "affinity", "nodeAffinity",
                     "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms");
    cr_assert(!ksc_node_matches(spec, n));
    json_decref(spec);
    spec = json_object();
    cr_assert(ksc_node_matches(spec, n), "no constraints select every node");
    json_decref(spec);
    json_decref(n);
}

Test(node_rules, taints_and_tolerations)
{
    json_t *n = node("t", NULL,
                     json_pack("[{s:s, s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "key", "a", "value",
                               "1", "effect", "NoSchedule", "key", "b", "effect", "NoExecute",
                               "key", "c", "effect", "PreferNoSchedule"));
    json_t *none = json_object();
    const json_t *t = ksc_untolerated_taint(none, NULL, n, false);
    cr_assert_str_eq(ksc_str(t, "key"), "a");
    t = ksc_untolerated_taint(none, NULL, n, true);
    cr_assert_str_eq(ksc_str(t, "key"), "b", "only NoExecute counts for running pods");
    json_t *spec = json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s}]}", "tolerations", "key", "a",
                             "operator", "Equal", "value", "1", "key", "b", "operator", "Exists");
    cr_assert_null(ksc_untolerated_taint(spec, NULL, n, false));
    json_decref(spec);
    spec = json_pack("{s:[{s:s, s:s, s:s}]}", "tolerations", "key", "a", "value", "2", "effect",
                     "NoSchedule");
    cr_assert_str_eq(ksc_str(ksc_untolerated_taint(spec, NULL, n, false), "key"), "a",
                     "a different value is not tolerated");
    json_decref(spec);
    spec =
        json_pack("{s:[{s:s, s:s}]}", "tolerations", "operator", "Exists", "effect", "NoExecute");
    cr_assert_str_eq(ksc_str(ksc_untolerated_taint(spec, NULL, n, false), "key"), "a",
                     "an effect-limited wildcard tolerates only that effect");
    json_decref(spec);
    json_decref(none);
    json_decref(n);
}
