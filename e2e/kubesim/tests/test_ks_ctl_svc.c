/* Tests of the release of a deleted Service's addresses: the controllers hand a Service's
 * clusterIP and node ports back to admission's allocators when its DELETED event arrives, so a new
 * Service may take them (as the API server does). Driven through the store with admission on. */
#include "ks_ctl_test.h"

static json_t *svc(const char *name, const char *type, const char *ip, long node_port)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:{s:s}, s:[{s:i}]}}", "apiVersion",
                          "v1", "kind", "Service", "metadata", "name", name, "namespace", "default",
                          "spec", "type", type, "selector", "app", name, "ports", "port", 80);
    if (ip)
        json_object_set_new(json_object_get(o, "spec"), "clusterIP", json_string(ip));
    if (node_port)
        json_object_set_new(json_array_get(ksc_at(o, "spec.ports"), 0), "nodePort",
                            json_integer(node_port));
    return o;
}

/* Creates a Service; returns the result code and leaves the error message in msg. */
static kc_code try_create(kct *k, json_t *obj, char *msg, size_t size)
{
    kc_err err = {0};
    json_t *out = NULL;
    kc_code rc = ks_create(k->st, k->svc, "default", obj, &out, &err);
    snprintf(msg, size, "%s", rc == KC_OK ? "" : err.msg);
    json_decref(out);
    return rc;
}

static void del(kct *k, const char *name)
{
    kc_err err = {0};
    cr_assert_eq(ks_delete(k->st, k->svc, "default", name, NULL, NULL, &err), KC_OK, "%s", err.msg);
}

Test(svc_release, explicit_cluster_ip_is_reusable_after_delete)
{
    kct k;
    kct_start(&k, true, false);
    char msg[KC_ERR_MSG_MAX];
    cr_assert_eq(try_create(&k, svc("a", "ClusterIP", "10.96.5.5", 0), msg, sizeof msg), KC_OK,
                 "%s", msg);
    /* Taken while the first Service lives. */
    cr_assert_eq(try_create(&k, svc("b", "ClusterIP", "10.96.5.5", 0), msg, sizeof msg),
                 KC_EINVALID);
    cr_assert(strstr(msg, "failed to allocate IP 10.96.5.5: provided IP is already allocated"),
              "%s", msg);
    del(&k, "a");
    /* The release follows the DELETED event on the controllers' thread. */
    cr_assert(
        KCT_WAIT(try_create(&k, svc("a", "ClusterIP", "10.96.5.5", 0), msg, sizeof msg) == KC_OK,
                 5000),
        "recreating with the same clusterIP: %s", msg);
    json_t *got = kct_get(&k, k.svc, "default", "a");
    cr_assert_str_eq(ksc_str(got, "spec.clusterIP"), "10.96.5.5");
    json_decref(got);
    kct_stop(&k);
}

Test(svc_release, node_ports_and_dynamic_ips_are_released)
{
    kct k;
    kct_start(&k, true, false);
    char msg[KC_ERR_MSG_MAX];
    cr_assert_eq(try_create(&k, svc("np", "NodePort", NULL, 30100), msg, sizeof msg), KC_OK, "%s",
                 msg);
    json_t *got = kct_get(&k, k.svc, "default", "np");
    char ip[32];
    snprintf(ip, sizeof ip, "%s", ksc_str(got, "spec.clusterIP"));
    json_decref(got);
    cr_assert(strncmp(ip, "10.", 3) == 0, "a dynamic clusterIP was allocated: %s", ip);
    cr_assert_eq(try_create(&k, svc("np2", "NodePort", NULL, 30100), msg, sizeof msg), KC_EINVALID);
    cr_assert(strstr(msg, "spec.ports[0].nodePort: Invalid value: 30100: provided port is already "
                          "allocated"),
              "%s", msg);
    del(&k, "np");
    /* Both the node port and the dynamically allocated address can be asked for again. */
    cr_assert(
        KCT_WAIT(try_create(&k, svc("np2", "NodePort", ip, 30100), msg, sizeof msg) == KC_OK, 5000),
        "node port and clusterIP %s after delete: %s", ip, msg);
    /* A Service that is not deleted keeps its address: no stray release. */
    cr_assert_eq(try_create(&k, svc("np3", "ClusterIP", ip, 0), msg, sizeof msg), KC_EINVALID);
    kct_stop(&k);
}

static kc_code drop_fins(void *ud, json_t *o, kc_err *err)
{
    json_object_del(json_object_get(o, "metadata"), "finalizers");
    return KC_OK;
}

Test(svc_release, headless_and_finalized_services)
{
    kct k;
    kct_start(&k, true, false);
    char msg[KC_ERR_MSG_MAX];
    /* A Service held by a finalizer keeps its address until it is really gone. */
    json_t *s = svc("held", "ClusterIP", "10.96.7.7", 0);
    json_object_set_new(json_object_get(s, "metadata"), "finalizers",
                        json_pack("[s]", "example.com/hold"));
    cr_assert_eq(try_create(&k, s, msg, sizeof msg), KC_OK, "%s", msg);
    del(&k, "held");
    kct_sleep_ms(100);
    cr_assert_eq(try_create(&k, svc("other", "ClusterIP", "10.96.7.7", 0), msg, sizeof msg),
                 KC_EINVALID, "the address is still in use by the terminating Service");
    kc_err err = {0};
    cr_assert_eq(
        ks_mutate(k.st, k.svc, "default", "held", KS_WRITE_MAIN, drop_fins, NULL, NULL, &err),
        KC_OK, "%s", err.msg);
    cr_assert(KCT_WAIT(try_create(&k, svc("other", "ClusterIP", "10.96.7.7", 0), msg, sizeof msg) ==
                           KC_OK,
                       5000),
              "%s", msg);
    /* Headless Services hold no address; deleting one releases nothing. */
    cr_assert_eq(try_create(&k, svc("hl", "ClusterIP", "None", 0), msg, sizeof msg), KC_OK, "%s",
                 msg);
    del(&k, "hl");
    kct_sleep_ms(50);
    cr_assert_eq(try_create(&k, svc("again", "ClusterIP", "10.96.7.7", 0), msg, sizeof msg),
                 KC_EINVALID, "10.96.7.7 still belongs to \"other\"");
    kct_stop(&k);
}
