/* Tests of kubesim's garbage collector, namespace controller, endpoints controller, CRD glue and
 * the controllers' lifecycle, driven through the store. */
#include "ks_ctl_test.h"

#include "ks_store_int.h"

static json_t *cm(const char *ns, const char *name, const json_t *owner, bool block)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                          "ConfigMap", "metadata", "name", name, "namespace", ns, "data", "k", "v");
    if (owner)
        json_object_set_new(json_object_get(o, "metadata"), "ownerReferences",
                            json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion",
                                      ksc_str(owner, "apiVersion"), "kind", ksc_str(owner, "kind"),
                                      "name", ksc_str(owner, "metadata.name"), "uid",
                                      ksc_str(owner, "metadata.uid"), "blockOwnerDeletion", block));
    return o;
}

static bool gone(kct *k, const ks_rtype *t, const char *ns, const char *name)
{
    json_t *o = kct_get(k, t, ns, name);
    json_decref(o);
    return o == NULL;
}

static void del(kct *k, const ks_rtype *t, const char *ns, const char *name, ks_propagation p)
{
    ks_delete_opts o = {.propagation = p, .grace_period_seconds = -1};
    kc_err err = {0};
    cr_assert_eq(ks_delete(k->st, t, ns, name, &o, NULL, &err), KC_OK, "%s", err.msg);
}

static kc_code drop_fins(void *ud, json_t *o, kc_err *err)
{
    json_object_del(json_object_get(o, "metadata"), "finalizers");
    return KC_OK;
}

Test(gc, background_deletes_dependents_after_the_owner)
{
    kct k;
    kct_start(&k, false, false);
    json_t *owner = kct_create(&k, k.cm, "default", cm("default", "owner", NULL, false));
    json_decref(kct_create(&k, k.cm, "default", cm("default", "dep1", owner, false)));
    json_decref(kct_create(&k, k.cm, "default", cm("default", "dep2", owner, true)));
    /* A reference to the right name but another uid is dangling from the start. */
    json_t *fake = json_deep_copy(owner);
    json_object_set_new(json_object_get(fake, "metadata"), "uid", json_string("not-the-uid"));
    json_decref(kct_create(&k, k.cm, "default", cm("default", "stale", fake, false)));
    cr_assert(KCT_WAIT(gone(&k, k.cm, "default", "stale"), 5000));
    kct_sleep_ms(100);
    cr_assert(!gone(&k, k.cm, "default", "dep1"), "live owners keep dependents");
    del(&k, k.cm, "default", "owner", KS_PROPAGATE_BACKGROUND);
    cr_assert(
        KCT_WAIT(gone(&k, k.cm, "default", "dep1") && gone(&k, k.cm, "default", "dep2"), 5000));
    json_decref(fake);
    json_decref(owner);
    kct_stop(&k);
}

Test(gc, foreground_waits_for_blocking_dependents)
{
    kct k;
    kct_start(&k, false, false);
    json_t *owner = kct_create(&k, k.cm, "default", cm("default", "fg", NULL, false));
    json_t *held = cm("default", "held", owner, true);
    json_object_set_new(json_object_get(held, "metadata"), "finalizers",
                        json_pack("[s]", "example.com/hold"));
    json_decref(kct_create(&k, k.cm, "default", held));
    json_decref(kct_create(&k, k.cm, "default", cm("default", "free", owner, false)));
    del(&k, k.cm, "default", "fg", KS_PROPAGATE_FOREGROUND);
    /* Dependents are deleted; the owner waits on the blocking one, which a finalizer holds. */
    cr_assert(KCT_WAIT(gone(&k, k.cm, "default", "free"), 5000));
    cr_assert(KCT_WAIT(({
                           json_t *h_ = kct_get(&k, k.cm, "default", "held");
                           bool d_ = h_ && ksc_deleting(h_);
                           json_decref(h_);
                           d_;
                       }),
                       5000));
    kct_sleep_ms(100);
    json_t *o = kct_get(&k, k.cm, "default", "fg");
    cr_assert_not_null(o, "the owner waits");
    cr_assert(ksc_has_finalizer(o, "foregroundDeletion"));
    json_decref(o);
    cr_assert_eq(
        ks_mutate(k.st, k.cm, "default", "held", KS_WRITE_MAIN, drop_fins, NULL, NULL, NULL),
        KC_OK);
    cr_assert(KCT_WAIT(gone(&k, k.cm, "default", "held") && gone(&k, k.cm, "default", "fg"), 5000));
    json_decref(owner);
    kct_stop(&k);
}

