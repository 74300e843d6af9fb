/* ks_table_cells: the computed Table cells of built-in types ("@pod.status", "@svc.ports" ...),
 * reproducing what kube's Go printers show for `kubectl get` (names documented in ks_types.h). */
#include "ks_server_int.h"
#include "ks_table_int.h"

#include "kc_selector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE "<none>"

/* A growable comma list. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *sep, const char *text)
{
    size_t need = b->len + strlen(sep) + strlen(text) + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need)
            cap *= 2;
        char *n = realloc(b->s, cap);
        if (!n)
            return;
        b->s = n;
        b->cap = cap;
    }
    b->len += (size_t)snprintf(b->s + b->len, b->cap - b->len, "%s%s", b->len ? sep : "", text);
}

/* The list as a JSON string (empty → `empty`), freeing it. */
static json_t *sb_take(strbuf *b, const char *empty)
{
    json_t *out = json_string(b->len ? b->s : empty);
    free(b->s);
    return out;
}

static const char *str_at(const json_t *obj, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(obj, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return json_string_value(v);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static json_t *age_of(const char *ts, time_t now)
{
    char buf[32];
    return json_string(ks_human_age(buf, sizeof(buf), ts, now));
}

static void text_of(const json_t *v, char *buf, size_t size)
{
    if (json_is_string(v)) {
        snprintf(buf, size, "%s", json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, size, "%s", s ? s : "");
    free(s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- generic ---- */

static json_t *c_map(const json_t *obj, const char *path)
{
    json_t *holder = NULL;
    const json_t *m = ks_jsonpath_first(obj, path, &holder);
    strbuf b = {0};
    size_t n = json_is_object(m) ? json_object_size(m) : 0;
    const char **keys = n ? calloc(n, sizeof(*keys)) : NULL;
    size_t k = 0;
    const char *key;
    json_t *v;
    if (keys) {
        json_object_foreach((json_t *)m, key, v)
        {
            keys[k++] = key;
        }
        qsort(keys, k, sizeof(*keys), cmp_str);
    }
    for (size_t i = 0; i < k; i++) {
        char val[512], kv[1024];
        text_of(json_object_get(m, keys[i]), val, sizeof(val));
        snprintf(kv, sizeof(kv), "%s=%s", keys[i], val);
        sb_add(&b, ",", kv);
    }
    free(keys);
    json_decref(holder);
    return sb_take(&b, NONE);
}

static json_t *c_selector(const json_t *obj, const char *path)
{
    json_t *holder = NULL;
    const json_t *sel = ks_jsonpath_first(obj, path, &holder);
    kc_label_selector *ls = NULL;
    json_t *out = NULL;
    if (sel && kc_label_selector_from_json(sel, &ls, NULL) == KC_OK) {
        char *s = kc_label_selector_string(ls);
        out = json_string(s && s[0] ? s : NONE);
        free(s);
        kc_label_selector_free(ls);
    }
    json_decref(holder);
    return out ? out : json_string(NONE);
}

static json_t *c_join(const json_t *obj, const char *path)
{
    json_t *all = ks_jsonpath_eval(obj, path);
    strbuf b = {0};
    size_t i;
    json_t *v;
    json_array_foreach(all, i, v)
    {
        char t[512];
        text_of(v, t, sizeof(t));
        sb_add(&b, ",", t);
    }
    json_decref(all);
    return sb_take(&b, NONE);
}

/* Splits "p1,p2" at the comma that starts a new JSONPath (",."). */
static int split_paths(const char *arg, char out[][256], int max)
{
    int n = 0;
    const char *s = arg;
    while (*s && n < max) {
        const char *e = strstr(s, ",.");
        size_t len = e ? (size_t)(e - s) : strlen(s);
        snprintf(out[n++], 256, "%.*s", (int)(len < 255 ? len : 255), s);
        s = e ? e + 1 : s + len;
    }
    return n;
}

static json_t *c_count(const json_t *obj, const char *arg)
{
    char paths[4][256];
    int n = split_paths(arg, paths, 4);
    json_int_t total = 0;
    for (int i = 0; i < n; i++) {
        json_t *holder = NULL;
        const json_t *v = ks_jsonpath_first(obj, paths[i], &holder);
        total += (json_int_t)(json_is_object(v)  ? json_object_size(v)
                              : json_is_array(v) ? json_array_size(v)
                                                 : 0);
        json_decref(holder);
    }
    return json_integer(total);
}

static json_t *c_ratio(const json_t *obj, const char *arg)
{
    char paths[2][256];
    if (split_paths(arg, paths, 2) != 2)
        return NULL;
    json_int_t v[2];
    for (int i = 0; i < 2; i++) {
        json_t *holder = NULL;
        v[i] = json_integer_value(ks_jsonpath_first(obj, paths[i], &holder));
        json_decref(holder);
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%lld/%lld", (long long)v[0], (long long)v[1]);
    return json_string(buf);
}

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s + 32);
}

static json_t *c_owner(const json_t *obj)
{
    json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r)
    {
        if (!json_is_true(json_object_get(r, "controller")))
            continue;
        char kind[128], grp[128] = "", buf[512];
        snprintf(kind, sizeof(kind), "%s", nz(str_at(r, "kind", NULL, NULL)));
        lower(kind);
        const char *av = str_at(r, "apiVersion", NULL, NULL);
        const char *slash = av ? strchr(av, '/') : NULL;
        if (slash)
            snprintf(grp, sizeof(grp), ".%.*s", (int)(slash - av), av);
        const char *name = str_at(r, "name", NULL, NULL);
        snprintf(buf, sizeof(buf), "%s%s/%s", kind, grp, name ? name : "");
        return json_string(buf);
    }
    return json_string(NONE);
}

/* ---- pods ---- */

static json_t *c_pod_ready(const json_t *pod)
{
    json_t *cs = json_object_get(json_object_get(pod, "status"), "containerStatuses");
    size_t total = json_array_size(json_object_get(json_object_get(pod, "spec"), "containers"));
    size_t ready = 0, i;
    json_t *c;
    json_array_foreach(cs, i, c)
    {
        if (json_is_true(json_object_get(c, "ready")))
            ready++;
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%zu/%zu", ready, total);
    return json_string(buf);
}

static void terminated_reason(const json_t *term, const char *prefix, char *out, size_t size)
{
    const char *reason = str_at(term, "reason", NULL, NULL);
    if (reason && reason[0])
        snprintf(out, size, "%s%s", prefix, reason);
    else if (json_integer_value(json_object_get(term, "signal")))
        snprintf(out, size, "%sSignal:%lld", prefix,
                 (long long)json_integer_value(json_object_get(term, "signal")));
    else
        snprintf(out, size, "%sExitCode:%lld", prefix,
                 (long long)json_integer_value(json_object_get(term, "exitCode")));
}

static json_t *c_pod_status(const json_t *pod)
{
    json_t *status = json_object_get(pod, "status");
    char reason[256];
    const char *phase = str_at(status, "phase", NULL, NULL);
    const char *sr = str_at(status, "reason", NULL, NULL);
    snprintf(reason, sizeof(reason), "%s", sr && sr[0] ? sr : phase ? phase : "");
    bool initializing = false;
    json_t *ics = json_object_get(status, "initContainerStatuses");
    size_t ninit = json_array_size(json_object_get(json_object_get(pod, "spec"), "initContainers"));
    size_t i;
    json_t *c;
    json_array_foreach(ics, i, c)
    {
        json_t *state = json_object_get(c, "state");
        json_t *term = json_object_get(state, "terminated");
        const char *wr = str_at(state, "waiting", "reason", NULL);
        if (term && json_integer_value(json_object_get(term, "exitCode")) == 0)
            continue;
        if (term)
            terminated_reason(term, "Init:", reason, sizeof(reason));
        else if (wr && wr[0] && strcmp(wr, "PodInitializing") != 0)
            snprintf(reason, sizeof(reason), "Init:%s", wr);
        else
            snprintf(reason, sizeof(reason), "Init:%zu/%zu", i, ninit);
        initializing = true;
        break;
    }
    if (!initializing) {
        bool running = false;
        json_t *cs = json_object_get(status, "containerStatuses");
        for (size_t k = json_array_size(cs); k-- > 0;) {
            json_t *st = json_object_get(json_array_get(cs, k), "state");
            const char *wr = str_at(st, "waiting", "reason", NULL);
            json_t *term = json_object_get(st, "terminated");
            if (wr && wr[0])
                snprintf(reason, sizeof(reason), "%s", wr);
            else if (term)
                terminated_reason(term, "", reason, sizeof(reason));
            else if (json_object_get(st, "running") &&
                     json_is_true(json_object_get(json_array_get(cs, k), "ready")))
                running = true;
        }
        if (!strcmp(reason, "Completed") && running) {
            bool ready = false;
            json_t *conds = json_object_get(status, "conditions");
            json_array_foreach(conds, i, c)
            {
                ready = ready || (!strcmp(nz(str_at(c, "type", NULL, NULL)), "Ready") &&
                                  !strcmp(nz(str_at(c, "status", NULL, NULL)), "True"));
            }
            snprintf(reason, sizeof(reason), "%s", ready ? "Running" : "NotReady");
        }
    }
    json_t *meta = json_object_get(pod, "metadata");
    json_t *dts = json_object_get(meta, "deletionTimestamp");
    if (dts && !json_is_null(dts))
        snprintf(reason, sizeof(reason), "%s",
                 sr && !strcmp(sr, "NodeLost") ? "Unknown" : "Terminating");
    return json_string(reason);
}

static json_t *c_pod_restarts(const json_t *pod, time_t now)
{
    json_t *status = json_object_get(pod, "status");
    long long restarts = 0;
    time_t last = 0;
    const char *lists[] = {"initContainerStatuses", "containerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(status, lists[l]), i, c)
        {
            restarts += json_integer_value(json_object_get(c, "restartCount"));
            time_t t;
            if (ks_parse_rfc3339(str_at(c, "lastState", "terminated", "finishedAt"), &t) &&
                t > last)
                last = t;
        }
    }
    char buf[64], age[32];
    if (restarts > 0 && last > 0)
        snprintf(buf, sizeof(buf), "%lld (%s ago)", restarts,
                 ks_human_duration(age, sizeof(age), (long long)(now - last)));
    else
        snprintf(buf, sizeof(buf), "%lld", restarts);
    return json_string(buf);
}

static json_t *c_pod_gates(const json_t *pod)
{
    json_t *gates = json_object_get(json_object_get(pod, "spec"), "readinessGates");
    if (json_array_size(gates) == 0)
        return json_string(NONE);
    json_t *conds = json_object_get(json_object_get(pod, "status"), "conditions");
    size_t ok = 0, i, k;
    json_t *g, *c;
    json_array_foreach(gates, i, g)
    {
        const char *want = str_at(g, "conditionType", NULL, NULL);
        json_array_foreach(conds, k, c)
        {
            const char *ty = str_at(c, "type", NULL, NULL), *st = str_at(c, "status", NULL, NULL);
            if (want && ty && st && !strcmp(want, ty) && !strcmp(st, "True"))
                ok++;
        }
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%zu/%zu", ok, json_array_size(gates));
    return json_string(buf);
}

/* ---- nodes ---- */

static json_t *c_node_status(const json_t *node)
{
    const char *st = "Unknown";
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c)
    {
        if (strcmp(nz(str_at(c, "type", NULL, NULL)), "Ready") != 0)
            continue;
        const char *v = nz(str_at(c, "status", NULL, NULL));
        st = !strcmp(v, "True") ? "Ready" : !strcmp(v, "False") ? "NotReady" : "Unknown";
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%s%s", st,
             json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"))
                 ? ",SchedulingDisabled"
                 : "");
    return json_string(buf);
}

static json_t *c_node_roles(const json_t *node)
{
    json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *roles[64];
    size_t n = 0;
    const char *k;
    json_t *v;
    static const char pfx[] = "node-role.kubernetes.io/";
    json_object_foreach(labels, k, v)
    {
        const char *role = NULL;
        if (!strncmp(k, pfx, sizeof(pfx) - 1) && k[sizeof(pfx) - 1])
            role = k + sizeof(pfx) - 1;
        else if (!strcmp(k, "kubernetes.io/role") && json_string_value(v) &&
                 json_string_value(v)[0])
            role = json_string_value(v);
        if (!role || n == 64)
            continue;
        bool dup = false;
        for (size_t i = 0; i < n; i++)
            dup = dup || !strcmp(roles[i], role);
        if (!dup)
            roles[n++] = role;
    }
    qsort(roles, n, sizeof(*roles), cmp_str);
    strbuf b = {0};
    for (size_t i = 0; i < n; i++)
        sb_add(&b, ",", roles[i]);
    return sb_take(&b, NONE);
}

static json_t *c_node_ip(const json_t *node, const char *type)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "addresses"), i, a)
    {
        if (!strcmp(nz(str_at(a, "type", NULL, NULL)), type))
            return json_string(nz(str_at(a, "address", NULL, NULL)));
    }
    return json_string(NONE);
}

/* ---- services, endpoints ---- */

static json_t *c_svc_externalip(const json_t *svc)
{
    json_t *spec = json_object_get(svc, "spec");
    const char *type = str_at(spec, "type", NULL, NULL);
    strbuf b = {0};
    if (type && !strcmp(type, "ExternalName"))
        return json_string(nz(str_at(spec, "externalName", NULL, NULL)));
    size_t i;
    json_t *v;
    bool lb = type && !strcmp(type, "LoadBalancer");
    if (lb) {
        json_array_foreach(
            json_object_get(json_object_get(json_object_get(svc, "status"), "loadBalancer"),
                            "ingress"),
            i, v)
        {
            const char *ip = str_at(v, "ip", NULL, NULL), *host = str_at(v, "hostname", NULL, NULL);
            if (ip && ip[0])
                sb_add(&b, ",", ip);
            else if (host && host[0])
                sb_add(&b, ",", host);
        }
    }
    json_array_foreach(json_object_get(spec, "externalIPs"), i, v)
    {
        sb_add(&b, ",", nz(json_string_value(v)));
    }
    return sb_take(&b, lb ? "<pending>" : NONE);
}

static json_t *c_svc_ports(const json_t *svc)
{
    strbuf b = {0};
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(json_object_get(svc, "spec"), "ports"), i, p)
    {
        const char *proto = str_at(p, "protocol", NULL, NULL);
        long long port = json_integer_value(json_object_get(p, "port"));
        long long np = json_integer_value(json_object_get(p, "nodePort"));
        char buf[96];
        if (np)
            snprintf(buf, sizeof(buf), "%lld:%lld/%s", port, np, proto ? proto : "TCP");
        else
            snprintf(buf, sizeof(buf), "%lld/%s", port, proto ? proto : "TCP");
        sb_add(&b, ",", buf);
    }
    return sb_take(&b, NONE);
}

