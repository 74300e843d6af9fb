/* ks_ctl_util: what every kubesim controller needs: store writes that remember their
 * resourceVersion (read-your-writes), core/v1 Events with repeat counting, field access, pod
 * readiness, template hashes, int-or-percent values and resource quantities. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "ks_ctl_int.h"

/* ---- writes ---- */

static void note_rv(ksc_worker *w, const json_t *out)
{
    uint64_t rv = ksc_rv(out);
    if (rv > w->wrote_rv)
        w->wrote_rv = rv;
}

kc_code ksc_create(ksc_worker *w, const ks_rtype *t, const char *ns, json_t *obj, json_t **out,
                   kc_err *err)
{
    json_t *o = NULL;
    kc_code rc = ks_create(w->c->st, t, ns, obj, &o, err);
    if (rc == KC_OK)
        note_rv(w, o);
    if (out)
        *out = o;
    else
        json_decref(o);
    return rc;
}

kc_code ksc_mutate(ksc_worker *w, const ks_rtype *t, const char *ns, const char *name,
                   ks_write_kind kind, ks_mutate_fn fn, void *ud, kc_err *err)
{
    json_t *o = NULL;
    kc_code rc = ks_mutate(w->c->st, t, ns, name, kind, fn, ud, &o, err);
    if (rc == KC_OK)
        note_rv(w, o);
    json_decref(o);
    return rc;
}

kc_code ksc_delete(ksc_worker *w, const ks_rtype *t, const char *ns, const char *name,
                   const char *uid, ks_propagation prop, long grace, kc_err *err)
{
    ks_delete_opts o = {.propagation = prop,
                        .precondition_uid = uid && *uid ? uid : NULL,
                        .grace_period_seconds = grace};
    json_t *out = NULL;
    kc_code rc = ks_delete(w->c->st, t, ns, name, &o, &out, err);
    if (rc == KC_OK) {
        note_rv(w, out);
        /* The removal's own resourceVersion is at most the store's now. */
        if (!out || ksc_rv(out) == 0) {
            uint64_t now = ks_store_rv(w->c->st);
            if (now > w->wrote_rv)
                w->wrote_rv = now;
        }
    }
    json_decref(out);
    return rc;
}

/* ---- Events ---- */

#define KSC_EVENT_CACHE_MAX 4096

struct ksc_recorder {
    pthread_mutex_t mu;
    kc_map *seen; /* "uid|type|reason|message" → malloc'd Event name */
};

kc_code ksc_recorder_new(ks_controllers *c, ksc_recorder **out, kc_err *err)
{
    ksc_recorder *r = calloc(1, sizeof *r);
    if (!r || !(r->seen = kc_map_new())) {
        free(r);
        return kc_err_set(err, KC_ENOMEM, "controllers: out of memory creating the recorder");
    }
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return KC_OK;
}

void ksc_recorder_free(ksc_recorder *r)
{
    if (!r)
        return;
    kc_map_free(r->seen, free);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static kc_code bump_count(void *ud, json_t *ev, kc_err *err)
{
    char now[32];
    ks_now_rfc3339(now);
    json_object_set_new(ev, "count", json_integer(ksc_int(ev, "count", 1) + 1));
    json_object_set_new(ev, "lastTimestamp", json_string(now));
    return KC_OK;
}

static json_t *new_event(const char *component, const json_t *obj, const char *ns, const char *type,
                         const char *reason, const char *msg)
{
    char now[32], name[400];
    ks_now_rfc3339(now);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, sizeof name, "%s.%llx", ksc_str(obj, "metadata.name"),
             (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    json_t *inv = json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", ksc_str(obj, "kind"), "name",
                            ksc_str(obj, "metadata.name"), "uid", ksc_str(obj, "metadata.uid"),
                            "apiVersion", ksc_str(obj, "apiVersion"), "resourceVersion",
                            ksc_str(obj, "metadata.resourceVersion"));
    if (inv && *ksc_str(obj, "metadata.namespace"))
        json_object_set_new(inv, "namespace", json_string(ksc_str(obj, "metadata.namespace")));
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:{s:s}, s:s, s:s, s:i, s:s, "
                     "s:n, s:s, s:s}",
                     "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", ns,
                     "involvedObject", inv, "reason", reason, "message", msg, "source", "component",
                     component, "firstTimestamp", now, "lastTimestamp", now, "count", 1, "type",
                     type, "eventTime", "reportingComponent", component, "reportingInstance", "");
}

