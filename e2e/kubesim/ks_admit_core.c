/* ks_admit_core: defaulting and validation of the kinds other than pods and workloads (Service
 * with its clusterIP/nodePort allocation, Secret, ConfigMap, Namespace, RBAC, PriorityClass). */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_base64.h"
#include "ks_admit.h"

/* ---- allocators --------------------------------------------------------------------------- */

#define SVC_NET      0x0a600000u /* 10.96.0.0/12 */
#define SVC_SIZE     (1u << 20)
#define SVC_STATIC   256u /* the low band: explicitly requested addresses, as the real allocator */
#define NODEPORT_MIN 30000
#define NODEPORT_MAX 32767
#define MAX_DATA     (1024 * 1024) /* Secret/ConfigMap size limit */

struct ks_admit_state {
    pthread_mutex_t mu;
    uint8_t *ips; /* bitmap of offsets into the service network */
    uint32_t ip_next;
    uint8_t ports[(NODEPORT_MAX - NODEPORT_MIN + 1 + 7) / 8];
    uint32_t port_next;
};

static bool bit_get(const uint8_t *b, uint32_t i)
{
    return b[i / 8] & (1u << (i % 8));
}

static void bit_set(uint8_t *b, uint32_t i, bool on)
{
    if (on)
        b[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        b[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

kc_code ks_admit_init(ks_sim *sim, kc_err *err)
{
    if (!sim)
        return kc_err_set(err, KC_EARG, "ks_admit_init: no sim");
    if (sim->admit)
        return KC_OK;
    struct ks_admit_state *s = calloc(1, sizeof(*s));
    if (s)
        s->ips = calloc(SVC_SIZE / 8, 1);
    if (!s || !s->ips) {
        free(s);
        return kc_err_set(err, KC_ENOMEM, "admission: out of memory for the service allocators");
    }
    pthread_mutex_init(&s->mu, NULL);
    bit_set(s->ips, 0, true);            /* network address */
    bit_set(s->ips, SVC_SIZE - 1, true); /* broadcast */
    s->ip_next = SVC_STATIC + 1;
    sim->admit = s;
    return KC_OK;
}

void ks_admit_free(ks_sim *sim)
{
    if (!sim || !sim->admit)
        return;
    pthread_mutex_destroy(&sim->admit->mu);
    free(sim->admit->ips);
    free(sim->admit);
    sim->admit = NULL;
}

/* The offset of a dotted IPv4 inside the service network, or -1 when outside / malformed. */
static long ip_offset(const char *s)
{
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        return -1;
    uint32_t ip = ntohl(a.s_addr);
    if ((ip & ~(SVC_SIZE - 1)) != SVC_NET)
        return -1;
    return (long)(ip - SVC_NET);
}

static void ip_string(uint32_t off, char out[16])
{
    uint32_t ip = SVC_NET + off;
    snprintf(out, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

/* Next free dynamic address: the upper band first, then the lower one, never .0.1 (the
 * kubernetes Service's). False when the range is full. */
static bool alloc_ip(struct ks_admit_state *s, char out[16])
{
    for (uint32_t tries = 0; tries < SVC_SIZE; tries++) {
        uint32_t off = s->ip_next;
        s->ip_next = off + 1 >= SVC_SIZE - 1 ? 2 : off + 1;
        if (off < 2 || bit_get(s->ips, off))
            continue;
        bit_set(s->ips, off, true);
        ip_string(off, out);
        return true;
    }
    return false;
}

static bool alloc_port(struct ks_admit_state *s, long *port)
{
    const uint32_t n = NODEPORT_MAX - NODEPORT_MIN + 1;
    for (uint32_t tries = 0; tries < n; tries++) {
        uint32_t off = s->port_next;
        s->port_next = (off + 1) % n;
        if (bit_get(s->ports, off))
            continue;
        bit_set(s->ports, off, true);
        *port = NODEPORT_MIN + (long)off;
        return true;
    }
    return false;
}

static void release_ip(struct ks_admit_state *s, const char *ip)
{
    long off = ip_offset(ip);
    if (off > 0 && off < (long)SVC_SIZE - 1)
        bit_set(s->ips, (uint32_t)off, false);
}

static void release_ports(struct ks_admit_state *s, const json_t *svc, const json_t *keep)
{
    const json_t *ports = json_object_get(json_object_get(svc, "spec"), "ports");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        json_int_t np = json_integer_value(json_object_get(json_array_get(ports, i), "nodePort"));
        if (np < NODEPORT_MIN || np > NODEPORT_MAX)
            continue;
        bool kept = false;
        const json_t *kp = json_object_get(json_object_get(keep, "spec"), "ports");
        for (size_t j = 0; j < json_array_size(kp) && !kept; j++)
            kept = json_integer_value(json_object_get(json_array_get(kp, j), "nodePort")) == np;
        if (!kept)
            bit_set(s->ports, (uint32_t)(np - NODEPORT_MIN), false);
    }
}

void ks_admit_release_service(ks_sim *sim, const json_t *svc)
{
    if (!sim || !sim->admit || !json_is_object(svc))
        return;
    struct ks_admit_state *s = sim->admit;
    pthread_mutex_lock(&s->mu);
    const json_t *spec = json_object_get(svc, "spec");
    release_ip(s, ks_str(spec, "clusterIP"));
    release_ports(s, svc, NULL);
    pthread_mutex_unlock(&s->mu);
}

kc_code ks_admit_restore_services(ks_sim *sim, kc_err *err)
{
    kc_code rc = ks_admit_init(sim, err);
    if (rc != KC_OK)
        return rc;
    const ks_rtype *t = ks_store_type(sim->store, "", "v1", "services");
    json_t *items = NULL;
    uint64_t rv = 0;
    if (!t || (rc = ks_list(sim->store, t, NULL, NULL, &items, &rv, NULL, err)) != KC_OK)
        return t ? rc : KC_OK;
    struct ks_admit_state *s = sim->admit;
    pthread_mutex_lock(&s->mu);
    size_t i;
    json_t *svc;
    json_array_foreach(items, i, svc)
    {
        const json_t *spec = json_object_get(svc, "spec");
        long off = ip_offset(ks_str(spec, "clusterIP"));
        if (off > 0 && off < (long)SVC_SIZE - 1)
            bit_set(s->ips, (uint32_t)off, true);
        const json_t *ports = json_object_get(spec, "ports");
        for (size_t j = 0; j < json_array_size(ports); j++) {
            json_int_t np =
                json_integer_value(json_object_get(json_array_get(ports, j), "nodePort"));
            if (np >= NODEPORT_MIN && np <= NODEPORT_MAX)
                bit_set(s->ports, (uint32_t)(np - NODEPORT_MIN), true);
        }
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(items);
    return KC_OK;
}

/* ---- Service ------------------------------------------------------------------------------ */

static bool needs_node_ports(const char *type)
{
    return strcmp(type, "NodePort") == 0 || strcmp(type, "LoadBalancer") == 0;
}

static void service_default(json_t *svc, const json_t *old)
{
    json_t *spec = ks_obj_child(svc, "spec");
    if (!spec)
        return;
    ks_default_set(spec, "type", json_string("ClusterIP"));
    const char *type = ks_str(spec, "type");
    bool external_name = strcmp(type, "ExternalName") == 0;
    ks_default_set(spec, "sessionAffinity", json_string("None"));
    json_t *ports = json_object_get(spec, "ports");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        json_t *p = json_array_get(ports, i);
        if (!json_is_object(p))
            continue;
        ks_default_set(p, "protocol", json_string("TCP"));
        json_t *tp = json_object_get(p, "targetPort");
        if (!tp || json_is_null(tp) || (json_is_integer(tp) && json_integer_value(tp) == 0) ||
            (json_is_string(tp) && !json_string_length(tp)))
            json_object_set(p, "targetPort", json_object_get(p, "port"));
    }
    if (!external_name) {
        ks_default_set(spec, "internalTrafficPolicy", json_string("Cluster"));
        ks_default_set(spec, "ipFamilies", json_pack("[s]", "IPv4"));
        ks_default_set(spec, "ipFamilyPolicy", json_string("SingleStack"));
    }
    if (needs_node_ports(type))
        ks_default_set(spec, "externalTrafficPolicy", json_string("Cluster"));
    if (strcmp(type, "LoadBalancer") == 0)
        ks_default_set(spec, "allocateLoadBalancerNodePorts", json_true());
    if (!old) {
        json_t *status = ks_obj_child(svc, "status");
        if (status)
            ks_default_set(status, "loadBalancer", json_object());
        return;
    }
    /* Updates keep what was allocated when the client leaves it out. */
    const json_t *ospec = json_object_get(old, "spec");
    if (!*ks_str(spec, "clusterIP") && *ks_str(ospec, "clusterIP") && !external_name) {
        json_object_set(spec, "clusterIP", json_object_get(ospec, "clusterIP"));
        if (json_object_get(ospec, "clusterIPs"))
            json_object_set_new(spec, "clusterIPs",
                                json_deep_copy(json_object_get(ospec, "clusterIPs")));
    }
    const json_t *oports = json_object_get(ospec, "ports");
    for (size_t i = 0; needs_node_ports(type) && i < json_array_size(ports); i++) {
        json_t *p = json_array_get(ports, i);
        if (!json_is_object(p) || json_integer_value(json_object_get(p, "nodePort")))
            continue;
        for (size_t j = 0; j < json_array_size(oports); j++) {
            const json_t *op = json_array_get(oports, j);
            if (json_equal(json_object_get(op, "port"), json_object_get(p, "port")) &&
                strcmp(ks_str(op, "protocol"), ks_str(p, "protocol")) == 0 &&
                json_object_get(op, "nodePort")) {
                json_object_set(p, "nodePort", json_object_get(op, "nodePort"));
                break;
            }
        }
    }
    if (!needs_node_ports(type)) {
        /* Leaving NodePort/LoadBalancer drops the allocated node ports. */
        for (size_t i = 0; i < json_array_size(ports); i++)
            json_object_del(json_array_get(ports, i), "nodePort");
    }
}

static void service_validate(ks_verr *v, const json_t *old, const json_t *svc)
{
    static const char *const types[] = {"ClusterIP", "ExternalName", "LoadBalancer", "NodePort",
                                        NULL};
    static const char *const affinity[] = {"ClientIP", "None", NULL};
    static const char *const protocols[] = {"SCTP", "TCP", "UDP", NULL};
    const json_t *spec = json_object_get(svc, "spec");
    const char *type = ks_str(spec, "type");
    char p[256];
    ks_vmsg msgs[2];
    bool known = false;
    for (size_t i = 0; types[i]; i++)
        known |= strcmp(type, types[i]) == 0;
    if (!known) {
        char *q = ks_go_quote(type);
        ks_verr_unsupported(v, "spec.type", q, types);
        free(q);
    }
    const char *aff = ks_str(spec, "sessionAffinity");
    if (strcmp(aff, "ClientIP") != 0 && strcmp(aff, "None") != 0) {
        char *q = ks_go_quote(aff);
        ks_verr_unsupported(v, "spec.sessionAffinity", q, affinity);
        free(q);
    }
    bool external_name = strcmp(type, "ExternalName") == 0;
    bool headless = strcmp(ks_str(spec, "clusterIP"), "None") == 0;
    if (external_name && !*ks_str(spec, "externalName"))
        ks_verr_required(v, "spec.externalName", "");
    const json_t *ports = json_object_get(spec, "ports");
    size_t n = json_array_size(ports);
    if (n == 0 && !external_name && !headless)
        ks_verr_required(v, "spec.ports", "");
    for (size_t i = 0; i < n; i++) {
        const json_t *port = json_array_get(ports, i);
        const char *name = ks_str(port, "name");
        snprintf(p, sizeof(p), "spec.ports[%zu].name", i);
        if (n > 1 && !*name) {
            ks_verr_required(v, p, "");
        } else if (*name) {
            int k = ks_valid_dns1123_label(name, msgs);
            for (int m = 0; m < k; m++)
                ks_verr_invalid_str(v, p, name, msgs[m]);
            for (size_t j = 0; j < i; j++)
                if (strcmp(name, ks_str(json_array_get(ports, j), "name")) == 0) {
                    char *q = ks_go_quote(name);
                    ks_verr_duplicate(v, p, q);
                    free(q);
                    break;
                }
        }
        const json_t *num = json_object_get(port, "port");
        json_int_t pn = json_integer_value(num);
        if (!json_is_integer(num) || pn < 1 || pn > 65535) {
            snprintf(p, sizeof(p), "spec.ports[%zu].port", i);
            ks_verr_invalid_int(v, p, json_is_integer(num) ? pn : 0,
                                "must be between 1 and 65535, inclusive");
        }
        const char *proto = ks_str(port, "protocol");
        if (strcmp(proto, "TCP") != 0 && strcmp(proto, "UDP") != 0 && strcmp(proto, "SCTP") != 0) {
            snprintf(p, sizeof(p), "spec.ports[%zu].protocol", i);
            char *q = ks_go_quote(proto);
            ks_verr_unsupported(v, p, q, protocols);
            free(q);
        }
        const json_t *np = json_object_get(port, "nodePort");
        if (json_integer_value(np) && !needs_node_ports(type)) {
            snprintf(p, sizeof(p), "spec.ports[%zu].nodePort", i);
            char detail[80];
            snprintf(detail, sizeof(detail), "may not be used when `type` is '%s'", type);
            ks_verr_forbidden(v, p, detail);
        }
    }
    ks_validate_labels(v, json_object_get(spec, "selector"), "spec.selector");
    if (old) {
        const char *oip = ks_str(json_object_get(old, "spec"), "clusterIP");
        const char *nip = ks_str(spec, "clusterIP");
        if (*oip && strcmp(oip, nip) != 0 &&
            strcmp(ks_str(json_object_get(old, "spec"), "type"), "ExternalName") != 0 &&
            !external_name) {
            char *gov = ks_go_string_slice(json_object_get(spec, "clusterIPs"));
            ks_verr_invalid(v, "spec.clusterIPs[0]", gov, "may not change once set");
            free(gov);
        }
    }
}

/* Allocates a new Service's clusterIP and node ports (explicit ones are reserved). Called only
 * once the object validated, so failed creates do not leak addresses. */
static kc_code service_allocate(ks_sim *sim, const json_t *old, json_t *svc, ks_verr *v,
                                kc_err *err)
{
    kc_code rc = ks_admit_init(sim, err);
    if (rc != KC_OK)
        return rc;
    struct ks_admit_state *s = sim->admit;
    json_t *spec = json_object_get(svc, "spec");
    const char *type = ks_str(spec, "type");
    pthread_mutex_lock(&s->mu);
    if (!old && strcmp(type, "ExternalName") != 0) {
        const char *ip = ks_str(spec, "clusterIP");
        char buf[16];
        if (!*ip) {
            if (!alloc_ip(s, buf)) {
                ks_verr_invalid(v, "spec.clusterIPs", "[]string(nil)",
                                "failed to allocate IP : range is full");
                goto unlock;
            }
            json_object_set_new(spec, "clusterIP", json_string(buf));
        } else if (strcmp(ip, "None") != 0) {
            long off = ip_offset(ip);
            char detail[300];
            char *gov = ks_go_string_slice(json_object_get(spec, "clusterIPs"));
            if (!json_object_get(spec, "clusterIPs")) {
                free(gov);
                json_t *one = json_pack("[s]", ip);
                gov = ks_go_string_slice(one);
                json_decref(one);
            }
            if (off <= 0 || off >= (long)SVC_SIZE - 1) {
                snprintf(detail, sizeof(detail),
                         "failed to allocate IP %s: the provided IP (%s) is not in the valid "
                         "range. The range of valid IPs is 10.96.0.0/12",
                         ip, ip);
                ks_verr_invalid(v, "spec.clusterIPs", gov, detail);
            } else if (bit_get(s->ips, (uint32_t)off)) {
                snprintf(detail, sizeof(detail),
                         "failed to allocate IP %s: provided IP is already allocated", ip);
                ks_verr_invalid(v, "spec.clusterIPs", gov, detail);
            } else {
                bit_set(s->ips, (uint32_t)off, true);
            }
            free(gov);
        }
        ks_default_set(spec, "clusterIPs", json_pack("[s]", ks_str(spec, "clusterIP")));
    }
    json_t *ports = json_object_get(spec, "ports");
    for (size_t i = 0; needs_node_ports(type) && i < json_array_size(ports); i++) {
        json_t *p = json_array_get(ports, i);
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        char path[64];
        snprintf(path, sizeof(path), "spec.ports[%zu].nodePort", i);
        bool was_ours = false;
        const json_t *oports = json_object_get(json_object_get(old, "spec"), "ports");
        for (size_t j = 0; np && j < json_array_size(oports); j++)
            was_ours |=
                json_integer_value(json_object_get(json_array_get(oports, j), "nodePort")) == np;
        if (np == 0) {
            long port;
            if (!alloc_port(s, &port)) {
                ks_verr_invalid_int(v, path, 0, "range is full");
                continue;
            }
            json_object_set_new(p, "nodePort", json_integer(port));
        } else if (np < NODEPORT_MIN || np > NODEPORT_MAX) {
            ks_verr_invalid_int(v, path, np,
                                "provided port is not in the valid range. The range of valid "
                                "ports is 30000-32767");
        } else if (!was_ours && bit_get(s->ports, (uint32_t)(np - NODEPORT_MIN))) {
            ks_verr_invalid_int(v, path, np, "provided port is already allocated");
        } else {
            bit_set(s->ports, (uint32_t)(np - NODEPORT_MIN), true);
        }
    }
    if (old)
        release_ports(s, old, svc);
unlock:
    pthread_mutex_unlock(&s->mu);
    return KC_OK;
}

/* ---- Secret and ConfigMap ----------------------------------------------------------------- */

static void immutable_checks(ks_verr *v, const json_t *old, const json_t *obj, bool secret)
{
    if (!old || !json_is_true(json_object_get(old, "immutable")))
        return;
    static const char *const secret_fields[] = {"data", NULL};
    static const char *const cm_fields[] = {"data", "binaryData", NULL};
    const char *const *fields = secret ? secret_fields : cm_fields;
    for (size_t i = 0; fields[i]; i++) {
        json_t *a = json_object_get(old, fields[i]), *b = json_object_get(obj, fields[i]);
        bool ae = !a || json_object_size(a) == 0, be = !b || json_object_size(b) == 0;
        if (ae != be || (!ae && !json_equal(a, b)))
            ks_verr_forbidden(v, fields[i], "field is immutable when `immutable` is set");
    }
    if (!json_is_true(json_object_get(obj, "immutable")))
        ks_verr_forbidden(v, "immutable", "field is immutable when `immutable` is set");
}

static void key_checks(ks_verr *v, const json_t *map, const char *field, const json_t *other,
                       const char *other_name)
{
    const char *k;
    json_t *val;
    char p[600];
    ks_vmsg msgs[2];
    json_object_foreach((json_t *)map, k, val)
    {
        snprintf(p, sizeof(p), "%s[%s]", field, k);
        int n = ks_valid_config_key(k, msgs);
        for (int i = 0; i < n; i++)
            ks_verr_invalid_str(v, p, k, msgs[i]);
        if (other && json_object_get(other, k)) {
            char detail[64];
            snprintf(detail, sizeof(detail), "duplicate of key present in %s", other_name);
            ks_verr_invalid_str(v, p, k, detail);
        }
    }
}

/* Decoded size of the base64 values of map; KC_EBADREQUEST for one that is not base64 (the API
 * server fails decoding such a body). */
static kc_code b64_size(const char *kind, const json_t *map, size_t *total, kc_err *err)
{
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)map, k, val)
    {
        unsigned char *out = NULL;
        size_t n = 0;
        const char *s = json_string_value(val);
        if (!s || kc_base64_decode(s, json_string_length(val), &out, &n, NULL) != KC_OK)
            return kc_err_set(err, KC_EBADREQUEST,
                              "%s in version \"v1\" cannot be handled as a %s: illegal base64 data "
                              "in %s",
                              kind, kind, k);
        free(out);
        *total += n;
    }
    return KC_OK;
}

static kc_code secret_admit(const json_t *old, json_t *obj, ks_verr *v, kc_err *err)
{
    ks_default_set(obj, "type", json_string("Opaque"));
    /* stringData is write-only: merged into data (base64) and dropped. */
    json_t *sd = json_object_get(obj, "stringData");
    if (json_is_object(sd) && json_object_size(sd)) {
        json_t *data = ks_obj_child(obj, "data");
        const char *k;
        json_t *val;
        json_object_foreach(sd, k, val)
        {
            const char *s = json_string_value(val);
            char *enc = kc_base64_encode((const unsigned char *)(s ? s : ""),
                                         s ? json_string_length(val) : 0);
            if (!enc || !data)
                return kc_err_set(err, KC_ENOMEM, "Secret stringData: out of memory");
            json_object_set_new(data, k, json_string(enc));
            free(enc);
        }
    }
    json_object_del(obj, "stringData");
    const json_t *data = json_object_get(obj, "data");
    size_t total = 0;
    kc_code rc = b64_size("Secret", data, &total, err);
    if (rc != KC_OK)
        return rc;
    key_checks(v, data, "data", NULL, NULL);
    if (total > MAX_DATA)
        ks_verr_too_long(v, "data", MAX_DATA);
    const char *type = ks_str(obj, "type");
    static const struct {
        const char *type, *key;
    } required[] = {
        {"kubernetes.io/tls", "tls.crt"},
        {"kubernetes.io/tls", "tls.key"},
        {"kubernetes.io/dockerconfigjson", ".dockerconfigjson"},
        {"kubernetes.io/dockercfg", ".dockercfg"},
        {"kubernetes.io/ssh-auth", "ssh-privatekey"},
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (strcmp(type, required[i].type) == 0 && !json_object_get(data, required[i].key)) {
            char p[64];
            snprintf(p, sizeof(p), "data[%s]", required[i].key);
            ks_verr_required(v, p, "");
        }
    }
    if (strcmp(type, "kubernetes.io/service-account-token") == 0 &&
        !*ks_str(json_object_get(json_object_get(obj, "metadata"), "annotations"),
                 "kubernetes.io/service-account.name"))
        ks_verr_required(v, "metadata.annotations[kubernetes.io/service-account.name]", "");
    if (old && strcmp(ks_str(old, "type"), type) != 0)
        ks_verr_invalid_str(v, "type", type, "field is immutable");
    immutable_checks(v, old, obj, true);
    return KC_OK;
}

static kc_code configmap_admit(const json_t *old, json_t *obj, ks_verr *v, kc_err *err)
{
    const json_t *data = json_object_get(obj, "data");
    const json_t *bin = json_object_get(obj, "binaryData");
    size_t total = 0;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)data, k, val)
    {
        if (!json_is_string(val))
            return kc_err_set(err, KC_EBADREQUEST,
                              "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "
                              "json: cannot unmarshal %s into Go struct field ConfigMap.data of "
                              "type string",
                              json_is_number(val) ? "number" : "value");
        total += strlen(k) + json_string_length(val);
    }
    size_t bsize = 0;
    kc_code rc = b64_size("ConfigMap", bin, &bsize, err);
    if (rc != KC_OK)
        return rc;
    json_object_foreach((json_t *)bin, k, val)
    {
        total += strlen(k);
    }
    total += bsize;
    key_checks(v, data, "data", bin, "binaryData");
    key_checks(v, bin, "binaryData", data, "data");
    if (total > MAX_DATA)
        ks_verr_too_long(v, "", MAX_DATA);
    immutable_checks(v, old, obj, false);
    return KC_OK;
}