Test(gc, orphan_strips_references)
{
    kct k;
    kct_start(&k, false, false);
    json_t *owner = kct_create(&k, k.cm, "default", cm("default", "parent", NULL, false));
    json_decref(kct_create(&k, k.cm, "default", cm("default", "child", owner, true)));
    del(&k, k.cm, "default", "parent", KS_PROPAGATE_ORPHAN);
    cr_assert(KCT_WAIT(gone(&k, k.cm, "default", "parent"), 5000));
    json_t *c = kct_get(&k, k.cm, "default", "child");
    cr_assert_not_null(c, "orphaned, not deleted");
    cr_assert_null(ksc_at(c, "metadata.ownerReferences"));
    json_decref(c);
    json_decref(owner);
    kct_stop(&k);
}

Test(gc, remaining_owner_keeps_the_dependent_and_cluster_owners_work)
{
    kct k;
    kct_start(&k, false, false);
    json_t *a = kct_create(&k, k.cm, "default", cm("default", "a", NULL, false));
    json_t *b = kct_create(&k, k.cm, "default", cm("default", "b", NULL, false));
    json_t *both = cm("default", "both", a, false);
    json_array_append_new(ksc_at(both, "metadata.ownerReferences"),
                          json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", "v1", "kind", "ConfigMap",
                                    "name", "b", "uid", ksc_str(b, "metadata.uid")));
    json_decref(kct_create(&k, k.cm, "default", both));
    del(&k, k.cm, "default", "a", KS_PROPAGATE_BACKGROUND);
    cr_assert(KCT_WAIT(({
                           json_t *o_ = kct_get(&k, k.cm, "default", "both");
                           bool r_ =
                               o_ && json_array_size(ksc_at(o_, "metadata.ownerReferences")) == 1;
                           json_decref(o_);
                           r_;
                       }),
                       5000),
              "the dangling reference is removed, the dependent kept");
    /* A namespaced dependent of a cluster-scoped owner (a Node). */
    kct_node(&k, "host", NULL, NULL, NULL);
    json_t *node = kct_get(&k, k.nodes, "", "host");
    json_decref(kct_create(&k, k.cm, "default", cm("default", "per-node", node, false)));
    kct_sleep_ms(100);
    cr_assert(!gone(&k, k.cm, "default", "per-node"));
    del(&k, k.nodes, "", "host", KS_PROPAGATE_BACKGROUND);
    cr_assert(KCT_WAIT(gone(&k, k.cm, "default", "per-node"), 5000));
    json_decref(node);
    json_decref(a);
    json_decref(b);
    kct_stop(&k);
}

static json_t *deployment(const char *ns, const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, "
                     "s:{s:[{s:s, s:s}]}}}}",
                     "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", name,
                     "namespace", ns, "spec", "replicas", 2, "selector", "matchLabels", "app", name,
                     "template", "metadata", "labels", "app", name, "spec", "containers", "name",
                     "c", "image", "x");
}

Test(gc, deleting_a_deployment_cascades)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "n", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.deploy, "default", deployment("default", "casc")));
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "app", "casc", true) == 2, 5000));
    del(&k, k.deploy, "default", "casc", KS_PROPAGATE_BACKGROUND);
    cr_assert(KCT_WAIT(kct_count(&k, k.rs, "default") == 0 &&
                           kct_npods(&k, "default", "app", "casc", false) == 0,
                       5000));
    kct_stop(&k);
}