void ksc_event(ks_controllers *c, const char *component, const json_t *obj, const char *type,
               const char *reason, const char *fmt, ...)
{
    const ks_rtype *t = ksc_type(c, KSC_K_EVENT);
    if (!t || !obj)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *ns = ksc_str(obj, "metadata.namespace");
    if (!*ns)
        ns = "default";
    char *key = NULL;
    if (asprintf(&key, "%s|%s|%s|%s", ksc_str(obj, "metadata.uid"), type, reason, msg) < 0)
        return;
    ksc_recorder *r = c->rec;
    kc_err err;
    kc_err_clear(&err);
    pthread_mutex_lock(&r->mu);
    const char *prev = kc_map_get(r->seen, key);
    if (prev && ks_mutate(c->st, t, ns, prev, KS_WRITE_MAIN, bump_count, NULL, NULL, &err) == KC_OK)
        goto out;
    json_t *ev = new_event(component, obj, ns, type, reason, msg);
    json_t *created = NULL;
    if (!ev || ks_create(c->st, t, ns, ev, &created, &err) != KC_OK) {
        kc_debug("controllers: event not recorded", "reason=%s error=\"%s\"", reason, err.msg);
        goto out;
    }
    if (kc_map_size(r->seen) >= KSC_EVENT_CACHE_MAX) {
        /* Forgetting means a later repeat starts a new Event, which is harmless. */
        kc_map_free(r->seen, free);
        r->seen = kc_map_new();
    }
    char *name = strdup(ksc_str(created, "metadata.name"));
    void *old = NULL;
    if (r->seen && name && kc_map_put(r->seen, key, name, &old) == KC_OK)
        free(old);
    else
        free(name);
    json_decref(created);
out:
    pthread_mutex_unlock(&r->mu);
    free(key);
}

/* ---- fields ---- */

json_t *ksc_at(const json_t *obj, const char *path)
{
    json_t *cur = (json_t *)obj;
    const char *p = path;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        cur = json_is_object(cur) ? json_object_getn(cur, p, n) : NULL;
        p += n;
        if (*p == '.')
            p++;
    }
    return cur;
}

const char *ksc_str(const json_t *obj, const char *path)
{
    const char *s = json_string_value(ksc_at(obj, path));
    return s ? s : "";
}

long long ksc_int(const json_t *obj, const char *path, long long dflt)
{
    json_t *v = ksc_at(obj, path);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return dflt;
}

bool ksc_deleting(const json_t *obj)
{
    return *ksc_str(obj, "metadata.deletionTimestamp") != '\0';
}

bool ksc_has_finalizer(const json_t *obj, const char *fin)
{
    json_t *f = ksc_at(obj, "metadata.finalizers");
    size_t i;
    json_t *v;
    json_array_foreach(f, i, v)
    {
        if (json_is_string(v) && !strcmp(json_string_value(v), fin))
            return true;
    }
    return false;
}

bool ksc_remove_finalizer(json_t *obj, const char *fin)
{
    json_t *f = ksc_at(obj, "metadata.finalizers");
    bool found = false;
    for (size_t i = 0; json_is_array(f) && i < json_array_size(f);) {
        json_t *v = json_array_get(f, i);
        if (json_is_string(v) && !strcmp(json_string_value(v), fin)) {
            json_array_remove(f, i);
            found = true;
        } else {
            i++;
        }
    }
    return found;
}

uint64_t ksc_rv(const json_t *obj)
{
    return strtoull(ksc_str(obj, "metadata.resourceVersion"), NULL, 10);
}

const json_t *ksc_controller_ref(const json_t *obj)
{
    json_t *refs = ksc_at(obj, "metadata.ownerReferences");
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r)
    {
        if (json_is_true(json_object_get(r, "controller")))
            return r;
    }
    return NULL;
}

json_t *ksc_owner_ref(const json_t *owner, const char *api_version, const char *kind)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", api_version, "kind", kind,
                     "name", ksc_str(owner, "metadata.name"), "uid", ksc_str(owner, "metadata.uid"),
                     "controller", 1, "blockOwnerDeletion", 1);
}

/* ---- pods ---- */

bool ksc_pod_terminated(const json_t *pod)
{
    const char *phase = ksc_str(pod, "status.phase");
    return !strcmp(phase, "Succeeded") || !strcmp(phase, "Failed");
}