/* ---- RBAC --------------------------------------------------------------------------------- */

static void rules_check(ks_verr *v, const json_t *obj)
{
    const json_t *rules = json_object_get(obj, "rules");
    char p[64];
    for (size_t i = 0; i < json_array_size(rules); i++) {
        const json_t *r = json_array_get(rules, i);
        if (json_array_size(json_object_get(r, "verbs")) == 0) {
            snprintf(p, sizeof(p), "rules[%zu].verbs", i);
            ks_verr_required(v, p, "verbs must contain at least one value");
        }
        bool urls = json_array_size(json_object_get(r, "nonResourceURLs")) > 0;
        bool res = json_array_size(json_object_get(r, "resources")) > 0;
        if (!urls && !res && !json_object_get(obj, "aggregationRule")) {
            snprintf(p, sizeof(p), "rules[%zu].resources", i);
            ks_verr_required(v, p, "resource rules must supply at least one resource");
        }
    }
}

static void binding_check(ks_verr *v, const json_t *old, const json_t *obj, bool cluster)
{
    static const char *const role_kinds[] = {"Role", "ClusterRole", NULL};
    static const char *const cluster_kinds[] = {"ClusterRole", NULL};
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *kind = ks_str(ref, "kind");
    if (!*ks_str(ref, "name"))
        ks_verr_required(v, "roleRef.name", "");
    if (!(strcmp(kind, "ClusterRole") == 0 || (!cluster && strcmp(kind, "Role") == 0))) {
        char *q = ks_go_quote(kind);
        ks_verr_unsupported(v, "roleRef.kind", q, cluster ? cluster_kinds : role_kinds);
        free(q);
    }
    const json_t *subjects = json_object_get(obj, "subjects");
    char p[64];
    for (size_t i = 0; i < json_array_size(subjects); i++) {
        const json_t *s = json_array_get(subjects, i);
        const char *sk = ks_str(s, "kind");
        if (!*ks_str(s, "name")) {
            snprintf(p, sizeof(p), "subjects[%zu].name", i);
            ks_verr_required(v, p, "");
        }
        if (strcmp(sk, "ServiceAccount") != 0 && strcmp(sk, "User") != 0 &&
            strcmp(sk, "Group") != 0) {
            static const char *const kinds[] = {"ServiceAccount", "User", "Group", NULL};
            snprintf(p, sizeof(p), "subjects[%zu].kind", i);
            char *q = ks_go_quote(sk);
            ks_verr_unsupported(v, p, q, kinds);
            free(q);
        } else if (cluster && strcmp(sk, "ServiceAccount") == 0 && !*ks_str(s, "namespace")) {
            snprintf(p, sizeof(p), "subjects[%zu].namespace", i);
            ks_verr_required(v, p, "");
        }
    }
    if (old && !json_equal(json_object_get(old, "roleRef"), (json_t *)ref)) {
        const json_t *r = ref;
        char *g = ks_go_quote(ks_str(r, "apiGroup")), *k = ks_go_quote(ks_str(r, "kind"));
        char *n = ks_go_quote(ks_str(r, "name"));
        char gov[900];
        snprintf(gov, sizeof(gov), "rbac.RoleRef{APIGroup:%s, Kind:%s, Name:%s}", g ? g : "",
                 k ? k : "", n ? n : "");
        ks_verr_invalid(v, "roleRef", gov, "cannot change roleRef");
        free(g);
        free(k);
        free(n);
    }
}