static json_t *c_endpoints(const json_t *ep)
{
    strbuf b = {0};
    size_t shown = 0, total = 0, i, k, j;
    json_t *sub, *port, *addr;
    json_array_foreach(json_object_get(ep, "subsets"), i, sub)
    {
        json_t *ports = json_object_get(sub, "ports");
        json_t *addrs = json_object_get(sub, "addresses");
        if (json_array_size(ports) == 0) {
            json_array_foreach(addrs, j, addr)
            {
                total++;
                if (shown < 3) {
                    sb_add(&b, ",", nz(str_at(addr, "ip", NULL, NULL)));
                    shown++;
                }
            }
            continue;
        }
        json_array_foreach(ports, k, port)
        {
            json_array_foreach(addrs, j, addr)
            {
                total++;
                if (shown < 3) {
                    char buf[128];
                    snprintf(buf, sizeof(buf), "%s:%lld", nz(str_at(addr, "ip", NULL, NULL)),
                             (long long)json_integer_value(json_object_get(port, "port")));
                    sb_add(&b, ",", buf);
                    shown++;
                }
            }
        }
    }
    if (total > shown) {
        char more[64];
        snprintf(more, sizeof(more), " + %zu more...", total - shown);
        sb_add(&b, "", more);
    }
    return sb_take(&b, NONE);
}

