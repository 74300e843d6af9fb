/* ks_crdctl: glue from CustomResourceDefinition events to ks_crd_sync, which (un)registers the
 * served types and sets the CRD's conditions. Deleted CRDs are handed over from the tombstone the
 * cache keeps of their last state. */
#include <stdlib.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

kc_code ksc_crd_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    json_t *crd = ksc_get(c, KSC_K_CRD, key);
    pthread_mutex_lock(&c->mu);
    json_t *tomb = c->crd_tombstones ? kc_map_remove(c->crd_tombstones, key) : NULL;
    pthread_mutex_unlock(&c->mu);
    kc_code rc;
    if (crd) /* recreated since: the tombstone is stale */
        rc = ks_crd_sync(c->sim, crd, false, err);
    else if (tomb)
        rc = ks_crd_sync(c->sim, tomb, true, err);
    else
        rc = KC_OK;
    if (rc != KC_OK && !crd && tomb) {
        /* Keep the tombstone for the retry. */
        pthread_mutex_lock(&c->mu);
        if (c->crd_tombstones && kc_map_put(c->crd_tombstones, key, tomb, NULL) == KC_OK)
            tomb = NULL;
        pthread_mutex_unlock(&c->mu);
    }
    json_decref(tomb);
    json_decref(crd);
    return rc;
}