Test(gc, foreground_deployment_deletion_goes_bottom_up)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "n", NULL, NULL, NULL);
    k.auto_remove = 0; /* pods linger in Terminating until the test lets them go */
    json_decref(kct_create(&k, k.deploy, "default", deployment("default", "fgd")));
    /* Bound and Ready: deleting them then takes a grace period (unbound pods go at once). */
    cr_assert(KCT_WAIT(kct_int(&k, k.deploy, "default", "fgd", "status.readyReplicas") == 2, 5000));
    del(&k, k.deploy, "default", "fgd", KS_PROPAGATE_FOREGROUND);
    /* The ReplicaSet is deleted in the foreground too (it has dependents) and its pods get
     * deletionTimestamp; everything above waits for them. */
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "app", "fgd", false) == 2 &&
                           kct_npods(&k, "default", "app", "fgd", true) == 0,
                       5000));
    json_t *rss = kct_list(&k, k.rs, "default");
    cr_assert_eq(json_array_size(rss), 1);
    cr_assert(ksc_has_finalizer(json_array_get(rss, 0), "foregroundDeletion"));
    json_decref(rss);
    kct_sleep_ms(100);
    cr_assert(!gone(&k, k.deploy, "default", "fgd"), "the Deployment waits for its pods");
    cr_assert_eq(kct_npods(&k, "default", "app", "fgd", false), 2, "no replacement pods");
    k.auto_remove = 1;
    json_t *pods = kct_pods(&k, "default", "app", "fgd");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        ks_delete_opts o = {.grace_period_seconds = 0};
        ks_delete(k.st, k.pods, "default", ksc_str(p, "metadata.name"), &o, NULL, NULL);
    }
    json_decref(pods);
    cr_assert(KCT_WAIT(gone(&k, k.deploy, "default", "fgd") && kct_count(&k, k.rs, "default") == 0,
                       5000));
    kct_stop(&k);
}

Test(gc, cluster_scoped_dependent_of_a_namespaced_kind_is_kept)
{
    kct k;
    kct_start(&k, false, false);
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:[{s:s, s:s, s:s, s:s}]}}", "apiVersion", "v1",
                          "kind", "Node", "metadata", "name", "odd", "ownerReferences",
                          "apiVersion", "v1", "kind", "ConfigMap", "name", "nope", "uid", "none");
    json_decref(kct_create(&k, k.nodes, "", n));
    kct_sleep_ms(300);
    cr_assert(!gone(&k, k.nodes, "", "odd"), "an unresolvable owner never collects");
    kct_stop(&k);
}

Test(namespace, deletion_empties_then_removes_it)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "n", NULL, NULL, NULL);
    kct_namespace(&k, "doomed");
    /* A custom resource type, served like a CRD's. */
    ks_rtype wt = {.group = "example.com",
                   .version = "v1",
                   .resource = "widgets",
                   .kind = "Widget",
                   .singular = "widget",
                   .namespaced = true};
    const ks_rtype *widgets = ks_store_register(k.st, &wt);
    cr_assert_not_null(widgets);
    json_decref(kct_create(&k, widgets, "doomed",
                           json_pack("{s:s, s:s, s:{s:s, s:[s]}}", "apiVersion", "example.com/v1",
                                     "kind", "Widget", "metadata", "name", "w", "finalizers",
                                     "example.com/cleanup")));
    json_decref(kct_create(&k, k.cm, "doomed", cm("doomed", "c1", NULL, false)));
    json_decref(kct_create(&k, k.deploy, "doomed", deployment("doomed", "app")));
    cr_assert(KCT_WAIT(kct_npods(&k, "doomed", "app", "app", true) == 2, 5000));
    del(&k, k.ns, "", "doomed", KS_PROPAGATE_BACKGROUND);
    json_t *ns = kct_get(&k, k.ns, "", "doomed");
    cr_assert_str_eq(ksc_str(ns, "status.phase"), "Terminating");
    json_decref(ns);
    cr_assert(KCT_WAIT(gone(&k, k.cm, "doomed", "c1") && kct_count(&k, k.pods, "doomed") == 0 &&
                           kct_count(&k, k.deploy, "doomed") == 0,
                       5000));
    /* The widget's finalizer holds the namespace. */
    kct_sleep_ms(100);
    cr_assert(!gone(&k, k.ns, "", "doomed"));
    json_t *w = kct_get(&k, widgets, "doomed", "w");
    cr_assert(ksc_deleting(w));
    json_decref(w);
    cr_assert_eq(
        ks_mutate(k.st, widgets, "doomed", "w", KS_WRITE_MAIN, drop_fins, NULL, NULL, NULL), KC_OK);
    cr_assert(KCT_WAIT(gone(&k, k.ns, "", "doomed"), 5000));
    cr_assert(!gone(&k, k.ns, "", "default"));
    kct_stop(&k);
}

