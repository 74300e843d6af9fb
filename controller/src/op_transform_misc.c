/* op_transform_misc: transforms of pre-requisites (RuntimeClass), the operator's metrics, the
 * node status exporter and the image pre-pull, and the ServiceMonitor settings they share with
 * dcgm-exporter. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

kc_code op_transform_prerequisites(op_tctx *t)
{
    const json_t *op;
    const char *rclass = NULL;
    kc_code rc = op_spec_obj(t->spec, "operator", "spec", &op, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(op, "runtimeClass", "spec.operator", &rclass, t->err);
    if (rc != KC_OK)
        return rc;
    if (!rclass)
        return KC_OK;
    if (!op_valid_name(rclass))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.operator.runtimeClass: \"%s\" is not a valid RuntimeClass name",
                          rclass);
    json_t *rcobj = op_find_object(t->objs, "RuntimeClass", NULL);
    if (!rcobj)
        return KC_OK;
    /* The toolkit registers a runtime handler of the same name. */
    if (json_object_set_new(json_object_get(rcobj, "metadata"), "name", json_string(rclass)) != 0 ||
        json_object_set_new(rcobj, "handler", json_string(rclass)) != 0)
        return OOM(t);
    return KC_OK;
}

static bool valid_duration(const char *s)
{
    /* Prometheus durations: digits followed by y|w|d|h|m|s|ms, repeated (e.g. 1m30s), or "0". */
    if (strcmp(s, "0") == 0)
        return true;
    const char *p = s;
    if (!*p)
        return false;
    while (*p) {
        const char *d = p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return false;
        if (p[0] == 'm' && p[1] == 's')
            p += 2;
        else if (*p && strchr("ywdhms", *p))
            p++;
        else
            return false;
    }
    return true;
}

kc_code op_apply_service_monitor(op_tctx *t, json_t *sm, const json_t *sec, const char *path)
{
    if (!sec)
        return KC_OK;
    json_t *ep = json_array_get(json_object_get(json_object_get(sm, "spec"), "endpoints"), 0);
    static const char *const durations[] = {"interval", "scrapeTimeout"};
    for (size_t i = 0; i < 2; i++) {
        const char *v;
        kc_code rc = op_spec_str(sec, durations[i], path, &v, t->err);
        if (rc != KC_OK)
            return rc;
        if (v && !valid_duration(v))
            return kc_err_set(t->err, KC_EINVALID,
                              "%s.%s: \"%s\" is not a duration such as 30s or 1m", path,
                              durations[i], v);
        if (v && ep && json_object_set_new(ep, durations[i], json_string(v)) != 0)
            return OOM(t);
    }
    json_t *hl = json_object_get(sec, "honorLabels");
    if (hl && !json_is_null(hl)) {
        if (!json_is_boolean(hl))
            return kc_err_set(t->err, KC_EINVALID, "%s.honorLabels: must be true or false", path);
        if (ep && json_object_set(ep, "honorLabels", hl) != 0)
            return OOM(t);
    }
    json_t *rl = json_object_get(sec, "relabelings");
    if (rl && !json_is_null(rl)) {
        if (!json_is_array(rl))
            return kc_err_set(t->err, KC_EINVALID, "%s.relabelings: must be a list", path);
        size_t i;
        json_t *r;
        json_array_foreach(rl, i, r)
        {
            if (!json_is_object(r))
                return kc_err_set(t->err, KC_EINVALID, "%s.relabelings[%zu]: must be an object",
                                  path, i);
        }
        if (ep && json_array_size(rl) > 0 &&
            json_object_set_new(ep, "relabelings", json_deep_copy(rl)) != 0)
            return OOM(t);
    }
    json_t *al = json_object_get(sec, "additionalLabels");
    if (al && !json_is_null(al)) {
        if (!json_is_object(al))
            return kc_err_set(t->err, KC_EINVALID, "%s.additionalLabels: must be a map of strings",
                              path);
        json_t *meta = json_object_get(sm, "metadata");
        json_t *labels = json_object_get(meta, "labels");
        if (!json_is_object(labels)) {
            labels = json_object();
            if (!labels || json_object_set_new(meta, "labels", labels) != 0)
                return OOM(t);
        }
        const char *k;
        json_t *v;
        json_object_foreach(al, k, v)
        {
            if (!json_is_string(v))
                return kc_err_set(t->err, KC_EINVALID, "%s.additionalLabels.%s: must be a string",
                                  path, k);
            if (json_object_set(labels, k, v) != 0)
                return OOM(t);
        }
    }
    return KC_OK;
}

/* The operator's own ServiceMonitor is on unless operator.metrics.serviceMonitor.enabled is false
 * (the controller leaves out ServiceMonitors where the monitoring.coreos.com CRD is missing). */
kc_code op_transform_operator_metrics(op_tctx *t)
{
    const json_t *sec;
    kc_code rc = op_spec_path(t->spec, "operator.metrics.serviceMonitor", &sec, t->err);
    if (rc != KC_OK)
        return rc;
    bool on;
    rc = op_spec_bool(sec, "enabled", "spec.operator.metrics.serviceMonitor", true, &on, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *sm = op_find_object(t->objs, "ServiceMonitor", NULL);
    if (!sm)
        return KC_OK;
    if (!on) {
        op_remove_object(t->objs, "ServiceMonitor", NULL);
        return KC_OK;
    }
    return op_apply_service_monitor(t, sm, sec, "spec.operator.metrics.serviceMonitor");
}

kc_code op_transform_node_status_exporter(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"nvidia-node-status-exporter", NULL};
    /* The exporter is the validator's image unless its section names another. */
    char *def = op_validator_image(t);
    if (!def)
        return t->err ? t->err->code : KC_EINVALID;
    op_component c = {.section = "nodeStatusExporter",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .def_image = def,
                      .env = true,
                      .args = OP_ARGS_APPEND};
    kc_code rc = op_apply_component(t, ds, &c);
    free(def);
    return rc;
}