bool ksc_pod_active(const json_t *pod)
{
    return !ksc_pod_terminated(pod) && !ksc_deleting(pod);
}

static const json_t *ready_condition(const json_t *pod)
{
    json_t *conds = ksc_at(pod, "status.conditions");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        if (!strcmp(ksc_str(c, "type"), "Ready"))
            return c;
    }
    return NULL;
}

bool ksc_pod_ready(const json_t *pod)
{
    const json_t *c = ready_condition(pod);
    return c && !strcmp(ksc_str(c, "status"), "True");
}

static bool same_str_at(const json_t *a, const json_t *b, const char *path)
{
    return !strcmp(ksc_str(a, path), ksc_str(b, path));
}

void ksc_pod_endpoints_changed(const json_t *old, const json_t *now, bool *pod_changed,
                               bool *labels_changed)
{
    *labels_changed =
        !kc_json_equal(ksc_at(old, "metadata.labels"), ksc_at(now, "metadata.labels")) ||
        !same_str_at(old, now, "spec.hostname") || !same_str_at(old, now, "spec.subdomain");
    *pod_changed = !same_str_at(old, now, "metadata.deletionTimestamp") ||
                   ksc_pod_ready(old) != ksc_pod_ready(now) ||
                   !same_str_at(old, now, "status.podIP"); /* podIPs[0], where a writer left
                                                             podIPs out */
    const json_t *a = ksc_at(old, "status.podIPs"), *b = ksc_at(now, "status.podIPs");
    size_t n = json_array_size(a);
    if (n != json_array_size(b))
        *pod_changed = true;
    for (size_t i = 0; i < n && !*pod_changed; i++)
        *pod_changed = !same_str_at(json_array_get(a, i), json_array_get(b, i), "ip");
}

bool ksc_pod_available(const json_t *pod, long long min_ready_s, long long *wait_ms)
{
    if (wait_ms)
        *wait_ms = 0;
    if (!ksc_pod_ready(pod))
        return false;
    if (min_ready_s <= 0)
        return true;
    long long since = ksc_parse_time(ksc_str(ready_condition(pod), "lastTransitionTime"));
    long long now = ksc_wall_s();
    if (since < 0 || since + min_ready_s <= now)
        return true;
    if (wait_ms)
        *wait_ms = (since + min_ready_s - now) * 1000;
    return false;
}

/* ---- hashes and numbers ---- */

json_t *ksc_normalized(const json_t *v)
{
    if (json_is_object(v)) {
        json_t *out = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (json_is_null(x) || (json_is_object(x) && json_object_size(x) == 0) ||
                (json_is_array(x) && json_array_size(x) == 0))
                continue;
            json_t *n = ksc_normalized(x);
            /* An object emptied by normalization is unset too. */
            if (json_is_object(n) && json_object_size(n) == 0)
                json_decref(n);
            else
                json_object_set_new(out, k, n);
        }
        return out;
    }
    if (json_is_array(v)) {
        json_t *out = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) json_array_append_new(out, ksc_normalized(x));
        return out;
    }
    return v ? json_deep_copy(v) : json_null();
}

void ksc_template_hash(const json_t *tmpl, long long collisions, char out[16])
{
    static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
    uint32_t h = 2166136261u;
    json_t *norm = ksc_normalized(tmpl);
    char *s = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(norm);
    for (const char *p = s ? s : ""; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    free(s);
    if (collisions > 0)
        for (int i = 0; i < 8; i++)
            h = (h ^ (uint8_t)(collisions >> (i * 8))) * 16777619u;
    char dec[16];
    snprintf(dec, sizeof dec, "%u", h);
    size_t i = 0;
    for (; dec[i]; i++)
        out[i] = alnum[(unsigned char)dec[i] % (sizeof alnum - 1)];
    out[i] = '\0';
}

long long ksc_int_or_percent(const json_t *v, long long total, bool round_up, long long dflt)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s || !*s)
        return dflt;
    char *end;
    long long n = strtoll(s, &end, 10);
    if (end == s)
        return dflt;
    if (*end != '%')
        return n;
    long long prod = n * total;
    return round_up ? (prod + 99) / 100 : prod / 100;
}