static json_t *svc(const char *name, json_t *ports)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{s:s}, s:o}}", "apiVersion", "v1",
                     "kind", "Service", "metadata", "name", name, "namespace", "default", "labels",
                     "team", "x", "spec", "selector", "app", "web", "ports", ports);
}

static json_t *web_pod(const char *name, const char *app)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s, s:[{s:s, s:i}]}]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                     "default", "labels", "app", app, "spec", "nodeName", "n", "containers", "name",
                     "c", "image", "web", "ports", "name", "http", "containerPort", 8080);
}

Test(endpoints, ready_and_unready_addresses_with_named_ports)
{
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "n", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.pods, "default", web_pod("w1", "web")));
    json_decref(kct_create(&k, k.pods, "default", web_pod("w2", "web")));
    json_decref(kct_create(&k, k.pods, "default", web_pod("other", "db")));
    cr_assert_eq(kct_set_ready(&k, "default", "w1", true), KC_OK);
    json_decref(kct_create(&k, k.svc, "default",
                           svc("web", json_pack("[{s:s, s:i, s:s}]", "name", "http", "port", 80,
                                                "targetPort", "http"))));
    cr_assert(KCT_WAIT(({
                           json_t *e_ = kct_get(&k, k.ep, "default", "web");
                           bool r_ = e_ && json_array_size(
                                               ksc_at(json_array_get(ksc_at(e_, "subsets"), 0),
                                                      "addresses")) == 1;
                           json_decref(e_);
                           r_;
                       }),
                       5000));
    json_t *ep = kct_get(&k, k.ep, "default", "web");
    json_t *sub = json_array_get(ksc_at(ep, "subsets"), 0);
    json_t *addr = json_array_get(json_object_get(sub, "addresses"), 0);
    cr_assert_str_eq(ksc_str(addr, "targetRef.name"), "w1");
    cr_assert_str_eq(ksc_str(addr, "nodeName"), "n");
    cr_assert_eq(ksc_int(json_array_get(json_object_get(sub, "ports"), 0), "port", 0), 8080);
    cr_assert_str_eq(ksc_str(json_array_get(json_object_get(sub, "ports"), 0), "protocol"), "TCP");
    cr_assert_null(json_object_get(sub, "notReadyAddresses"), "w2 has no IP yet");
    cr_assert_str_eq(ksc_str(ksc_at(ep, "metadata.labels"), "team"), "x");
    json_decref(ep);
    /* w2 gets an IP but is not Ready: notReadyAddresses. */
    cr_assert_eq(kct_set_ready(&k, "default", "w2", true), KC_OK);
    cr_assert_eq(kct_set_ready(&k, "default", "w1", false), KC_OK);
    cr_assert(KCT_WAIT(({
                           json_t *e_ = kct_get(&k, k.ep, "default", "web");
                           json_t *s_ = json_array_get(ksc_at(e_, "subsets"), 0);
                           bool r_ =
                               json_array_size(json_object_get(s_, "addresses")) == 1 &&
                               !strcmp(ksc_str(json_array_get(json_object_get(s_, "addresses"), 0),
                                               "targetRef.name"),
                                       "w2");
                           json_decref(e_);
                           r_;
                       }),
                       5000));
    /* Deleting the Service removes its Endpoints. */
    del(&k, k.svc, "default", "web", KS_PROPAGATE_BACKGROUND);
    cr_assert(KCT_WAIT(gone(&k, k.ep, "default", "web"), 5000));
    kct_stop(&k);
}

