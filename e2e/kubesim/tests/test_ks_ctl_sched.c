/* Tests of kubesim's scheduler (resources, selectors, taints, messages, Events), its quantity
 * parsing, and the pod GC. */
#include "ks_ctl_test.h"

static json_t *pod(const char *name, json_t *limits, json_t *spec_extra)
{
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
                          "kind", "Pod", "metadata", "name", name, "namespace", "default", "spec",
                          "containers", "name", "c", "image", "cuda");
    if (limits)
        json_object_set_new(json_array_get(ksc_at(p, "spec.containers"), 0), "resources", limits);
    const char *k;
    json_t *v;
    json_object_foreach(spec_extra, k, v) json_object_set(json_object_get(p, "spec"), k, v);
    json_decref(spec_extra);
    return p;
}

static json_t *gpu_limits(const char *res, const char *n)
{
    return json_pack("{s:{s:s}}", "limits", res, n);
}

static json_t *alloc(const char *res, const char *n)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "cpu", "8", "memory", "32Gi", "pods", "110", res, n);
}

static char *node_of(kct *k, const char *name)
{
    json_t *p = kct_get(k, k->pods, "default", name);
    char *r = p && *ksc_str(p, "spec.nodeName") ? strdup(ksc_str(p, "spec.nodeName")) : NULL;
    json_decref(p);
    return r;
}

static bool bound(kct *k, const char *name)
{
    char *n = node_of(k, name);
    free(n);
    return n != NULL;
}

/* The PodScheduled condition's message when it is False, else "". */
static char *unsched_message(kct *k, const char *name)
{
    json_t *p = kct_get(k, k->pods, "default", name);
    char *r = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(ksc_at(p, "status.conditions"), i, c)
    {
        if (!strcmp(ksc_str(c, "type"), "PodScheduled") && !strcmp(ksc_str(c, "status"), "False") &&
            !strcmp(ksc_str(c, "reason"), "Unschedulable"))
            r = strdup(ksc_str(c, "message"));
    }
    json_decref(p);
    return r ? r : strdup("");
}

static bool has_message(kct *k, const char *name, const char *want)
{
    char *m = unsched_message(k, name);
    bool ok = !strcmp(m, want);
    free(m);
    return ok;
}

Test(sched, extended_resources_fit_or_stay_pending)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "g1", NULL, NULL, alloc("nvidia.com/gpu", "1"));
    kct_node(&k, "g2", NULL, NULL, alloc("nvidia.com/gpu", "2"));
    json_decref(
        kct_create(&k, k.pods, "default", pod("two", gpu_limits("nvidia.com/gpu", "2"), NULL)));
    cr_assert(KCT_WAIT(bound(&k, "two"), 5000));
    char *n = node_of(&k, "two");
    cr_assert_str_eq(n, "g2");
    free(n);
    json_decref(
        kct_create(&k, k.pods, "default", pod("big", gpu_limits("nvidia.com/gpu", "4"), NULL)));
    const char *want = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
    cr_assert(KCT_WAIT(has_message(&k, "big", want), 5000), "PodScheduled=False with: %s", want);
    cr_assert(!bound(&k, "big"));
    /* The Event follows the condition. */
    json_t *ev = NULL;
    cr_assert(KCT_WAIT(({
                           json_decref(ev);
                           ev = kct_events(&k, "default", "FailedScheduling");
                           json_array_size(ev) == 1;
                       }),
                       5000));
    json_t *e = json_array_get(ev, 0);
    cr_assert_str_eq(ksc_str(e, "type"), "Warning");
    cr_assert_str_eq(ksc_str(e, "message"), want);
    cr_assert_str_eq(ksc_str(e, "involvedObject.kind"), "Pod");
    cr_assert_str_eq(ksc_str(e, "involvedObject.name"), "big");
    cr_assert_str_eq(ksc_str(e, "source.component"), "default-scheduler");
    json_decref(ev);
    /* A big enough node arriving makes it schedulable. */
    kct_node(&k, "g4", NULL, NULL, alloc("nvidia.com/gpu", "4"));
    cr_assert(KCT_WAIT(bound(&k, "big"), 5000));
    n = node_of(&k, "big");
    cr_assert_str_eq(n, "g4");
    free(n);
    size_t i;
    cr_assert(KCT_WAIT(({
                           bool found_ = false;
                           json_t *l_ = kct_events(&k, "default", "Scheduled");
                           json_array_foreach(l_, i, e) found_ |= !strcmp(
                               ksc_str(e, "message"), "Successfully assigned default/big to g4");
                           json_decref(l_);
                           found_;
                       }),
                       5000));
    json_t *p = kct_get(&k, k.pods, "default", "big");
    bool sched_true = false;
    json_array_foreach(ksc_at(p, "status.conditions"), i, e) sched_true |=
        !strcmp(ksc_str(e, "type"), "PodScheduled") && !strcmp(ksc_str(e, "status"), "True");
    cr_assert(sched_true);
    json_decref(p);
    kct_stop(&k);
}