/* ---- the rest ----------------------------------------------------------------------------- */

kc_code ks_core_admit(ks_sim *sim, const char *group, const char *kind, const json_t *old,
                      json_t *obj, ks_verr *v, kc_err *err)
{
    if (!*group) {
        if (strcmp(kind, "Service") == 0) {
            service_default(obj, old);
            service_validate(v, old, obj);
            if (ks_verr_count(v) == 0 && sim)
                return service_allocate(sim, old, obj, v, err);
            return KC_OK;
        }
        if (strcmp(kind, "Secret") == 0)
            return secret_admit(old, obj, v, err);
        if (strcmp(kind, "ConfigMap") == 0)
            return configmap_admit(old, obj, v, err);
        if (strcmp(kind, "Event") == 0) {
            /* An Event lives in its object's namespace; one about a cluster-scoped object in
             * "default" (or no namespace), as the API server's legacy validation requires. */
            const char *ens = ks_str(json_object_get(obj, "metadata"), "namespace");
            const char *ins = ks_str(json_object_get(obj, "involvedObject"), "namespace");
            ens = ens ? ens : "";
            ins = ins ? ins : "";
            if (*ins ? strcmp(ins, ens) != 0 : (*ens && strcmp(ens, "default") != 0))
                ks_verr_invalid_str(v, "involvedObject.namespace", ins,
                                    "does not match event.namespace");
            return KC_OK;
        }
        if (strcmp(kind, "Namespace") == 0) {
            json_t *md = ks_obj_child(obj, "metadata");
            json_t *labels = md ? ks_obj_child(md, "labels") : NULL;
            if (labels)
                json_object_set_new(labels, "kubernetes.io/metadata.name",
                                    json_string(ks_str(md, "name")));
            if (!old) {
                json_t *spec = ks_obj_child(obj, "spec");
                if (spec)
                    ks_default_set(spec, "finalizers", json_pack("[s]", "kubernetes"));
                json_t *status = ks_obj_child(obj, "status");
                if (status)
                    ks_default_set(status, "phase", json_string("Active"));
            }
            return KC_OK;
        }
        return KC_OK;
    }
    if (strcmp(group, "rbac.authorization.k8s.io") == 0) {
        if (strcmp(kind, "Role") == 0 || strcmp(kind, "ClusterRole") == 0)
            rules_check(v, obj);
        else
            binding_check(v, old, obj, strcmp(kind, "ClusterRoleBinding") == 0);
        return KC_OK;
    }
    if (strcmp(group, "scheduling.k8s.io") == 0 && strcmp(kind, "PriorityClass") == 0) {
        ks_default_set(obj, "preemptionPolicy", json_string("PreemptLowerPriority"));
        const json_t *val = json_object_get(obj, "value");
        if (json_is_integer(val) && json_integer_value(val) > 1000000000 &&
            strncmp(ks_str(json_object_get(obj, "metadata"), "name"), "system-", 7) != 0)
            ks_verr_forbidden(v, "value",
                              "maximum allowed value of a user defined priority is 1000000000");
        if (old && !json_equal(json_object_get(old, "value"), (json_t *)val))
            ks_verr_forbidden(v, "value", "may not be changed in an update.");
        return KC_OK;
    }
    return KC_OK;
}