static kc_code set_message_fn(void *ud, json_t *pod, kc_err *err)
{
    (void)err;
    json_object_set_new(json_object_get(pod, "status"), "message", json_string(ud));
    return KC_OK;
}

static kc_code set_app_fn(void *ud, json_t *pod, kc_err *err)
{
    (void)err;
    json_object_set_new(ksc_at(pod, "metadata.labels"), "app", json_string(ud));
    return KC_OK;
}

static size_t ready_addresses(kct *k)
{
    json_t *e = kct_get(k, k->ep, "default", "web");
    size_t n = json_array_size(ksc_at(json_array_get(ksc_at(e, "subsets"), 0), "addresses"));
    json_decref(e);
    return n;
}

Test(endpoints, pod_updates_wake_the_services_only_when_endpoints_can_change)
{
    /* As the real controller's podEndpointsChanged: a pod's status write that leaves its
     * readiness, IPs and deletion alone (a container's restart count, a message) syncs no
     * Service; one that changes its readiness syncs those selecting it; a label change syncs
     * the Services it joins or leaves. */
    kct k;
    kct_start(&k, false, false);
    kct_node(&k, "n", NULL, NULL, NULL);
    json_decref(kct_create(&k, k.pods, "default", web_pod("w1", "web")));
    json_decref(kct_create(&k, k.pods, "default", web_pod("w2", "web")));
    cr_assert_eq(kct_set_ready(&k, "default", "w1", true), KC_OK);
    json_decref(kct_create(&k, k.svc, "default",
                           svc("web", json_pack("[{s:s, s:i, s:s}]", "name", "http", "port", 80,
                                                "targetPort", "http"))));
    cr_assert(KCT_WAIT(ready_addresses(&k) == 1, 5000));
    unsigned long before = kct_syncs_settled(&k, KSC_W_EP);
    for (int i = 0; i < 5; i++) {
        char msg[32];
        snprintf(msg, sizeof msg, "still running %d", i);
        cr_assert_eq(ks_mutate(k.st, k.pods, "default", "w1", KS_WRITE_STATUS, set_message_fn, msg,
                               NULL, NULL),
                     KC_OK);
    }
    cr_assert_eq(kct_syncs_settled(&k, KSC_W_EP), before,
                 "status writes that change no endpoint synced");
    cr_assert_eq(kct_set_ready(&k, "default", "w2", true), KC_OK);
    cr_assert(KCT_WAIT(ready_addresses(&k) == 2, 5000));
    unsigned long after_ready = kct_syncs_settled(&k, KSC_W_EP);
    cr_assert_gt(after_ready, before);
    cr_assert_eq(
        ks_mutate(k.st, k.pods, "default", "w2", KS_WRITE_MAIN, set_app_fn, "db", NULL, NULL),
        KC_OK);
    cr_assert(KCT_WAIT(ready_addresses(&k) == 1, 5000), "a pod the Service lost stays listed");
    cr_assert_gt(kct_syncs_settled(&k, KSC_W_EP), after_ready);
    kct_stop(&k);
}

static json_t *crd(void)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:{s:s, s:s, s:s, s:s}, s:s, s:[{s:s, s:b, s:b, "
                     "s:{s:{s:s, s:b}}}]}}",
                     "apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
                     "metadata", "name", "gadgets.example.com", "spec", "group", "example.com",
                     "names", "plural", "gadgets", "singular", "gadget", "kind", "Gadget",
                     "listKind", "GadgetList", "scope", "Cluster", "versions", "name", "v1",
                     "served", 1, "storage", 1, "schema", "openAPIV3Schema", "type", "object",
                     "x-kubernetes-preserve-unknown-fields", 1);
}

