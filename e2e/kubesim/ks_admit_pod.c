/* ks_admit_pod: defaulting and validation of pod specs (Pods and workload templates), with the
 * API server's defaults (those clients read back) and its error messages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"

#define SA_MOUNT_PATH "/var/run/secrets/kubernetes.io/serviceaccount"

/* imagePullPolicy default: Always for :latest or no tag, IfNotPresent otherwise (digests too). */
const char *ks_default_pull_policy(const char *image)
{
    if (strchr(image, '@'))
        return "IfNotPresent";
    const char *slash = strrchr(image, '/');
    const char *colon = strrchr(image, ':');
    if (!colon || (slash && colon < slash))
        return "Always";
    return strcmp(colon + 1, "latest") == 0 ? "Always" : "IfNotPresent";
}

static void probe_default(json_t *probe)
{
    if (!json_is_object(probe))
        return;
    ks_default_set(probe, "timeoutSeconds", json_integer(1));
    ks_default_set(probe, "periodSeconds", json_integer(10));
    ks_default_set(probe, "successThreshold", json_integer(1));
    ks_default_set(probe, "failureThreshold", json_integer(3));
    json_t *get = json_object_get(probe, "httpGet");
    if (json_is_object(get)) {
        ks_default_set(get, "path", json_string("/"));
        ks_default_set(get, "scheme", json_string("HTTP"));
    }
}

static void field_ref_default(json_t *holder)
{
    json_t *ref = json_object_get(json_object_get(holder, "valueFrom"), "fieldRef");
    if (json_is_object(ref))
        ks_default_set(ref, "apiVersion", json_string("v1"));
}

static void container_default(json_t *c, bool host_network, bool pod)
{
    if (!json_is_object(c))
        return;
    ks_default_set(c, "terminationMessagePath", json_string("/dev/termination-log"));
    ks_default_set(c, "terminationMessagePolicy", json_string("File"));
    ks_default_set(c, "imagePullPolicy", json_string(ks_default_pull_policy(ks_str(c, "image"))));
    json_t *res = ks_obj_child(c, "resources");
    if (pod && res) {
        /* Pods (not templates): requests default to the limits. */
        json_t *lim = json_object_get(res, "limits");
        if (json_is_object(lim) && json_object_size(lim)) {
            json_t *req = ks_obj_child(res, "requests");
            const char *k;
            json_t *val;
            json_object_foreach(lim, k, val)
            {
                if (req && !json_object_get(req, k))
                    json_object_set(req, k, val);
            }
        }
    }
    json_t *ports = json_object_get(c, "ports");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        json_t *p = json_array_get(ports, i);
        if (!json_is_object(p))
            continue;
        ks_default_set(p, "protocol", json_string("TCP"));
        if (host_network && json_object_get(p, "containerPort"))
            ks_default_set(p, "hostPort", json_deep_copy(json_object_get(p, "containerPort")));
    }
    probe_default(json_object_get(c, "livenessProbe"));
    probe_default(json_object_get(c, "readinessProbe"));
    probe_default(json_object_get(c, "startupProbe"));
    json_t *env = json_object_get(c, "env");
    for (size_t i = 0; i < json_array_size(env); i++) {
        json_t *e = json_array_get(env, i);
        field_ref_default(e);
        /* EnvVar.value is omitempty in the API server's types: `value: ""` is not stored. */
        const json_t *val = json_object_get(e, "value");
        if (json_is_string(val) && !json_string_value(val)[0])
            json_object_del(e, "value");
    }
}

static void volume_default(json_t *vol)
{
    static const char *const with_mode[] = {"secret", "configMap", "projected", "downwardAPI"};
    for (size_t i = 0; i < sizeof(with_mode) / sizeof(with_mode[0]); i++) {
        json_t *src = json_object_get(vol, with_mode[i]);
        if (json_is_object(src))
            ks_default_set(src, "defaultMode", json_integer(420));
    }
    json_t *dapi = json_object_get(vol, "downwardAPI");
    json_t *items = json_object_get(dapi, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *ref = json_object_get(json_array_get(items, i), "fieldRef");
        if (json_is_object(ref))
            ks_default_set(ref, "apiVersion", json_string("v1"));
    }
}

