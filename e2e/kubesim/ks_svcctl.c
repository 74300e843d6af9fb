/* ks_svcctl: the endpoints controller: for every Service with a selector, an Endpoints object of
 * the same name listing the selected pods' IPs (Ready ones in addresses, the rest in
 * notReadyAddresses) with the Service's ports resolved against each pod's container ports; and
 * the release of a deleted Service's clusterIP and node ports. */
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "ks_admit.h"
#include "ks_ctl_int.h"

/* The container port a Service port targets on pod, or -1 (a named port the pod lacks). */
static long long target_port(const json_t *sport, const json_t *pod)
{
    json_t *tp = json_object_get(sport, "targetPort");
    if (json_is_integer(tp))
        return json_integer_value(tp);
    const char *name = json_string_value(tp);
    if (!name || !*name)
        return ksc_int(sport, "port", -1);
    char *end;
    long long n = strtoll(name, &end, 10);
    if (!*end)
        return n;
    size_t i, j;
    json_t *ctr, *p;
    json_array_foreach(ksc_at(pod, "spec.containers"), i, ctr)
    {
        json_array_foreach(json_object_get(ctr, "ports"), j, p)
        {
            if (!strcmp(ksc_str(p, "name"), name))
                return ksc_int(p, "containerPort", -1);
        }
    }
    return -1;
}

static json_t *pod_ports(const json_t *svc, const json_t *pod)
{
    json_t *ports = json_array();
    size_t i;
    json_t *sp;
    json_array_foreach(ksc_at(svc, "spec.ports"), i, sp)
    {
        long long port = target_port(sp, pod);
        if (port < 0)
            continue;
        const char *proto = ksc_str(sp, "protocol");
        json_t *ep =
            json_pack("{s:I, s:s}", "port", (json_int_t)port, "protocol", *proto ? proto : "TCP");
        if (ep && *ksc_str(sp, "name"))
            json_object_set_new(ep, "name", json_string(ksc_str(sp, "name")));
        if (ep && *ksc_str(sp, "appProtocol"))
            json_object_set_new(ep, "appProtocol", json_string(ksc_str(sp, "appProtocol")));
        json_array_append_new(ports, ep);
    }
    return ports;
}

static int by_ip(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(ksc_str(x, "ip"), ksc_str(y, "ip"));
    return c ? c : strcmp(ksc_str(x, "targetRef.name"), ksc_str(y, "targetRef.name"));
}

static void sort_addresses(json_t *subset, const char *field)
{
    json_t *arr = json_object_get(subset, field);
    size_t n = json_array_size(arr);
    if (n < 2)
        return;
    json_t **v = calloc(n, sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof *v, by_ip);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
}

/* Subsets of the pods the Service selects (ksc_pods_selected), grouped by identical port lists,
 * addresses sorted, so that equal inputs give equal objects (and the store sees no change). */
static json_t *build_subsets(const json_t *svc, json_t *pods)
{
    json_t *groups = json_object(); /* ports JSON → subset */
    bool publish = json_is_true(ksc_at(svc, "spec.publishNotReadyAddresses"));
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod)
    {
        const char *ip = ksc_str(pod, "status.podIP");
        if (!*ip || ksc_pod_terminated(pod) || (ksc_deleting(pod) && !publish))
            continue;
        json_t *ports = pod_ports(svc, pod);
        char *pk = json_dumps(ports, JSON_COMPACT | JSON_SORT_KEYS);
        json_t *subset = pk ? json_object_get(groups, pk) : NULL;
        if (pk && !subset) {
            subset = json_object();
            json_object_set_new(subset, "ports", json_incref(ports));
            json_object_set_new(groups, pk, subset);
        }
        free(pk);
        json_decref(ports);
        if (!subset)
            continue;
        json_t *addr =
            json_pack("{s:s, s:{s:s, s:s, s:s, s:s}}", "ip", ip, "targetRef", "kind", "Pod",
                      "namespace", ksc_str(pod, "metadata.namespace"), "name",
                      ksc_str(pod, "metadata.name"), "uid", ksc_str(pod, "metadata.uid"));
        if (addr && *ksc_str(pod, "spec.nodeName"))
            json_object_set_new(addr, "nodeName", json_string(ksc_str(pod, "spec.nodeName")));
        const char *field = publish || ksc_pod_ready(pod) ? "addresses" : "notReadyAddresses";
        json_t *list = json_object_get(subset, field);
        if (!list) {
            list = json_array();
            json_object_set_new(subset, field, list);
        }
        json_array_append_new(list, addr);
    }
    json_t *subsets = json_array();
    const char *k;
    json_t *s;
    json_object_foreach(groups, k, s)
    {
        if (json_array_size(json_object_get(s, "ports")) == 0)
            json_object_del(s, "ports");
        sort_addresses(s, "addresses");
        sort_addresses(s, "notReadyAddresses");
        json_array_append(subsets, s);
    }
    json_decref(groups);
    return subsets;
}

