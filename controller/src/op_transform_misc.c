/* op_transform_misc: transforms of pre-requisites (RuntimeClass), the operator's metrics and the
 * node status exporter, and the ServiceMonitor settings they share with dcgm-exporter. */
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
    json_t *main = op_find_container(ds, ctrs[0]);
    /* The exporter is the validator's image unless its section names another. */
    char *def = op_validator_image(t, json_string_value(json_object_get(main, "image")));
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