Test(crd, creating_a_crd_serves_its_type)
{
    kct k;
    kct_start(&k, false, false);
    json_decref(kct_create(&k, k.crd, "", crd()));
    cr_assert(KCT_WAIT(ks_store_type(k.st, "example.com", "v1", "gadgets") != NULL, 5000));
    del(&k, k.crd, "", "gadgets.example.com", KS_PROPAGATE_BACKGROUND);
    cr_assert(KCT_WAIT(({
                           const ks_rtype *ty_ =
                               ks_store_type(k.st, "example.com", "v1", "gadgets");
                           ty_ == NULL || !((const ks_type *)ty_)->served;
                       }),
                       5000),
              "the type is no longer served");
    kct_stop(&k);
}

Test(lifecycle, start_and_stop_errors)
{
    ks_sim sim;
    memset(&sim, 0, sizeof sim);
    kc_err err = {0};
    cr_assert_eq(ks_controllers_start(&sim, &err), KC_EARG);
    cr_assert(strstr(err.msg, "no store"));
    cr_assert_eq(ks_controllers_start(NULL, NULL), KC_EARG);
    ks_controllers_stop(&sim); /* not started: no-op */
    ks_controllers_stop(NULL);
    kct k;
    kct_start(&k, false, false);
    cr_assert_eq(ks_controllers_start(&k.sim, &err), KC_EARG, "already running");
    kct_stop(&k);
}

Test(lifecycle, restart_picks_up_existing_state)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "n", NULL, NULL, NULL);
    for (int i = 0; i < 200; i++) {
        char name[16];
        snprintf(name, sizeof name, "filler-%d", i);
        json_decref(kct_create(&k, k.cm, "default", cm("default", name, NULL, false)));
    }
    json_decref(kct_create(&k, k.deploy, "default", deployment("default", "keep")));
    cr_assert(
        KCT_WAIT(kct_int(&k, k.deploy, "default", "keep", "status.readyReplicas") == 2, 5000));
    uint64_t rv = ks_store_rv(k.st);
    /* New controllers on the same store: they must see the world whole before acting (no
     * second ReplicaSet, no extra pods, nothing written at all). */
    ks_controllers_stop(&k.sim);
    kc_err err = {0};
    cr_assert_eq(ks_controllers_start(&k.sim, &err), KC_OK, "%s", err.msg);
    kct_sleep_ms(500);
    cr_assert_eq(kct_count(&k, k.rs, "default"), 1);
    cr_assert_eq(kct_npods(&k, "default", "app", "keep", false), 2);
    cr_assert_eq(ks_store_rv(k.st), rv, "a settled world needs no writes");
    kct_stop(&k);
}

Test(lifecycle, recovers_when_the_watch_falls_behind)
{
    kct k;
    kct_start(&k, false, true);
    kct_node(&k, "n", NULL, NULL, NULL);
    /* A tiny queue makes the controllers' watch overflow and close (410) on a burst (held up
     * by taking their cache lock meanwhile); they must rebuild their cache and converge. */
    ks_controllers *c = (ks_controllers *)k.sim.ctl;
    ks_store_set_watch_queue_cap(k.st, 3);
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "burst-%d", i);
        json_decref(kct_create(&k, k.cm, "default", cm("default", name, NULL, false)));
    }
    pthread_mutex_unlock(&c->mu);
    json_decref(kct_create(&k, k.deploy, "default", deployment("default", "after")));
    cr_assert(KCT_WAIT(({
                           pthread_mutex_lock(&c->mu);
                           unsigned long n_ = c->rebuilds;
                           pthread_mutex_unlock(&c->mu);
                           n_ > 0;
                       }),
                       5000),
              "the burst overflowed the controllers' watch");
    ks_store_set_watch_queue_cap(k.st, 0);
    cr_assert(KCT_WAIT(kct_npods(&k, "default", "app", "after", true) == 2, 10000));
    cr_assert(
        KCT_WAIT(kct_int(&k, k.deploy, "default", "after", "status.readyReplicas") == 2, 10000));
    kct_stop(&k);
}