bool ksc_quantity_milli(const char *s, long long *out)
{
    static const struct {
        const char *suffix;
        long double mult;
    } sfx[] = {
        {"Ki", 1024.0L},
        {"Mi", 1048576.0L},
        {"Gi", 1073741824.0L},
        {"Ti", 1099511627776.0L},
        {"Pi", 1125899906842624.0L},
        {"Ei", 1152921504606846976.0L},
        {"n", 1e-9L},
        {"u", 1e-6L},
        {"m", 1e-3L},
        {"k", 1e3L},
        {"M", 1e6L},
        {"G", 1e9L},
        {"T", 1e12L},
        {"P", 1e15L},
        {"E", 1e18L},
        {"", 1.0L},
    };
    if (!s || !*s)
        return false;
    const char *p = s;
    int sign = 1;
    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    long double v = 0;
    bool digits = false;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        digits = true;
    }
    if (*p == '.') {
        long double scale = 0.1L;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10) {
            v += (*p - '0') * scale;
            digits = true;
        }
    }
    if (!digits)
        return false;
    long double mult = 0;
    if ((*p == 'e' || *p == 'E') && p[1]) {
        char *end;
        long e = strtol(p + 1, &end, 10);
        if (*end || end == p + 1 || e > 18 || e < -9)
            return false;
        mult = powl(10.0L, (long double)e);
    } else {
        for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
            if (!strcmp(p, sfx[i].suffix)) {
                mult = sfx[i].mult;
                break;
            }
        if (mult == 0)
            return false;
    }
    long double m = ceill(v * mult * 1000.0L - 1e-6L);
    if (m > (long double)LLONG_MAX)
        m = (long double)LLONG_MAX;
    *out = sign * (long long)m;
    return true;
}

bool ksc_json_quantity(const json_t *v, long long *out)
{
    if (json_is_string(v))
        return ksc_quantity_milli(json_string_value(v), out);
    if (json_is_integer(v)) {
        *out = json_integer_value(v) * 1000;
        return true;
    }
    if (json_is_real(v)) {
        *out = (long long)ceil(json_real_value(v) * 1000.0 - 1e-9);
        return true;
    }
    return false;
}

long long ksc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long ksc_wall_s(void)
{
    return (long long)time(NULL);
}

long long ksc_parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end)
        return -1;
    return (long long)timegm(&tm);
}

/* ---- objects from templates, conditions ---- */

json_t *ksc_pod_from_template(const json_t *owner, const json_t *tmpl, const char *kind)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s-", ksc_str(owner, "metadata.name"));
    json_t *meta = json_pack("{s:s, s:s, s:[o]}", "generateName", prefix, "namespace",
                             ksc_str(owner, "metadata.namespace"), "ownerReferences",
                             ksc_owner_ref(owner, "apps/v1", kind));
    json_t *labels = ksc_at(tmpl, "metadata.labels"), *ann = ksc_at(tmpl, "metadata.annotations");
    json_t *fins = ksc_at(tmpl, "metadata.finalizers");
    if (meta && json_is_object(labels))
        json_object_set_new(meta, "labels", json_deep_copy(labels));
    if (meta && json_is_object(ann))
        json_object_set_new(meta, "annotations", json_deep_copy(ann));
    if (meta && json_is_array(fins))
        json_object_set_new(meta, "finalizers", json_deep_copy(fins));
    json_t *spec = ksc_at(tmpl, "spec");
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                     "spec", spec ? json_deep_copy(spec) : json_object());
}

void ksc_set_condition(json_t *status, const char *type, const char *cstatus, const char *reason,
                       const char *message, bool with_message, bool with_update)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    json_t *cur = NULL;
    size_t i, at = json_array_size(conds);
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        if (!strcmp(ksc_str(c, "type"), type)) {
            cur = c;
            at = i;
            break;
        }
    }
    if (cur && !strcmp(ksc_str(cur, "status"), cstatus) &&
        !strcmp(ksc_str(cur, "reason"), reason) &&
        (!with_message || !strcmp(ksc_str(cur, "message"), message)))
        return;
    char now[32];
    ks_now_rfc3339(now);
    const char *transition = now;
    if (cur && !strcmp(ksc_str(cur, "status"), cstatus) && *ksc_str(cur, "lastTransitionTime"))
        transition = ksc_str(cur, "lastTransitionTime");
    json_t *n = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status", cstatus,
                          "lastTransitionTime", transition, "reason", reason, "message", message);
    if (n && with_update)
        json_object_set_new(n, "lastUpdateTime", json_string(now));
    if (!n)
        return;
    if (cur)
        json_array_set_new(conds, at, n);
    else
        json_array_append_new(conds, n);
}
