/* op_transform_dcgm: the DCGM host engine and dcgm-exporter: images, host port, the remote host
 * engine, the metrics ConfigMap, the Service and the ServiceMonitor. */
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

/* dcgm-exporter's key and path of a custom metrics file (NVIDIA's names). */
#define METRICS_VOLUME "metrics-config"
#define METRICS_FILE   "dcgm-metrics.csv"
#define METRICS_PATH   "/etc/dcgm-exporter/" METRICS_FILE

kc_code op_transform_dcgm(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"nvidia-dcgm-ctr", NULL};
    const json_t *dcgm;
    kc_code rc = op_spec_obj(t->spec, "dcgm", "spec", &dcgm, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *hp = dcgm ? json_object_get(dcgm, "hostPort") : NULL;
    if (hp && !json_is_null(hp)) {
        if (!json_is_integer(hp) || json_integer_value(hp) < 1 || json_integer_value(hp) > 65535)
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.dcgm.hostPort: must be a port number (1-65535)");
        json_t *port =
            op_find_named(json_object_get(op_find_container(ds, ctrs[0]), "ports"), "dcgm");
        if (port && json_object_set(port, "hostPort", hp) != 0)
            return OOM(t);
    }
    op_component c = {.section = "dcgm",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    return op_apply_component(t, ds, &c);
}

/* dcgmExporter.config.name: a ConfigMap whose dcgm-metrics.csv lists the metrics to collect. */
static kc_code apply_metrics_config(op_tctx *t, json_t *ds, json_t *ctr, const json_t *exp)
{
    const json_t *cfg;
    const char *name;
    kc_code rc = op_spec_obj(exp, "config", "spec.dcgmExporter", &cfg, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(cfg, "name", "spec.dcgmExporter.config", &name, t->err);
    if (rc != KC_OK || !name || !ctr)
        return rc;
    if (!op_valid_name(name))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.dcgmExporter.config.name: \"%s\" is not a valid ConfigMap name",
                          name);
    json_t *ps = op_pod_spec(ds);
    json_t *vols = json_object_get(ps, "volumes");
    if (!json_is_array(vols)) {
        vols = json_array();
        if (!vols || json_object_set_new(ps, "volumes", vols) != 0)
            return OOM(t);
    }
    json_t *mounts = json_object_get(ctr, "volumeMounts");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        if (!mounts || json_object_set_new(ctr, "volumeMounts", mounts) != 0)
            return OOM(t);
    }
    op_remove_named(vols, METRICS_VOLUME);
    op_remove_named(mounts, METRICS_VOLUME);
    if (json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:[{s:s, s:s}]}}", "name",
                                              METRICS_VOLUME, "configMap", "name", name, "items",
                                              "key", METRICS_FILE, "path", METRICS_FILE)) != 0 ||
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "name", METRICS_VOLUME,
                                                "mountPath", METRICS_PATH, "subPath", METRICS_FILE,
                                                "readOnly", 1)) != 0 ||
        op_env_set(ctr, "DCGM_EXPORTER_COLLECTORS", METRICS_PATH) != KC_OK)
        return OOM(t);
    return KC_OK;
}

static kc_code apply_service(op_tctx *t, const json_t *exp)
{
    const json_t *svc;
    const char *type, *policy;
    kc_code rc = op_spec_obj(exp, "service", "spec.dcgmExporter", &svc, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(svc, "type", "spec.dcgmExporter.service", &type, t->err);
    if (rc == KC_OK)
        rc =
            op_spec_str(svc, "internalTrafficPolicy", "spec.dcgmExporter.service", &policy, t->err);
    if (rc != KC_OK)
        return rc;
    if (type && strcmp(type, "ClusterIP") != 0 && strcmp(type, "NodePort") != 0 &&
        strcmp(type, "LoadBalancer") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.dcgmExporter.service.type: \"%s\" is not one of ClusterIP, "
                          "NodePort, LoadBalancer",
                          type);
    if (policy && strcmp(policy, "Cluster") != 0 && strcmp(policy, "Local") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.dcgmExporter.service.internalTrafficPolicy: \"%s\" is not one of "
                          "Cluster, Local",
                          policy);
    json_t *spec = json_object_get(op_find_object(t->objs, "Service", NULL), "spec");
    if (!json_is_object(spec))
        return KC_OK;
    if ((type && json_object_set_new(spec, "type", json_string(type)) != 0) ||
        (policy && json_object_set_new(spec, "internalTrafficPolicy", json_string(policy)) != 0))
        return OOM(t);
    return KC_OK;
}

kc_code op_transform_dcgm_exporter(op_tctx *t)
{
    const json_t *exp, *smsec;
    bool sm_on, dcgm_on, host_pid;
    kc_code rc;
    if ((rc = op_spec_obj(t->spec, "dcgmExporter", "spec", &exp, t->err)) != KC_OK ||
        (rc = op_spec_obj(exp, "serviceMonitor", "spec.dcgmExporter", &smsec, t->err)) != KC_OK ||
        (rc = op_spec_bool(smsec, "enabled", "spec.dcgmExporter.serviceMonitor", false, &sm_on,
                           t->err)) != KC_OK ||
        (rc = op_spec_bool(exp, "hostPID", "spec.dcgmExporter", false, &host_pid, t->err)) !=
            KC_OK ||
        (rc = op_section_enabled(t->spec, "dcgm", false, &dcgm_on, t->err)) != KC_OK)
        return rc;
    json_t *sm = op_find_object(t->objs, "ServiceMonitor", NULL);
    if (sm && !sm_on)
        op_remove_object(t->objs, "ServiceMonitor", NULL);
    else if (sm && (rc = op_apply_service_monitor(t, sm, smsec,
                                                  "spec.dcgmExporter.serviceMonitor")) != KC_OK)
        return rc;
    if ((rc = apply_service(t, exp)) != KC_OK)
        return rc;

    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"nvidia-dcgm-exporter", NULL};
    json_t *ctr = op_find_container(ds, ctrs[0]);
    /* With the standalone host engine on, the exporter reads it (the node-local Service). */
    if (ctr && dcgm_on &&
        op_env_set(ctr, "DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555") != KC_OK)
        return OOM(t);
    if (host_pid && json_object_set_new(op_pod_spec(ds), "hostPID", json_true()) != 0)
        return OOM(t);
    if ((rc = apply_metrics_config(t, ds, ctr, exp)) != KC_OK)
        return rc;
    op_component c = {.section = "dcgmExporter",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    return op_apply_component(t, ds, &c);
}