Test(sched, numeric_quantities_count)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "two", NULL, NULL, alloc("nvidia.com/gpu", "2"));
    json_decref(kct_create(&k, k.pods, "default",
                           pod("n3", json_pack("{s:{s:i}}", "limits", "nvidia.com/gpu", 3), NULL)));
    cr_assert(KCT_WAIT(has_message(&k, "n3",
                                   "0/1 nodes are available: 1 Insufficient "
                                   "nvidia.com/gpu."),
                       5000));
    json_decref(
        kct_create(&k, k.pods, "default",
                   pod("n2", json_pack("{s:{s:i}}", "requests", "nvidia.com/gpu", 2), NULL)));
    cr_assert(KCT_WAIT(bound(&k, "n2"), 5000));
    kct_stop(&k);
}

Test(sched, message_counts_each_reason)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "mig", json_pack("{s:s}", "pool", "a"), NULL, alloc("nvidia.com/mig-1g.5gb", "1"));
    kct_node(&k, "b1", json_pack("{s:s}", "pool", "b"), NULL, NULL);
    kct_node(&k, "b2", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.pods, "default",
                           pod("m", gpu_limits("nvidia.com/mig-1g.5gb", "2"),
                               json_pack("{s:{s:s}}", "nodeSelector", "pool", "a"))));
    cr_assert(KCT_WAIT(has_message(&k, "m",
                                   "0/3 nodes are available: 1 Insufficient nvidia.com/mig-1g.5gb, "
                                   "2 node(s) didn't match Pod's node affinity/selector."),
                       5000));
    kct_stop(&k);
}

static kc_code cordon(void *ud, json_t *n, kc_err *err)
{
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    return KC_OK;
}

static kc_code relabel(void *ud, json_t *n, kc_err *err)
{
    json_object_set_new(json_object_get(n, "metadata"), "labels", json_pack("{s:s}", "v", ud));
    return KC_OK;
}

Test(sched, taints_cordons_and_repeated_failures)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "t", NULL,
             json_pack("[{s:s, s:s, s:s}]", "key", "gpu", "value", "on", "effect", "NoSchedule"),
             NULL);
    kct_node(&k, "c", NULL, NULL, NULL);
    cr_assert_eq(ks_mutate(k.st, k.nodes, "", "c", KS_WRITE_MAIN, cordon, NULL, NULL, NULL), KC_OK);
    json_decref(kct_create(&k, k.pods, "default", pod("p", NULL, NULL)));
    const char *want = "0/2 nodes are available: 1 node(s) had untolerated taint {gpu: on}, 1 "
                       "node(s) were unschedulable.";
    cr_assert(KCT_WAIT(has_message(&k, "p", want), 5000));
    /* Every retry (here: node changes) counts on the same Event. */
    cr_assert_eq(ks_mutate(k.st, k.nodes, "", "t", KS_WRITE_MAIN, relabel, "1", NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(({
                           json_t *e_ = kct_events(&k, "default", "FailedScheduling");
                           bool r_ = json_array_size(e_) == 1 &&
                                     ksc_int(json_array_get(e_, 0), "count", 0) >= 2;
                           json_decref(e_);
                           r_;
                       }),
                       5000),
              "the repeat is counted on one Event");
    /* A toleration makes the tainted node usable. */
    json_decref(
        kct_create(&k, k.pods, "default",
                   pod("tol", NULL,
                       json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "tolerations", "key", "gpu",
                                 "operator", "Equal", "value", "on", "effect", "NoSchedule"))));
    cr_assert(KCT_WAIT(bound(&k, "tol"), 5000));
    char *n = node_of(&k, "tol");
    cr_assert_str_eq(n, "t");
    free(n);
    kct_stop(&k);
}