/* ---- events ---- */

static const char *first_ts(const json_t *ev, const char *const *fields)
{
    for (size_t i = 0; fields[i]; i++) {
        const char *v = !strcmp(fields[i], "series.lastObservedTime")
                            ? str_at(ev, "series", "lastObservedTime", NULL)
                        : !strcmp(fields[i], "metadata.creationTimestamp")
                            ? str_at(ev, "metadata", "creationTimestamp", NULL)
                            : str_at(ev, fields[i], NULL, NULL);
        if (v && v[0])
            return v;
    }
    return NULL;
}

static json_t *c_event(const json_t *ev, const char *what, time_t now)
{
    json_t *io = json_object_get(ev, "involvedObject");
    if (!io)
        io = json_object_get(ev, "regarding");
    if (!strcmp(what, "lastseen")) {
        static const char *const f[] = {"series.lastObservedTime",    "lastTimestamp",
                                        "deprecatedLastTimestamp",    "eventTime",
                                        "metadata.creationTimestamp", NULL};
        return age_of(first_ts(ev, f), now);
    }
    if (!strcmp(what, "firstseen")) {
        static const char *const f[] = {"firstTimestamp", "deprecatedFirstTimestamp", "eventTime",
                                        "metadata.creationTimestamp", NULL};
        return age_of(first_ts(ev, f), now);
    }
    if (!strcmp(what, "object")) {
        char kind[128], buf[512];
        snprintf(kind, sizeof(kind), "%s", nz(str_at(io, "kind", NULL, NULL)));
        lower(kind);
        snprintf(buf, sizeof(buf), "%s/%s", kind, nz(str_at(io, "name", NULL, NULL)));
        return json_string(buf);
    }
    if (!strcmp(what, "subobject"))
        return json_string(nz(str_at(io, "fieldPath", NULL, NULL)));
    if (!strcmp(what, "source")) {
        const char *comp = str_at(ev, "source", "component", NULL);
        const char *host = str_at(ev, "source", "host", NULL);
        if (!comp || !comp[0]) {
            comp = str_at(ev, "reportingController", NULL, NULL);
            host = str_at(ev, "reportingInstance", NULL, NULL);
        }
        if (!comp || !comp[0])
            return json_string(NONE);
        char buf[512];
        if (host && host[0])
            snprintf(buf, sizeof(buf), "%s, %s", comp, host);
        else
            snprintf(buf, sizeof(buf), "%s", comp);
        return json_string(buf);
    }
    if (!strcmp(what, "count")) {
        json_t *c = json_object_get(ev, "count");
        if (!json_integer_value(c))
            c = json_object_get(json_object_get(ev, "series"), "count");
        if (!json_integer_value(c))
            c = json_object_get(ev, "deprecatedCount");
        return json_integer(json_integer_value(c) ? json_integer_value(c) : 1);
    }
    return NULL;
}

