/* op_crd_apply: the Helm chart's hook modes of the operator binary: the pre-upgrade Job re-applies
 * the ClusterPolicy CRD (helm installs crds/ only once), the pre-delete Job deletes the
 * ClusterPolicy and waits while the operator's finalizer cleans the cluster, then (with the
 * chart's operator.cleanupCRD) deletes the CRD. */
#include "op_crd_apply.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_rest.h"
#include "kc_yaml.h"

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

const char *op_crd_resolve(const char *arg, const char *crds_dir, char *buf, size_t size)
{
    snprintf(buf, size, "%s", arg);
    if (arg[0] == '/' || !strncmp(arg, "./", 2) || !strncmp(arg, "../", 3))
        return buf;
    const char *dirs[] = {crds_dir ? crds_dir : getenv("CRDS_DIR"), "/opt/gpu-operator/crds"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dirs[i], arg);
        if (access(path, R_OK) == 0) {
            snprintf(buf, size, "%s", path);
            return buf;
        }
    }
    return buf;
}

static bool established(const json_t *crd)
{
    size_t i;
    const json_t *cond;
    json_array_foreach(json_object_get(json_object_get(crd, "status"), "conditions"), i, cond)
    {
        if (!strcmp(str_at(cond, "type", NULL) ?: "", "Established") &&
            !strcmp(str_at(cond, "status", NULL) ?: "", "True"))
            return true;
    }
    return false;
}

/* Copies the file's labels/annotations (key by key) and spec onto the live object. */
static json_t *merged(const json_t *live, const json_t *want)
{
    json_t *upd = json_deep_copy(live);
    if (!upd)
        return NULL;
    json_t *meta = json_object_get(upd, "metadata");
    const json_t *wmeta = json_object_get(want, "metadata");
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *w = json_object_get(wmeta, maps[i]);
        if (!json_is_object(w))
            continue;
        if (!json_is_object(json_object_get(meta, maps[i])))
            json_object_set_new(meta, maps[i], json_object());
        json_object_update(json_object_get(meta, maps[i]), (json_t *)w);
    }
    json_object_set(upd, "spec", json_object_get(want, "spec"));
    json_object_del(upd, "status");
    return upd;
}

kc_code op_crd_apply(kc_client *c, const char *path, int timeout_s, FILE *out, kc_err *err)
{
    json_t *docs = NULL, *live = NULL, *upd = NULL;
    kc_code rc = kc_yaml_parse_file(path, &docs, err);
    if (rc != KC_OK)
        return rc;
    const json_t *crd = json_array_get(docs, 0);
    const char *name = str_at(crd, "metadata", "name");
    if (json_array_size(docs) != 1 ||
        strcmp(str_at(crd, "kind", NULL) ?: "", "CustomResourceDefinition") != 0 || !name) {
        rc = kc_err_set(err, KC_EINVALID,
                        "%s: expected one CustomResourceDefinition with a metadata.name", path);
        goto out;
    }
    const char *what = "unchanged";
    for (int attempt = 0;; attempt++) {
        json_decref(live);
        live = NULL;
        rc = kc_get(c, &KC_RES_CRDS, NULL, name, &live, err);
        if (rc == KC_ENOTFOUND) {
            rc = kc_create(c, &KC_RES_CRDS, NULL, crd, NULL, err);
            what = "created";
        } else if (rc == KC_OK) {
            json_object_del(live, "status");
            json_decref(upd);
            upd = merged(live, crd);
            if (!upd) {
                rc = kc_err_set(err, KC_ENOMEM, "out of memory");
                goto out;
            }
            if (json_equal(upd, live))
                break;
            /* The server bumps metadata.generation only when the spec changed. */
            json_t *after = NULL;
            rc = kc_update(c, &KC_RES_CRDS, NULL, upd, &after, err);
            json_t *g0 = json_object_get(json_object_get(live, "metadata"), "generation");
            json_t *g1 = json_object_get(json_object_get(after, "metadata"), "generation");
            what = g0 && g1 && json_equal(g0, g1) ? "unchanged" : "configured";
            json_decref(after);
        }
        if ((rc != KC_ECONFLICT && rc != KC_EALREADYEXISTS) || attempt >= 4)
            break;
    }
    if (rc != KC_OK) {
        kc_err_prefix(err, "applying customresourcedefinition %s from %s", name, path);
        goto out;
    }
    fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s %s\n", name, what);
    for (time_t end = time(NULL) + timeout_s;;) {
        json_decref(live);
        live = NULL;
        rc = kc_get(c, &KC_RES_CRDS, NULL, name, &live, err);
        if (rc == KC_OK && established(live))
            break;
        if (rc != KC_OK && rc != KC_ENOTFOUND)
            goto out;
        if (time(NULL) >= end) {
            rc = kc_err_set(err, KC_ETIMEDOUT,
                            "customresourcedefinition %s is not Established after %d s", name,
                            timeout_s);
            goto out;
        }
        sleep_ms(250);
    }
    fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s established\n", name);
out:
    json_decref(upd);
    json_decref(live);
    json_decref(docs);
    return rc;
}

