/* ks_nsctl: the namespace controller: a namespace being deleted (phase Terminating) has every
 * namespaced object of every served type deleted, and once nothing is left its "kubernetes"
 * spec finalizer is dropped, which lets the store remove it. */
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

#define NS_RECHECK_MS 1000 /* objects still terminating (pods, finalizers): look again */

static kc_code set_terminating(void *ud, json_t *ns, kc_err *err)
{
    json_t *status = json_object_get(ns, "status");
    if (!json_is_object(status)) {
        status = json_object();
        json_object_set_new(ns, "status", status);
    }
    json_object_set_new(status, "phase", json_string("Terminating"));
    return KC_OK;
}

static kc_code drop_spec_finalizer(void *ud, json_t *ns, kc_err *err)
{
    json_t *fins = ksc_at(ns, "spec.finalizers");
    for (size_t i = 0; json_is_array(fins) && i < json_array_size(fins);) {
        const char *f = json_string_value(json_array_get(fins, i));
        if (f && !strcmp(f, "kubernetes"))
            json_array_remove(fins, i);
        else
            i++;
    }
    return KC_OK;
}

/* Deletes what is left in ns; *remaining counts objects still there (deleted or not). */
static kc_code empty_namespace(ksc_worker *w, const char *ns, size_t *remaining, kc_err *err)
{
    ks_controllers *c = w->c;
    const ks_rtype **types = NULL;
    size_t n = ks_store_types(c->st, &types);
    kc_code rc = KC_OK;
    kc_map *done = kc_map_new();
    *remaining = 0;
    if (!done) {
        rc = kc_err_set(err, KC_ENOMEM, "namespace %s: out of memory", ns);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const ks_rtype *t = types[i];
        if (!t->namespaced)
            continue;
        /* Versions of one group/resource share their objects: visit each once. */
        char gr[512];
        snprintf(gr, sizeof gr, "%s/%s", t->group ? t->group : "", t->resource);
        if (kc_map_get(done, gr))
            continue;
        kc_map_put(done, gr, (void *)1, NULL);
        json_t *items = NULL;
        uint64_t rv = 0;
        char *cont = NULL;
        kc_err lerr;
        kc_err_clear(&lerr);
        if (ks_list(c->st, t, ns, NULL, &items, &rv, &cont, &lerr) != KC_OK) {
            kc_debug("namespace controller: list failed", "ns=%s resource=%s error=\"%s\"", ns,
                     t->resource, lerr.msg);
            (*remaining)++; /* cannot tell it is empty */
            continue;
        }
        free(cont);
        size_t j;
        json_t *it;
        json_array_foreach(items, j, it)
        {
            (*remaining)++;
            if (ksc_deleting(it))
                continue;
            kc_err derr;
            kc_err_clear(&derr);
            kc_code drc =
                ksc_delete(w, t, ns, ksc_str(it, "metadata.name"), ksc_str(it, "metadata.uid"),
                           KS_PROPAGATE_BACKGROUND, -1, &derr);
            if (drc != KC_OK && drc != KC_ENOTFOUND && drc != KC_ECONFLICT && rc == KC_OK) {
                rc = drc;
                if (err)
                    *err = derr;
            }
        }
        json_decref(items);
    }
out:
    kc_map_free(done, NULL);
    free(types);
    return rc;
}

kc_code ksc_ns_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    json_t *ns = ksc_get(c, KSC_K_NAMESPACE, key);
    const ks_rtype *t = ksc_type(c, KSC_K_NAMESPACE);
    kc_code rc = KC_OK;
    if (!ns || !t || !ksc_deleting(ns))
        goto out;
    if (strcmp(ksc_str(ns, "status.phase"), "Terminating") &&
        (rc = ksc_mutate(w, t, "", key, KS_WRITE_STATUS, set_terminating, NULL, err)) != KC_OK)
        goto out;
    size_t remaining = 0;
    if ((rc = empty_namespace(w, key, &remaining, err)) != KC_OK)
        goto out;
    if (remaining > 0) {
        /* The last deletion's event requeues us; this is for objects that linger. */
        kc_workqueue_add_after(w->q, key, NS_RECHECK_MS);
        goto out;
    }
    kc_info("namespace controller: namespace empty, finalizing", "ns=%s", key);
    rc = ksc_mutate(w, t, "", key, KS_WRITE_MAIN, drop_spec_finalizer, NULL, err);
    if (rc == KC_ENOTFOUND) {
        kc_err_clear(err);
        rc = KC_OK;
    }
out:
    json_decref(ns);
    return rc;
}