/* ---- rbac, jobs, pvcs, quotas ---- */

static json_t *c_binding(const json_t *b, const char *what)
{
    if (!strcmp(what, "role")) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s/%s", nz(str_at(b, "roleRef", "kind", NULL)),
                 nz(str_at(b, "roleRef", "name", NULL)));
        return json_string(buf);
    }
    if (strncmp(what, "subjects:", 9) != 0)
        return NULL;
    const char *kind = what + 9;
    strbuf sb = {0};
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(b, "subjects"), i, s)
    {
        if (strcmp(nz(str_at(s, "kind", NULL, NULL)), kind) != 0)
            continue;
        char buf[512];
        if (!strcmp(kind, "ServiceAccount"))
            snprintf(buf, sizeof(buf), "%s/%s", nz(str_at(s, "namespace", NULL, NULL)),
                     nz(str_at(s, "name", NULL, NULL)));
        else
            snprintf(buf, sizeof(buf), "%s", nz(str_at(s, "name", NULL, NULL)));
        sb_add(&sb, ",", buf);
    }
    return sb_take(&sb, "");
}

static json_t *c_job(const json_t *job, const char *what, time_t now)
{
    json_t *status = json_object_get(job, "status"), *spec = json_object_get(job, "spec");
    if (!strcmp(what, "status")) {
        static const char *const order[] = {"Complete", "Failed", "Suspended", "FailureTarget"};
        for (size_t o = 0; o < 4; o++) {
            size_t i;
            json_t *c;
            json_array_foreach(json_object_get(status, "conditions"), i, c)
            {
                if (!strcmp(nz(str_at(c, "type", NULL, NULL)), order[o]) &&
                    !strcmp(nz(str_at(c, "status", NULL, NULL)), "True"))
                    return json_string(order[o]);
            }
        }
        return json_string("Running");
    }
    if (!strcmp(what, "completions")) {
        long long ok = json_integer_value(json_object_get(status, "succeeded"));
        json_t *comp = json_object_get(spec, "completions");
        long long par = json_integer_value(json_object_get(spec, "parallelism"));
        char buf[96];
        if (json_is_integer(comp))
            snprintf(buf, sizeof(buf), "%lld/%lld", ok, (long long)json_integer_value(comp));
        else if (par > 1)
            snprintf(buf, sizeof(buf), "%lld/1 of %lld", ok, par);
        else
            snprintf(buf, sizeof(buf), "%lld/1", ok);
        return json_string(buf);
    }
    if (!strcmp(what, "duration")) {
        time_t start, end = now;
        if (!ks_parse_rfc3339(str_at(status, "startTime", NULL, NULL), &start))
            return json_string("");
        ks_parse_rfc3339(str_at(status, "completionTime", NULL, NULL), &end);
        char buf[32];
        return json_string(ks_human_duration(buf, sizeof(buf), (long long)(end - start)));
    }
    return NULL;
}