void ks_pod_spec_default(json_t *spec, bool pod)
{
    if (!json_is_object(spec))
        return;
    ks_default_set(spec, "restartPolicy", json_string("Always"));
    ks_default_set(spec, "terminationGracePeriodSeconds", json_integer(30));
    ks_default_set(spec, "dnsPolicy", json_string("ClusterFirst"));
    ks_default_set(spec, "schedulerName", json_string("default-scheduler"));
    ks_default_set(spec, "securityContext", json_object());
    ks_default_set(spec, "enableServiceLinks", json_true());
    bool host_network = json_is_true(json_object_get(spec, "hostNetwork"));
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_t *cs = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(cs); i++)
            container_default(json_array_get(cs, i), host_network, pod);
    }
    json_t *vols = json_object_get(spec, "volumes");
    for (size_t i = 0; i < json_array_size(vols); i++)
        volume_default(json_array_get(vols, i));
    /* The deprecated serviceAccount mirrors serviceAccountName. */
    const char *sa = ks_str(spec, "serviceAccountName");
    if (*sa)
        ks_default_set(spec, "serviceAccount", json_string(sa));
}

/* "kube-api-access-" plus 5 characters of the API server's random alphabet, derived from the
 * pod's uid so the same pod always gets the same name. */
static void token_volume_name(const json_t *pod, char out[32])
{
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    const char *uid = ks_str(json_object_get(pod, "metadata"), "uid");
    if (!*uid)
        uid = ks_str(json_object_get(pod, "metadata"), "name");
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = uid; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    char suffix[6];
    for (int i = 0; i < 5; i++) {
        suffix[i] = alphabet[h % (sizeof(alphabet) - 1)];
        h /= sizeof(alphabet) - 1;
    }
    suffix[5] = '\0';
    snprintf(out, 32, "kube-api-access-%s", suffix);
}

static bool has_mount_at(const json_t *c, const char *path)
{
    const json_t *mounts = json_object_get(c, "volumeMounts");
    for (size_t i = 0; i < json_array_size(mounts); i++)
        if (strcmp(ks_str(json_array_get(mounts, i), "mountPath"), path) == 0)
            return true;
    return false;
}

/* What the ServiceAccount admission plugin adds: the projected token volume, mounted read-only
 * in every container that does not mount something there itself. */
static void add_token_volume(json_t *pod, json_t *spec)
{
    if (json_is_false(json_object_get(spec, "automountServiceAccountToken")))
        return;
    char name[32];
    token_volume_name(pod, name);
    json_t *vol =
        json_pack("{s:s, s:{s:i, s:[{s:{s:i, s:s}}, {s:{s:[{s:s, s:s}], s:s}},"
                  " {s:{s:[{s:{s:s, s:s}, s:s}]}}]}}",
                  "name", name, "projected", "defaultMode", 420, "sources", "serviceAccountToken",
                  "expirationSeconds", 3607, "path", "token", "configMap", "items", "key", "ca.crt",
                  "path", "ca.crt", "name", "kube-root-ca.crt", "downwardAPI", "items", "fieldRef",
                  "apiVersion", "v1", "fieldPath", "metadata.namespace", "path", "namespace");
    if (!vol)
        return;
    json_t *vols = json_object_get(spec, "volumes");
    if (!json_is_array(vols)) {
        vols = json_array();
        json_object_set_new(spec, "volumes", vols);
    }
    json_array_append_new(vols, vol);
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_t *cs = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(cs); i++) {
            json_t *c = json_array_get(cs, i);
            if (!json_is_object(c) || has_mount_at(c, SA_MOUNT_PATH))
                continue;
            json_t *mounts = json_object_get(c, "volumeMounts");
            if (!json_is_array(mounts)) {
                mounts = json_array();
                json_object_set_new(c, "volumeMounts", mounts);
            }
            json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "mountPath", SA_MOUNT_PATH,
                                                    "name", name, "readOnly", 1));
        }
    }
}