Test(sched, no_nodes)
{
    kct k;
    kct_start(&k, false, false);
    json_decref(kct_create(&k, k.pods, "default", pod("lonely", NULL, NULL)));
    cr_assert(KCT_WAIT(has_message(&k, "lonely", "no nodes available to schedule pods"), 5000));
    kct_stop(&k);
}

Test(sched, spreads_by_least_allocated_and_frees_on_delete)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "s1", NULL, NULL, alloc("nvidia.com/gpu", "1"));
    kct_node(&k, "s2", NULL, NULL, alloc("nvidia.com/gpu", "1"));
    const char *names[] = {"w0", "w1", "w2", "w3"};
    for (int i = 0; i < 4; i++) {
        json_decref(
            kct_create(&k, k.pods, "default",
                       pod(names[i], json_pack("{s:{s:s}}", "requests", "cpu", "2"), NULL)));
        cr_assert(KCT_WAIT(bound(&k, names[i]), 5000));
    }
    int on1 = 0;
    for (int i = 0; i < 4; i++) {
        char *n = node_of(&k, names[i]);
        on1 += !strcmp(n, "s1");
        free(n);
    }
    cr_assert_eq(on1, 2, "least allocated spreads 2 and 2");
    /* One GPU per node: a third GPU pod waits until a GPU pod goes away. */
    json_decref(
        kct_create(&k, k.pods, "default", pod("ga", gpu_limits("nvidia.com/gpu", "1"), NULL)));
    json_decref(
        kct_create(&k, k.pods, "default", pod("gb", gpu_limits("nvidia.com/gpu", "1"), NULL)));
    cr_assert(KCT_WAIT(bound(&k, "ga") && bound(&k, "gb"), 5000));
    json_decref(
        kct_create(&k, k.pods, "default", pod("gc", gpu_limits("nvidia.com/gpu", "1"), NULL)));
    cr_assert(KCT_WAIT(
        has_message(&k, "gc", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), 5000));
    ks_delete_opts o = {.grace_period_seconds = -1};
    cr_assert_eq(ks_delete(k.st, k.pods, "default", "ga", &o, NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(bound(&k, "gc"), 5000), "scheduled once the GPU was freed");
    kct_stop(&k);
}

/* A pod asking for hostPort port (protocol, hostIP: NULL for the defaults). */
static json_t *port_pod(const char *name, int port, const char *proto, const char *ip)
{
    json_t *p = pod(name, NULL, NULL);
    json_t *pt = json_pack("{s:i, s:i}", "containerPort", 80, "hostPort", port);
    if (proto)
        json_object_set_new(pt, "protocol", json_string(proto));
    if (ip)
        json_object_set_new(pt, "hostIP", json_string(ip));
    json_object_set_new(json_array_get(ksc_at(p, "spec.containers"), 0), "ports",
                        json_pack("[o]", pt));
    return p;
}