static json_t *c_pvc_modes(const json_t *pvc)
{
    static const char *const map[][2] = {{"ReadWriteOnce", "RWO"},
                                         {"ReadOnlyMany", "ROX"},
                                         {"ReadWriteMany", "RWX"},
                                         {"ReadWriteOncePod", "RWOP"}};
    strbuf b = {0};
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(json_object_get(pvc, "status"), "accessModes"), i, m)
    {
        for (size_t k = 0; k < 4; k++)
            if (!strcmp(nz(json_string_value(m)), map[k][0]))
                sb_add(&b, ",", map[k][1]);
    }
    return sb_take(&b, "");
}

static json_t *c_quota(const json_t *q, bool limits)
{
    json_t *hard = json_object_get(json_object_get(q, "status"), "hard");
    json_t *used = json_object_get(json_object_get(q, "status"), "used");
    size_t n = json_object_size(hard), k = 0;
    const char **keys = n ? calloc(n, sizeof(*keys)) : NULL;
    const char *key;
    json_t *v;
    if (keys) {
        json_object_foreach(hard, key, v)
        {
            if ((strncmp(key, "limits.", 7) == 0) == limits)
                keys[k++] = key;
        }
        qsort(keys, k, sizeof(*keys), cmp_str);
    }
    strbuf b = {0};
    for (size_t i = 0; i < k; i++) {
        char h[128], u[128] = "0", buf[512];
        text_of(json_object_get(hard, keys[i]), h, sizeof(h));
        if (json_object_get(used, keys[i]))
            text_of(json_object_get(used, keys[i]), u, sizeof(u));
        snprintf(buf, sizeof(buf), "%s: %s/%s", keys[i], u, h);
        sb_add(&b, ", ", buf);
    }
    free(keys);
    return sb_take(&b, "");
}