/* A container name for the pull of image: "pull-" and the image's last path segment, made a DNS
 * label (lowercase alphanumerics and '-', at most 63 characters), "-2", "-3", ... when taken. */
static void pull_container_name(const char *image, const json_t *ctrs, char *out, size_t size)
{
    const char *end = image + strlen(image);
    const char *at = strchr(image, '@');
    if (at)
        end = at;
    const char *slash = NULL;
    for (const char *p = image; p < end; p++)
        if (*p == '/')
            slash = p;
    const char *seg = slash ? slash + 1 : image;
    for (const char *p = seg; p < end; p++)
        if (*p == ':') {
            end = p; /* the tag */
            break;
        }
    char base[48];
    size_t n = 0;
    for (const char *p = seg; p < end && n < sizeof(base) - 1; p++) {
        char ch = (char)tolower((unsigned char)*p);
        base[n++] = (isalnum((unsigned char)ch)) ? ch : '-';
    }
    while (n > 0 && base[n - 1] == '-')
        n--;
    base[n] = '\0';
    for (int i = 1;; i++) {
        if (i == 1)
            snprintf(out, size, "pull-%s", n ? base : "image");
        else
            snprintf(out, size, "pull-%s-%d", n ? base : "image", i);
        if (!op_find_named((json_t *)ctrs, out))
            return;
    }
}

/* The images of the operands that follow the first one on a node (the DaemonSets rendered before
 * this state, the driver's excepted: its pod is created with the label that starts the pre-pull),
 * each once, in the order the node needs them, as containers running the hold program after the
 * manifest's `hold` (the validator's image). Their pull secrets join the pod's. */
kc_code op_transform_image_prepull(op_tctx *t)
{
    if (t->ctx->no_image_prepull) {
        while (json_array_size(t->objs) > 0)
            json_array_remove(t->objs, 0);
        return KC_OK;
    }
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    json_t *ps = op_pod_spec(ds);
    json_t *hold = op_find_container(ds, "hold");
    json_t *ctrs = json_object_get(ps, "containers");
    if (!ds || !ps || !hold || !json_is_array(ctrs))
        return kc_err_set(t->err, KC_EINVALID,
                          "%s: the manifest needs a DaemonSet with a container named hold",
                          t->state);
    json_t *seen = json_object();
    json_t *secrets = json_array();
    if (!seen || !secrets)
        goto oom;
    const char *himg = json_string_value(json_object_get(hold, "image"));
    if (himg && json_object_set_new(seen, himg, json_true()))
        goto oom;
    size_t i;
    const json_t *o;
    json_array_foreach(t->ctx->rendered, i, o)
    {
        const json_t *meta = json_object_get(o, "metadata");
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *st =
            json_string_value(json_object_get(json_object_get(meta, "labels"), OP_STATE_LABEL));
        if (!kind || strcmp(kind, "DaemonSet") || (st && !strcmp(st, "state-driver")))
            continue;
        const json_t *ops =
            json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "spec");
        size_t j;
        const json_t *sec;
        json_array_foreach(json_object_get(ops, "imagePullSecrets"), j, sec)
        {
            const char *name = json_string_value(json_object_get(sec, "name"));
            if (name && !op_find_named(secrets, name) &&
                json_array_append_new(secrets, json_pack("{s:s}", "name", name)))
                goto oom;
        }
        static const char *const lists[] = {"initContainers", "containers"};
        for (int l = 0; l < 2; l++) {
            const json_t *c;
            json_array_foreach(json_object_get(ops, lists[l]), j, c)
            {
                const char *img = json_string_value(json_object_get(c, "image"));
                if (!img || !*img || json_object_get(seen, img))
                    continue;
                if (json_object_set_new(seen, img, json_true()))
                    goto oom;
                char name[64];
                pull_container_name(img, ctrs, name, sizeof(name));
                json_t *pc = json_deep_copy(hold);
                if (!pc || json_object_set_new(pc, "name", json_string(name)) ||
                    json_object_set_new(pc, "image", json_string(img)) ||
                    json_array_append_new(ctrs, pc))
                    goto oom;
                /* The operand's pull policy (its default, when it sets none, is the same). */
                json_t *pol = json_object_get(c, "imagePullPolicy");
                if (!json_is_string(pol))
                    json_object_del(pc, "imagePullPolicy");
                else if (json_object_set(pc, "imagePullPolicy", pol))
                    goto oom;
            }
        }
    }
    json_decref(seen);
    if (json_array_size(secrets) > 0) {
        json_t *have = json_object_get(ps, "imagePullSecrets");
        const json_t *sec;
        json_array_foreach(have, i, sec)
        {
            const char *name = json_string_value(json_object_get(sec, "name"));
            if (name && !op_find_named(secrets, name) &&
                json_array_append(secrets, (json_t *)sec)) {
                json_decref(secrets);
                return kc_err_set(t->err, KC_ENOMEM, "%s: out of memory", t->state);
            }
        }
        if (json_object_set_new(ps, "imagePullSecrets", secrets))
            return kc_err_set(t->err, KC_ENOMEM, "%s: out of memory", t->state);
    } else {
        json_decref(secrets);
    }
    return KC_OK;
oom:
    json_decref(seen);
    json_decref(secrets);
    return kc_err_set(t->err, KC_ENOMEM, "%s: out of memory", t->state);
}