Test(sched, host_ports_are_counted_per_node)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "h1", NULL, NULL, NULL);
    kct_node(&k, "h2", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.pods, "default", port_pod("a", 8080, NULL, NULL)));
    json_decref(kct_create(&k, k.pods, "default", port_pod("b", 8080, "TCP", "10.0.0.1")));
    cr_assert(KCT_WAIT(bound(&k, "a") && bound(&k, "b"), 5000));
    char *na = node_of(&k, "a"), *nb = node_of(&k, "b");
    cr_assert_str_neq(na, nb, "0.0.0.0 takes the port on every address");
    free(na);
    free(nb);
    /* Another protocol, or another port, fits; the same TCP port does not. */
    json_decref(kct_create(&k, k.pods, "default", port_pod("u", 8080, "UDP", NULL)));
    json_decref(kct_create(&k, k.pods, "default", port_pod("o", 8081, NULL, NULL)));
    cr_assert(KCT_WAIT(bound(&k, "u") && bound(&k, "o"), 5000));
    json_decref(kct_create(&k, k.pods, "default", port_pod("c", 8080, NULL, NULL)));
    cr_assert(KCT_WAIT(has_message(&k, "c",
                                   "0/2 nodes are available: 2 node(s) didn't have free ports for "
                                   "the requested pod ports."),
                       5000));
    ks_delete_opts o = {.grace_period_seconds = 0};
    cr_assert_eq(ks_delete(k.st, k.pods, "default", "b", &o, NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(bound(&k, "c"), 5000), "placed once the port was freed");
    kct_stop(&k);
}

Test(sched, host_port_conflict_unit)
{
    json_t *used = json_pack("{s:i, s:i}", "TCP/80/0.0.0.0", 1, "UDP/53/10.0.0.1", 1);
    json_t *w = json_pack("[s]", "TCP/80/10.0.0.9");
    cr_assert(ksc_host_ports_conflict(used, w));
    json_decref(w);
    w = json_pack("[s]", "UDP/53/10.0.0.2");
    cr_assert_not(ksc_host_ports_conflict(used, w));
    json_decref(w);
    w = json_pack("[s]", "UDP/53/0.0.0.0");
    cr_assert(ksc_host_ports_conflict(used, w));
    json_decref(w);
    json_decref(used);
}

static kc_code shrink(void *ud, json_t *n, kc_err *err)
{
    json_object_set_new(ksc_at(n, "status.allocatable"), "nvidia.com/gpu", json_string("0"));
    return KC_OK;
}

Test(sched, bound_pods_survive_allocatable_drop_and_pod_gc_removes_orphans)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "d", NULL, NULL, alloc("nvidia.com/gpu", "1"));
    json_decref(
        kct_create(&k, k.pods, "default", pod("keep", gpu_limits("nvidia.com/gpu", "1"), NULL)));
    cr_assert(KCT_WAIT(bound(&k, "keep"), 5000));
    cr_assert_eq(ks_mutate(k.st, k.nodes, "", "d", KS_WRITE_STATUS, shrink, NULL, NULL, NULL),
                 KC_OK);
    kct_sleep_ms(200);
    json_t *p = kct_get(&k, k.pods, "default", "keep");
    cr_assert_not_null(p, "not evicted");
    cr_assert(!ksc_deleting(p));
    json_decref(p);
    /* A pod bound to a node that does not exist is deleted once the quarantine is over (here
     * shortened); a deleted node's pods go at once. */
    ((ks_controllers *)k.sim.ctl)->podgc_quarantine_ms = 300;
    json_decref(kct_create(&k, k.pods, "default",
                           pod("ghost", NULL, json_pack("{s:s}", "nodeName", "nowhere"))));
    kct_sleep_ms(100);
    json_t *g = kct_get(&k, k.pods, "default", "ghost");
    cr_assert_not_null(g, "kept during the quarantine (its node may be registering)");
    json_decref(g);
    cr_assert(KCT_WAIT(({
                           json_t *g_ = kct_get(&k, k.pods, "default", "ghost");
                           json_decref(g_);
                           g_ == NULL;
                       }),
                       5000));
    cr_assert_eq(ks_delete(k.st, k.nodes, "", "d", NULL, NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(({
                           json_t *g_ = kct_get(&k, k.pods, "default", "keep");
                           json_decref(g_);
                           g_ == NULL;
                       }),
                       5000));
    kct_stop(&k);
}