/* What delete_wait says of one kind of object. */
typedef struct {
    const kc_resource *res;
    const char *kind;    /* "clusterpolicy" */
    const char *ref;     /* "clusterpolicy.nvidia.com", as kubectl names it */
    const char *absent;  /* after "<kind> <name> not found; " */
    const char *waiting; /* after "<ref>/<name> deleted" */
    const char *hint;    /* after the timeout error's finalizers */
} delete_what;

/* Deletes the object `name` and waits up to timeout_s for it to be gone. */
static kc_code delete_wait(kc_client *c, const delete_what *w, const char *name, int timeout_s,
                           FILE *out, kc_err *err)
{
    kc_code rc = kc_delete(c, w->res, NULL, name, KC_PROPAGATE_BACKGROUND, NULL, err);
    if (rc == KC_ENOTFOUND) {
        fprintf(out, "%s %s not found; %s\n", w->kind, name, w->absent);
        return KC_OK;
    }
    if (rc != KC_OK) {
        kc_err_prefix(err, "deleting %s %s", w->kind, name);
        return rc;
    }
    fprintf(out, "%s/%s deleted%s\n", w->ref, name, w->waiting);
    time_t end = time(NULL) + timeout_s;
    for (;;) {
        json_t *live = NULL;
        rc = kc_get(c, w->res, NULL, name, &live, err);
        if (rc == KC_ENOTFOUND) {
            fprintf(out, "%s/%s gone\n", w->ref, name);
            return KC_OK;
        }
        char fins[256] = "";
        size_t i, n = 0;
        const json_t *f;
        json_array_foreach(json_object_get(json_object_get(live, "metadata"), "finalizers"), i, f)
        {
            n += (size_t)snprintf(fins + n, n < sizeof(fins) ? sizeof(fins) - n : 0, "%s%s",
                                  i ? "," : "", json_string_value(f) ?: "");
            if (n >= sizeof(fins))
                n = sizeof(fins) - 1;
        }
        json_decref(live);
        if (rc != KC_OK) {
            kc_err_prefix(err, "reading %s %s", w->kind, name);
            return rc;
        }
        if (time(NULL) >= end)
            return kc_err_set(err, KC_ETIMEDOUT, "%s %s still exists after %d s (finalizers: %s)%s",
                              w->kind, name, timeout_s, fins[0] ? fins : "none", w->hint);
        sleep_ms(500);
    }
}

/* The objects the hooks delete: the ClusterPolicy, the CRD. */
static const delete_what POLICY = {&KC_RES_CLUSTERPOLICIES,
                                   "clusterpolicy",
                                   "clusterpolicy.nvidia.com",
                                   "nothing to clean up",
                                   "; waiting for the operator to remove the operands and node "
                                   "labels",
                                   ": is the operator running? Its finalizer removes the operands "
                                   "and node labels first; `helm uninstall --no-hooks` skips "
                                   "this wait"},
                         CRD = {&KC_RES_CRDS,
                                "customresourcedefinition",
                                "customresourcedefinition.apiextensions.k8s.io",
                                "nothing to delete",
                                "",
                                ""};

kc_code op_policy_delete_wait(kc_client *c, const char *name, int timeout_s, FILE *out, kc_err *err)
{
    return delete_wait(c, &POLICY, name, timeout_s, out, err);
}

kc_code op_crd_delete_wait(kc_client *c, const char *name, int timeout_s, FILE *out, kc_err *err)
{
    return delete_wait(c, &CRD, name, timeout_s, out, err);
}