/* The DefaultTolerationSeconds plugin: tolerate not-ready/unreachable nodes for 300 s. */
static void add_default_tolerations(json_t *spec)
{
    static const char *const keys[] = {"node.kubernetes.io/not-ready",
                                       "node.kubernetes.io/unreachable"};
    json_t *tols = json_object_get(spec, "tolerations");
    for (size_t k = 0; k < 2; k++) {
        bool have = false;
        for (size_t i = 0; i < json_array_size(tols) && !have; i++) {
            const json_t *t = json_array_get(tols, i);
            const char *eff = ks_str(t, "effect");
            have =
                strcmp(ks_str(t, "key"), keys[k]) == 0 && (!*eff || strcmp(eff, "NoExecute") == 0);
        }
        if (have)
            continue;
        if (!json_is_array(tols)) {
            tols = json_array();
            json_object_set_new(spec, "tolerations", tols);
        }
        json_array_append_new(tols,
                              json_pack("{s:s, s:s, s:s, s:i}", "key", keys[k], "operator",
                                        "Exists", "effect", "NoExecute", "tolerationSeconds", 300));
    }
}

/* BestEffort without any cpu/memory requests or limits, Guaranteed when every container limits
 * both and requests equal the limits, else Burstable. */
static const char *qos_class(const json_t *spec)
{
    bool any = false, guaranteed = true;
    static const char *const lists[] = {"containers", "initContainers"};
    static const char *const res[] = {"cpu", "memory"};
    for (size_t l = 0; l < 2; l++) {
        const json_t *cs = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(cs); i++) {
            const json_t *r = json_object_get(json_array_get(cs, i), "resources");
            const json_t *lim = json_object_get(r, "limits");
            const json_t *req = json_object_get(r, "requests");
            for (size_t k = 0; k < 2; k++) {
                const json_t *lv = json_object_get(lim, res[k]);
                const json_t *rv = json_object_get(req, res[k]);
                any |= lv || rv;
                if (!lv || (rv && !json_equal((json_t *)lv, (json_t *)rv)))
                    guaranteed = false;
            }
        }
    }
    return !any ? "BestEffort" : guaranteed ? "Guaranteed" : "Burstable";
}

void ks_pod_default(json_t *pod, bool create)
{
    json_t *spec = ks_obj_child(pod, "spec");
    if (!spec)
        return;
    if (create) {
        /* The ServiceAccount and DefaultTolerationSeconds admission plugins act on creation. */
        ks_default_set(spec, "serviceAccountName", json_string("default"));
        add_token_volume(pod, spec);
        add_default_tolerations(spec);
        if (!*ks_str(spec, "priorityClassName"))
            ks_default_set(spec, "priority", json_integer(0));
        ks_default_set(spec, "preemptionPolicy", json_string("PreemptLowerPriority"));
    }
    ks_pod_spec_default(spec, true);
    json_t *status = ks_obj_child(pod, "status");
    if (status) {
        ks_default_set(status, "phase", json_string("Pending"));
        ks_default_set(status, "qosClass", json_string(qos_class(spec)));
    }
}

/* ---- validation --------------------------------------------------------------------------- */

static void enum_check(ks_verr *v, const json_t *obj, const char *key, const char *path,
                       const char *const *allowed)
{
    const json_t *val = json_object_get(obj, key);
    if (!val || json_is_null(val))
        return;
    const char *s = json_string_value(val);
    for (size_t i = 0; s && allowed[i]; i++)
        if (strcmp(s, allowed[i]) == 0)
            return;
    char p[512];
    snprintf(p, sizeof(p), "%s.%s", path, key);
    char *gov = ks_go_value(val);
    ks_verr_unsupported(v, p, gov, allowed);
    free(gov);
}

/* IANA service names (container and service port names). */
static void port_name_check(ks_verr *v, const char *name, const char *path)
{
    size_t n = strlen(name);
    bool charset = n > 0, letter = false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            charset = false;
        if (c >= 'a' && c <= 'z')
            letter = true;
    }
    if (n > 15)
        ks_verr_invalid_str(v, path, name, "must be no more than 15 characters");
    if (!charset)
        ks_verr_invalid_str(v, path, name,
                            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens "
                            "(-)");
    if (!letter)
        ks_verr_invalid_str(v, path, name, "must contain at least one letter (a-z)");
    if (strstr(name, "--"))
        ks_verr_invalid_str(v, path, name, "must not contain consecutive hyphens");
    if (n > 0 && (name[0] == '-' || name[n - 1] == '-'))
        ks_verr_invalid_str(v, path, name, "must not begin or end with a hyphen");
}