typedef struct ep_req {
    json_t *labels, *subsets;
} ep_req;

static kc_code set_endpoints(void *ud, json_t *ep, kc_err *err)
{
    const ep_req *r = ud;
    json_t *meta = json_object_get(ep, "metadata");
    if (json_object_size(r->labels))
        json_object_set(meta, "labels", r->labels);
    else
        json_object_del(meta, "labels");
    if (json_array_size(r->subsets))
        json_object_set(ep, "subsets", r->subsets);
    else
        json_object_del(ep, "subsets");
    return KC_OK;
}

kc_code ksc_ep_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype *et = ksc_type(c, KSC_K_ENDPOINTS);
    json_t *svc = ksc_get(c, KSC_K_SERVICE, key);
    kc_code rc = KC_OK;
    if (!et)
        goto out;
    if (!svc) {
        /* The Service is gone: so are its Endpoints. */
        json_t *ep = ksc_get(c, KSC_K_ENDPOINTS, key);
        if (ep)
            rc = ksc_delete(w, et, ksc_str(ep, "metadata.namespace"), ksc_str(ep, "metadata.name"),
                            ksc_str(ep, "metadata.uid"), KS_PROPAGATE_BACKGROUND, -1, err);
        json_decref(ep);
        if (rc == KC_ENOTFOUND || rc == KC_ECONFLICT) {
            kc_err_clear(err);
            rc = KC_OK;
        }
        goto out;
    }
    json_t *sel = ksc_at(svc, "spec.selector");
    if (!json_is_object(sel) || json_object_size(sel) == 0 || ksc_deleting(svc))
        goto out; /* Endpoints of selector-less Services are the user's */
    const char *ns = ksc_str(svc, "metadata.namespace"), *name = ksc_str(svc, "metadata.name");
    json_t *pods = ksc_pods_selected(c, ns, sel);
    ep_req r = {json_deep_copy(ksc_at(svc, "metadata.labels")), build_subsets(svc, pods)};
    json_decref(pods);
    if (!json_is_object(r.labels)) {
        json_decref(r.labels);
        r.labels = json_object();
    }
    if (!strcmp(ksc_str(svc, "spec.clusterIP"), "None"))
        json_object_set_new(r.labels, "service.kubernetes.io/headless", json_string(""));
    json_t *have = ksc_get(c, KSC_K_ENDPOINTS, key);
    if (have) {
        rc = ksc_mutate(w, et, ns, name, KS_WRITE_MAIN, set_endpoints, &r, err);
    } else {
        json_t *ep = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Endpoints",
                               "metadata", "name", name, "namespace", ns);
        if (ep)
            set_endpoints(&r, ep, NULL);
        rc = ep ? ksc_create(w, et, ns, ep, NULL, err)
                : kc_err_set(err, KC_ENOMEM, "out of memory building endpoints %s", key);
        if (rc == KC_EALREADYEXISTS) {
            kc_err_clear(err);
            rc = ksc_mutate(w, et, ns, name, KS_WRITE_MAIN, set_endpoints, &r, err);
        }
    }
    json_decref(have);
    json_decref(r.labels);
    json_decref(r.subsets);
out:
    json_decref(svc);
    return rc;
}

void ksc_svc_deleted(ks_controllers *c, const json_t *svc)
{
    /* The DELETED event comes once per Service, so each address is released exactly once. */
    ks_admit_release_service(c->sim, svc);
}