Test(sched, other_schedulers_are_left_alone)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "n", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.pods, "default",
                           pod("mine", NULL, json_pack("{s:s}", "schedulerName", "custom"))));
    json_decref(kct_create(&k, k.pods, "default", pod("yours", NULL, NULL)));
    cr_assert(KCT_WAIT(bound(&k, "yours"), 5000));
    kct_sleep_ms(100);
    cr_assert(!bound(&k, "mine"));
    kct_stop(&k);
}

Test(quantity, parses_kubernetes_quantities)
{
    const struct {
        const char *s;
        long long milli;
    } ok[] = {{"1", 1000},
              {"100m", 100},
              {"0.5", 500},
              {"2Gi", 2147483648000LL},
              {"1Ki", 1024000},
              {"1k", 1000000},
              {"1e3", 1000000},
              {"1.5M", 1500000000LL},
              {"-1", -1000},
              {"3n", 1},
              {"128Mi", 134217728000LL}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        long long v = 0;
        cr_assert(ksc_quantity_milli(ok[i].s, &v), "%s parses", ok[i].s);
        cr_assert_eq(v, ok[i].milli, "%s = %lld, want %lld", ok[i].s, v, ok[i].milli);
    }
    const char *bad[] = {"", "abc", "1Q", "1e", ".", "1e99", NULL};
    for (size_t i = 0; bad[i]; i++) {
        long long v;
        cr_assert(!ksc_quantity_milli(bad[i], &v), "%s is refused", bad[i]);
    }
    cr_assert(!ksc_quantity_milli(NULL, NULL));
    /* JSON numbers, as kubectl sends `nvidia.com/gpu: 1`. */
    json_t *n = json_integer(2), *r = json_real(0.25), *t = json_true();
    long long v = 0;
    cr_assert(ksc_json_quantity(n, &v) && v == 2000);
    cr_assert(ksc_json_quantity(r, &v) && v == 250);
    cr_assert(!ksc_json_quantity(t, &v));
    json_decref(n);
    json_decref(r);
    json_decref(t);
}

Test(quantity, int_or_percent_and_hash)
{
    json_t *p = json_string("10%"), *i = json_integer(3), *s = json_string("7"), *b = json_true();
    cr_assert_eq(ksc_int_or_percent(p, 100, true, 1), 10);
    cr_assert_eq(ksc_int_or_percent(p, 15, true, 1), 2, "percentages of maxUnavailable round up");
    cr_assert_eq(ksc_int_or_percent(p, 15, false, 1), 1);
    cr_assert_eq(ksc_int_or_percent(i, 15, false, 1), 3);
    cr_assert_eq(ksc_int_or_percent(s, 15, false, 1), 7);
    cr_assert_eq(ksc_int_or_percent(b, 15, false, 9), 9);
    cr_assert_eq(ksc_int_or_percent(NULL, 15, false, 4), 4);
    json_t *t1 = json_pack("{s:{s:s}}", "spec", "image", "a"),
           *t2 = json_pack("{s:{s:s}}", "spec", "image", "b");
    char h1[16], h2[16], h1b[16], h1c[16];
    ksc_template_hash(t1, 0, h1);
    ksc_template_hash(t2, 0, h2);
    ksc_template_hash(t1, 0, h1b);
    ksc_template_hash(t1, 1, h1c);
    cr_assert_str_eq(h1, h1b, "stable");
    cr_assert_str_neq(h1, h2);
    cr_assert_str_neq(h1, h1c, "the collision count changes the hash");
    for (const char *c = h1; *c; c++)
        cr_assert(strchr("bcdfghjklmnpqrstvwxz2456789", *c), "safe alphabet");
    json_decref(t1);
    json_decref(t2);
    json_decref(p);
    json_decref(i);
    json_decref(s);
    json_decref(b);
}