static void port_number_check(ks_verr *v, const json_t *val, const char *path, bool required)
{
    if (!val || json_is_null(val) || (json_is_integer(val) && json_integer_value(val) == 0)) {
        if (required)
            ks_verr_required(v, path, "");
        return;
    }
    json_int_t n = json_integer_value(val);
    if (!json_is_integer(val) || n < 1 || n > 65535) {
        char *gov = ks_go_value(val);
        ks_verr_invalid(v, path, gov, "must be between 1 and 65535, inclusive");
        free(gov);
    }
}

static const char *const PROTOCOLS[] = {"SCTP", "TCP", "UDP", NULL};

static bool has_volume(const json_t *spec, const char *name)
{
    const json_t *vols = json_object_get(spec, "volumes");
    for (size_t i = 0; i < json_array_size(vols); i++)
        if (strcmp(ks_str(json_array_get(vols, i), "name"), name) == 0)
            return true;
    return false;
}

static void container_validate(ks_verr *v, const json_t *spec, const json_t *c, const char *path,
                               json_t *seen)
{
    static const char *const pull[] = {"Always", "IfNotPresent", "Never", NULL};
    static const char *const tmp[] = {"File", "FallbackToLogsOnError", NULL};
    char p[512];
    ks_vmsg msgs[2];
    const char *name = ks_str(c, "name");
    snprintf(p, sizeof(p), "%s.name", path);
    if (!*name) {
        ks_verr_required(v, p, "");
    } else {
        int n = ks_valid_dns1123_label(name, msgs);
        for (int i = 0; i < n; i++)
            ks_verr_invalid_str(v, p, name, msgs[i]);
        if (json_object_get(seen, name)) {
            char *q = ks_go_quote(name);
            ks_verr_duplicate(v, p, q);
            free(q);
        }
        json_object_set_new(seen, name, json_true());
    }
    snprintf(p, sizeof(p), "%s.image", path);
    if (!*ks_str(c, "image"))
        ks_verr_required(v, p, "");
    enum_check(v, c, "imagePullPolicy", path, pull);
    enum_check(v, c, "terminationMessagePolicy", path, tmp);

    const json_t *ports = json_object_get(c, "ports");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        const json_t *port = json_array_get(ports, i);
        char pp[512];
        snprintf(pp, sizeof(pp), "%s.ports[%zu]", path, i);
        if (json_object_get(port, "name")) {
            snprintf(p, sizeof(p), "%s.name", pp);
            port_name_check(v, ks_str(port, "name"), p);
        }
        snprintf(p, sizeof(p), "%s.containerPort", pp);
        port_number_check(v, json_object_get(port, "containerPort"), p, true);
        snprintf(p, sizeof(p), "%s.hostPort", pp);
        port_number_check(v, json_object_get(port, "hostPort"), p, false);
        enum_check(v, port, "protocol", pp, PROTOCOLS);
    }
    const json_t *res = json_object_get(c, "resources");
    snprintf(p, sizeof(p), "%s.resources.limits", path);
    ks_validate_resource_names(v, json_object_get(res, "limits"), p, true);
    snprintf(p, sizeof(p), "%s.resources.requests", path);
    ks_validate_resource_names(v, json_object_get(res, "requests"), p, true);
    const json_t *env = json_object_get(c, "env");
    for (size_t i = 0; i < json_array_size(env); i++) {
        if (!*ks_str(json_array_get(env, i), "name")) {
            snprintf(p, sizeof(p), "%s.env[%zu].name", path, i);
            ks_verr_required(v, p, "");
        }
    }
    const json_t *mounts = json_object_get(c, "volumeMounts");
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const json_t *m = json_array_get(mounts, i);
        const char *vname = ks_str(m, "name");
        snprintf(p, sizeof(p), "%s.volumeMounts[%zu].name", path, i);
        if (!*vname) {
            ks_verr_required(v, p, "");
        } else if (!has_volume(spec, vname)) {
            char *q = ks_go_quote(vname);
            ks_verr_not_found(v, p, q);
            free(q);
        }
        if (!*ks_str(m, "mountPath")) {
            snprintf(p, sizeof(p), "%s.volumeMounts[%zu].mountPath", path, i);
            ks_verr_required(v, p, "");
        }
    }
}