/* ---- dispatch ---- */

json_t *ks_table_computed(const char *name, const json_t *obj, time_t now)
{
    const char *ts = str_at(obj, "metadata", "creationTimestamp", NULL);
    if (!strcmp(name, "age"))
        return age_of(ts, now);
    if (!strcmp(name, "created"))
        return ts ? json_string(ts) : NULL;
    if (!strncmp(name, "map:", 4))
        return c_map(obj, name + 4);
    if (!strncmp(name, "selector:", 9))
        return c_selector(obj, name + 9);
    if (!strncmp(name, "join:", 5))
        return c_join(obj, name + 5);
    if (!strncmp(name, "count:", 6))
        return c_count(obj, name + 6);
    if (!strncmp(name, "ratio:", 6))
        return c_ratio(obj, name + 6);
    if (!strcmp(name, "owner"))
        return c_owner(obj);
    if (!strcmp(name, "pod.ready"))
        return c_pod_ready(obj);
    if (!strcmp(name, "pod.status"))
        return c_pod_status(obj);
    if (!strcmp(name, "pod.restarts"))
        return c_pod_restarts(obj, now);
    if (!strcmp(name, "pod.readinessgates"))
        return c_pod_gates(obj);
    if (!strcmp(name, "node.status"))
        return c_node_status(obj);
    if (!strcmp(name, "node.roles"))
        return c_node_roles(obj);
    if (!strcmp(name, "node.internalip"))
        return c_node_ip(obj, "InternalIP");
    if (!strcmp(name, "node.externalip"))
        return c_node_ip(obj, "ExternalIP");
    if (!strcmp(name, "svc.externalip"))
        return c_svc_externalip(obj);
    if (!strcmp(name, "svc.ports"))
        return c_svc_ports(obj);
    if (!strcmp(name, "endpoints"))
        return c_endpoints(obj);
    if (!strncmp(name, "event.", 6))
        return c_event(obj, name + 6, now);
    if (!strncmp(name, "binding.", 8))
        return c_binding(obj, name + 8);
    if (!strncmp(name, "job.", 4))
        return c_job(obj, name + 4, now);
    if (!strcmp(name, "pvc.accessmodes"))
        return c_pvc_modes(obj);
    if (!strcmp(name, "quota.request"))
        return c_quota(obj, false);
    if (!strcmp(name, "quota.limit"))
        return c_quota(obj, true);
    return NULL;
}