void ks_pod_spec_validate(ks_verr *v, const json_t *spec, const char *path)
{
    static const char *const restart[] = {"Always", "OnFailure", "Never", NULL};
    static const char *const dns[] = {"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None",
                                      NULL};
    char p[512];
    ks_vmsg msgs[2];
    json_t *seen = json_object();
    if (!seen) {
        v->nomem = true;
        return;
    }
    const json_t *vols = json_object_get(spec, "volumes");
    json_t *vseen = json_object();
    for (size_t i = 0; i < json_array_size(vols) && vseen; i++) {
        const char *name = ks_str(json_array_get(vols, i), "name");
        snprintf(p, sizeof(p), "%s.volumes[%zu].name", path, i);
        if (!*name) {
            ks_verr_required(v, p, "");
            continue;
        }
        int n = ks_valid_dns1123_label(name, msgs);
        for (int k = 0; k < n; k++)
            ks_verr_invalid_str(v, p, name, msgs[k]);
        if (json_object_get(vseen, name)) {
            char *q = ks_go_quote(name);
            ks_verr_duplicate(v, p, q);
            free(q);
        }
        json_object_set_new(vseen, name, json_true());
    }
    json_decref(vseen);

    const json_t *cs = json_object_get(spec, "containers");
    if (json_array_size(cs) == 0) {
        snprintf(p, sizeof(p), "%s.containers", path);
        ks_verr_required(v, p, "");
    }
    for (size_t i = 0; i < json_array_size(cs); i++) {
        snprintf(p, sizeof(p), "%s.containers[%zu]", path, i);
        container_validate(v, spec, json_array_get(cs, i), p, seen);
    }
    const json_t *ics = json_object_get(spec, "initContainers");
    for (size_t i = 0; i < json_array_size(ics); i++) {
        snprintf(p, sizeof(p), "%s.initContainers[%zu]", path, i);
        container_validate(v, spec, json_array_get(ics, i), p, seen);
    }
    json_decref(seen);

    enum_check(v, spec, "restartPolicy", path, restart);
    enum_check(v, spec, "dnsPolicy", path, dns);
    snprintf(p, sizeof(p), "%s.nodeSelector", path);
    ks_validate_labels(v, json_object_get(spec, "nodeSelector"), p);
    const char *sa = ks_str(spec, "serviceAccountName");
    if (*sa) {
        snprintf(p, sizeof(p), "%s.serviceAccountName", path);
        int n = ks_valid_dns1123_subdomain(sa, msgs);
        for (int k = 0; k < n; k++)
            ks_verr_invalid_str(v, p, sa, msgs[k]);
    }
    const json_t *grace = json_object_get(spec, "terminationGracePeriodSeconds");
    if (grace && !json_is_integer(grace) && !json_is_null(grace)) {
        snprintf(p, sizeof(p), "%s.terminationGracePeriodSeconds", path);
        char *gov = ks_go_value(grace);
        ks_verr_invalid(v, p, gov, "must be an integer");
        free(gov);
    }
}

/* A copy of a pod spec without what a pod update may change, for comparing old and new. */
static json_t *immutable_view(const json_t *spec, bool old_unbound)
{
    json_t *c = json_deep_copy(spec);
    if (!c)
        return NULL;
    static const char *const mutable_fields[] = {
        "activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"};
    for (size_t i = 0; i < sizeof(mutable_fields) / sizeof(mutable_fields[0]); i++)
        json_object_del(c, mutable_fields[i]);
    /* kubesim's scheduler binds by setting nodeName on an unbound pod (the binding
     * subresource's effect). */
    if (old_unbound)
        json_object_del(c, "nodeName");
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_t *cs = json_object_get(c, lists[l]);
        for (size_t i = 0; i < json_array_size(cs); i++)
            json_object_del(json_array_get(cs, i), "image");
    }
    return c;
}

void ks_pod_validate(ks_verr *v, const json_t *old, const json_t *pod)
{
    const json_t *spec = json_object_get(pod, "spec");
    ks_pod_spec_validate(v, spec, "spec");
    if (!old)
        return;
    const json_t *ospec = json_object_get(old, "spec");
    bool unbound = !*ks_str(ospec, "nodeName");
    json_t *a = immutable_view(ospec, unbound), *b = immutable_view(spec, unbound);
    if (a && b && !json_equal(a, b))
        ks_verr_forbidden(v, "spec",
                          "pod updates may not change fields other than "
                          "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec."
                          "activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
                          "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                          "to 1 if it was previously negative)");
    json_decref(a);
    json_decref(b);
}
