/* ks_fault: kubesim's fault injection: the rule-set parser, matching and counters, the
 * /kubesim/v1/faults endpoint, the injected replies, and the refusal thread that takes the
 * listeners down for a while and brings them back on the same ports. */
#include "ks_fault.h"

#include "kc_log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REFUSE_MIN_DELAY_MS 250 /* a refusal due at once still lets the installing reply out */

typedef enum fault_action {
    FA_ERROR = 0,
    FA_DELAY,
    FA_CUTWATCH,
    FA_GONE,
    FA_REFUSE,
    FA_CONFLICT,
} fault_action;

static const char *const action_names[] = {"error", "delay",  "cutWatch",
                                           "gone",  "refuse", "conflict"};
#define N_ACTIONS (sizeof(action_names) / sizeof(action_names[0]))

static const char *const verb_names[] = {"get",    "list",  "watch",  "create",
                                         "update", "patch", "delete", "deletecollection"};
#define N_VERBS (sizeof(verb_names) / sizeof(verb_names[0]))

typedef struct fault_rule {
    char *name;
    char *ua, *user, *ns; /* NULL: any */
    unsigned verbs;       /* bit per verb_names entry; 0: any */
    char **resources;
    size_t nres;
    int64_t every;      /* 0 when probability is used */
    double probability; /* 0 when every is used */
    uint64_t rng;
    int64_t after_ms, seconds_ms; /* seconds_ms 0: until cleared (refuse: the outage length) */
    fault_action action;
    int code, retry_after; /* retry_after -1: no header */
    char *message;         /* error: NULL for the default */
    int64_t delay_ms, after_events;
    bool timer; /* refuse: begins at activation, not on a request */
    bool fired; /* refuse: done (once per installation) */
    json_t *orig;
    uint64_t matched, injected;
} fault_rule;

struct ks_fault_set {
    fault_rule *rules;
    size_t n;
};

struct ks_faults {
    struct ks_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ks_fault_set *set;
    int64_t installed_ms;
    atomic_uint gen;  /* bumped by every install and clear */
    atomic_bool any;  /* a non-empty set is installed */
    pthread_t thread; /* the refusal thread */
    bool thread_started;
    bool shutdown;
    /* the refusal: pending (scheduled for start_ms) or active (listeners down until end_ms) */
    bool pending, active;
    int64_t start_ms, dur_ms;
    unsigned refuse_gen; /* the set the refusal's rule belongs to */
    size_t refuse_rule;
};

/* The request (or watch stream) facts rules match on. */
typedef struct match_info {
    const char *user, *ua, *verb, *resource, *group, *sub, *ns;
} match_info;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------------
 * parsing
 */

static void rule_clear(fault_rule *fr)
{
    free(fr->name);
    free(fr->ua);
    free(fr->user);
    free(fr->ns);
    for (size_t i = 0; i < fr->nres; i++)
        free(fr->resources[i]);
    free(fr->resources);
    free(fr->message);
    json_decref(fr->orig);
    memset(fr, 0, sizeof(*fr));
}

void ks_fault_set_free(ks_fault_set *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; i < fs->n; i++)
        rule_clear(&fs->rules[i]);
    free(fs->rules);
    free(fs);
}

size_t ks_fault_set_len(const ks_fault_set *fs)
{
    return fs ? fs->n : 0;
}

static bool key_in(const char *key, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* Rejects keys of obj not in keys; `where` is the object's path ("rules[0]"). */
static kc_code check_keys(const json_t *obj, const char *where, const char *const *keys,
                          const char *want, kc_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        (void)v;
        if (!key_in(key, keys))
            return kc_err_set(err, KC_EBADREQUEST, "%s%s%s: unknown field (want %s)", where,
                              where[0] ? "." : "", key, want);
    }
    return KC_OK;
}

/* An optional string field: *out malloc'd copy or NULL when absent. */
static kc_code get_string(const json_t *obj, const char *where, const char *key, bool nonempty,
                          char **out, kc_err *err)
{
    *out = NULL;
    json_t *v = json_object_get(obj, key);
    if (!v)
        return KC_OK;
    if (!json_is_string(v))
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: want a string", where, key);
    if (nonempty && json_string_length(v) == 0)
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: must not be empty", where, key);
    if (json_string_length(v) > 1024)
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: too long (at most 1024 characters)", where,
                          key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: must not contain NUL characters", where,
                          key);
    *out = strdup(json_string_value(v));
    if (!*out)
        return kc_err_set(err, KC_ENOMEM, "%s.%s: out of memory", where, key);
    return KC_OK;
}

/* An optional integer field in [lo, hi]; *present tells whether it was given. */
static kc_code get_int(const json_t *obj, const char *where, const char *key, int64_t lo,
                       int64_t hi, int64_t *out, bool *present, kc_err *err)
{
    json_t *v = json_object_get(obj, key);
    *present = v != NULL;
    if (!v)
        return KC_OK;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: want an integer from %lld to %lld", where,
                          key, (long long)lo, (long long)hi);
    *out = (int64_t)json_integer_value(v);
    return KC_OK;
}

/* An optional number of seconds (integer or fraction) in [0, hi], as milliseconds. */
static kc_code get_seconds(const json_t *obj, const char *where, const char *key, double hi,
                           int64_t *out_ms, bool *present, kc_err *err)
{
    json_t *v = json_object_get(obj, key);
    *present = v != NULL;
    if (!v)
        return KC_OK;
    double d = json_number_value(v);
    if (!json_is_number(v) || !isfinite(d) || d < 0 || d > hi)
        return kc_err_set(err, KC_EBADREQUEST, "%s.%s: want a number of seconds from 0 to %.0f",
                          where, key, hi);
    *out_ms = (int64_t)(d * 1000.0 + 0.5);
    return KC_OK;
}

static kc_code parse_match(const json_t *m, const char *where, fault_rule *fr, kc_err *err)
{
    char w[64];
    snprintf(w, sizeof(w), "%s.match", where);
    if (!json_is_object(m))
        return kc_err_set(err, KC_EBADREQUEST, "%s: want an object", w);
    static const char *const keys[] = {"userAgent", "user",      "verbs",
                                       "resources", "namespace", NULL};
    kc_code rc = check_keys(m, w, keys, "userAgent, user, verbs, resources, namespace", err);
    if (rc == KC_OK)
        rc = get_string(m, w, "userAgent", true, &fr->ua, err);
    if (rc == KC_OK)
        rc = get_string(m, w, "user", true, &fr->user, err);
    if (rc == KC_OK)
        rc = get_string(m, w, "namespace", true, &fr->ns, err);
    if (rc != KC_OK)
        return rc;
    json_t *verbs = json_object_get(m, "verbs");
    if (verbs) {
        if (!json_is_array(verbs) || json_array_size(verbs) == 0)
            return kc_err_set(err, KC_EBADREQUEST, "%s.verbs: want a non-empty array of verbs", w);
        size_t i;
        json_t *v;
        json_array_foreach(verbs, i, v)
        {
            const char *s = json_string_value(v);
            size_t k = 0;
            while (s && k < N_VERBS && strcmp(s, verb_names[k]) != 0)
                k++;
            if (!s)
                return kc_err_set(err, KC_EBADREQUEST, "%s.verbs[%zu]: want a string", w, i);
            if (k == N_VERBS)
                return kc_err_set(err, KC_EBADREQUEST,
                                  "%s.verbs[%zu]: unknown verb \"%.100s\" (want get, list, watch, "
                                  "create, update, patch, delete, deletecollection)",
                                  w, i, s);
            fr->verbs |= 1u << k;
        }
    }
    json_t *res = json_object_get(m, "resources");
    if (res) {
        if (!json_is_array(res) || json_array_size(res) == 0)
            return kc_err_set(err, KC_EBADREQUEST,
                              "%s.resources: want a non-empty array of resource names", w);
        fr->resources = calloc(json_array_size(res), sizeof(char *));
        if (!fr->resources)
            return kc_err_set(err, KC_ENOMEM, "%s.resources: out of memory", w);
        size_t i;
        json_t *v;
        json_array_foreach(res, i, v)
        {
            const char *s = json_string_value(v);
            if (!s || !s[0] || strlen(s) != json_string_length(v) || strlen(s) > 253)
                return kc_err_set(err, KC_EBADREQUEST,
                                  "%s.resources[%zu]: want a resource name such as \"pods\", "
                                  "\"daemonsets.apps\" or \"pods/status\"",
                                  w, i);
            if (!(fr->resources[fr->nres] = strdup(s)))
                return kc_err_set(err, KC_ENOMEM, "%s.resources: out of memory", w);
            fr->nres++;
        }
    }
    return KC_OK;
}

static kc_code parse_rule(const json_t *j, size_t idx, fault_rule *fr, kc_err *err)
{
    char w[32];
    snprintf(w, sizeof(w), "rules[%zu]", idx);
    if (!json_is_object(j))
        return kc_err_set(err, KC_EBADREQUEST, "%s: want an object", w);
    static const char *const keys[] = {
        "name",   "match", "every",      "probability", "seed",    "after",       "seconds",
        "action", "code",  "retryAfter", "message",     "delayMs", "afterEvents", NULL};
    kc_code rc = check_keys(j, w, keys,
                            "name, match, every, probability, seed, after, seconds, action, code, "
                            "retryAfter, message, delayMs, afterEvents",
                            err);
    if (rc != KC_OK)
        return rc;
    json_t *a = json_object_get(j, "action");
    if (!a)
        return kc_err_set(err, KC_EBADREQUEST,
                          "%s.action: required (want error, delay, cutWatch, gone, refuse, "
                          "conflict)",
                          w);
    if (!json_is_string(a))
        return kc_err_set(err, KC_EBADREQUEST, "%s.action: want a string", w);
    size_t k = 0;
    while (k < N_ACTIONS && strcmp(json_string_value(a), action_names[k]) != 0)
        k++;
    if (k == N_ACTIONS)
        return kc_err_set(err, KC_EBADREQUEST,
                          "%s.action: unknown action \"%.100s\" (want error, delay, cutWatch, "
                          "gone, refuse, conflict)",
                          w, json_string_value(a));
    fr->action = (fault_action)k;
    if ((rc = get_string(j, w, "name", true, &fr->name, err)) != KC_OK)
        return rc;
    if (fr->name && strlen(fr->name) > 100)
        return kc_err_set(err, KC_EBADREQUEST, "%s.name: too long (at most 100 characters)", w);
    if (!fr->name) {
        char def[40];
        snprintf(def, sizeof(def), "rule-%zu", idx);
        if (!(fr->name = strdup(def)))
            return kc_err_set(err, KC_ENOMEM, "%s: out of memory", w);
    }
    json_t *m = json_object_get(j, "match");
    if (m && (rc = parse_match(m, w, fr, err)) != KC_OK)
        return rc;
    bool has_every, has_prob = json_object_get(j, "probability") != NULL, has, has_seconds;
    fr->every = 1;
    if ((rc = get_int(j, w, "every", 1, INT64_MAX, &fr->every, &has_every, err)) != KC_OK)
        return rc;
    if (has_prob) {
        json_t *p = json_object_get(j, "probability");
        double d = json_number_value(p);
        if (!json_is_number(p) || !isfinite(d) || d <= 0 || d > 1)
            return kc_err_set(err, KC_EBADREQUEST,
                              "%s.probability: want a number greater than 0 and at most 1", w);
        if (has_every)
            return kc_err_set(err, KC_EBADREQUEST,
                              "%s.probability: give either every or probability, not both", w);
        fr->probability = d;
        fr->every = 0;
    }
    int64_t seed = 1;
    if ((rc = get_int(j, w, "seed", INT64_MIN, INT64_MAX, &seed, &has, err)) != KC_OK)
        return rc;
    fr->rng = (uint64_t)seed;
    if ((rc = get_seconds(j, w, "after", 86400.0 * 7, &fr->after_ms, &has, err)) != KC_OK ||
        (rc = get_seconds(j, w, "seconds", 86400.0 * 7, &fr->seconds_ms, &has_seconds, err)) !=
            KC_OK)
        return rc;
    /* fields that belong to one action */
    static const struct {
        const char *key;
        fault_action action;
    } own[] = {{"code", FA_ERROR},
               {"retryAfter", FA_ERROR},
               {"message", FA_ERROR},
               {"delayMs", FA_DELAY},
               {"afterEvents", FA_CUTWATCH}};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (json_object_get(j, own[i].key) && fr->action != own[i].action)
            return kc_err_set(err, KC_EBADREQUEST, "%s.%s: only for action %s (this is %s)", w,
                              own[i].key, action_names[own[i].action], action_names[fr->action]);
    int64_t v = 503;
    if ((rc = get_int(j, w, "code", 400, 599, &v, &has, err)) != KC_OK)
        return rc;
    fr->code = (int)v;
    v = -1;
    if ((rc = get_int(j, w, "retryAfter", 0, 86400, &v, &has, err)) != KC_OK)
        return rc;
    fr->retry_after = (int)v;
    if ((rc = get_string(j, w, "message", true, &fr->message, err)) != KC_OK)
        return rc;
    if ((rc = get_int(j, w, "delayMs", 0, 600000, &fr->delay_ms, &has, err)) != KC_OK)
        return rc;
    if (fr->action == FA_DELAY && !has)
        return kc_err_set(err, KC_EBADREQUEST,
                          "%s.delayMs: required for action delay (milliseconds to hold the "
                          "response)",
                          w);
    if ((rc = get_int(j, w, "afterEvents", 0, INT64_MAX, &fr->after_events, &has, err)) != KC_OK)
        return rc;
    if (fr->action == FA_REFUSE && fr->seconds_ms <= 0)
        return kc_err_set(err, KC_EBADREQUEST,
                          "%s.seconds: required for action refuse (how long the server stays "
                          "down, > 0)",
                          w);
    /* A refusal that any request may trigger begins at activation by itself. */
    fr->timer = fr->action == FA_REFUSE && !m && fr->every == 1 && fr->probability == 0;
    fr->orig = json_deep_copy(j);
    if (!fr->orig || json_object_set_new(fr->orig, "name", json_string(fr->name)) != 0)
        return kc_err_set(err, KC_ENOMEM, "%s: out of memory", w);
    return KC_OK;
}

kc_code ks_fault_parse(const json_t *doc, ks_fault_set **out, kc_err *err)
{
    *out = NULL;
    if (!json_is_object(doc))
        return kc_err_set(err, KC_EBADREQUEST,
                          "faults: want a JSON object {\"rules\": [...]} (an empty array clears)");
    static const char *const keys[] = {"rules", NULL};
    kc_code rc = check_keys(doc, "", keys, "rules", err);
    if (rc != KC_OK)
        return rc;
    json_t *rules = json_object_get(doc, "rules");
    if (!rules)
        return kc_err_set(err, KC_EBADREQUEST,
                          "rules: required (an array of rules; an empty array clears)");
    if (!json_is_array(rules))
        return kc_err_set(err, KC_EBADREQUEST, "rules: want an array");
    if (json_array_size(rules) > KS_FAULT_MAX_RULES)
        return kc_err_set(err, KC_EBADREQUEST, "rules: at most %d rules (got %zu)",
                          KS_FAULT_MAX_RULES, json_array_size(rules));
    ks_fault_set *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return kc_err_set(err, KC_ENOMEM, "faults: out of memory");
    size_t n = json_array_size(rules);
    if (n && !(fs->rules = calloc(n, sizeof(fault_rule)))) {
        rc = kc_err_set(err, KC_ENOMEM, "faults: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        fault_rule *fr = &fs->rules[i];
        fs->n = i + 1;
        if ((rc = parse_rule(json_array_get(rules, i), i, fr, err)) != KC_OK)
            goto fail;
        for (size_t k = 0; k < i; k++)
            if (strcmp(fs->rules[k].name, fr->name) == 0) {
                rc = kc_err_set(err, KC_EBADREQUEST,
                                "rules[%zu].name: duplicate name \"%s\" (also rules[%zu])", i,
                                fr->name, k);
                goto fail;
            }
    }
    *out = fs;
    return KC_OK;
fail:
    ks_fault_set_free(fs);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * matching
 */

static bool rule_started(const ks_faults *f, const fault_rule *fr, int64_t now)
{
    return now >= f->installed_ms + fr->after_ms;
}

static bool rule_active(const ks_faults *f, const fault_rule *fr, int64_t now)
{
    if (!rule_started(f, fr, now))
        return false;
    if (fr->action == FA_REFUSE) /* seconds is the outage's length; one outage per rule */
        return !fr->fired;
    return fr->seconds_ms <= 0 || now < f->installed_ms + fr->after_ms + fr->seconds_ms;
}

static bool resource_matches(const char *want, const match_info *mi)
{
    size_t rl = strlen(mi->resource), gl = strlen(mi->group);
    if (strncmp(want, mi->resource, rl) != 0)
        return false;
    const char *p = want + rl;
    if (*p == '.' && gl && strncmp(p + 1, mi->group, gl) == 0)
        p += 1 + gl;
    if (*p == '\0')
        return true; /* subresources count as their resource */
    return *p == '/' && mi->sub && strcmp(p + 1, mi->sub) == 0;
}

static bool rule_matches(const fault_rule *fr, const match_info *mi)
{
    if (fr->ua && strncmp(mi->ua, fr->ua, strlen(fr->ua)) != 0)
        return false;
    if (fr->user && strcmp(mi->user, fr->user) != 0)
        return false;
    if (fr->ns && (!mi->ns || strcmp(mi->ns, fr->ns) != 0))
        return false;
    if (fr->verbs) {
        size_t k = 0;
        while (k < N_VERBS && strcmp(mi->verb, verb_names[k]) != 0)
            k++;
        if (k == N_VERBS || !(fr->verbs & (1u << k)))
            return false;
    }
    if (fr->nres) {
        size_t i = 0;
        while (i < fr->nres && !resource_matches(fr->resources[i], mi))
            i++;
        if (i == fr->nres)
            return false;
    }
    return true;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Counts a matching request and says whether the rule fires on it. */
static bool rule_fires(fault_rule *fr)
{
    fr->matched++;
    if (fr->probability > 0)
        return (double)(splitmix64(&fr->rng) >> 11) * 0x1.0p-53 < fr->probability;
    return fr->matched % (uint64_t)fr->every == 0;
}

static bool is_write(const char *verb)
{
    return !strcmp(verb, "create") || !strcmp(verb, "update") || !strcmp(verb, "patch") ||
           !strcmp(verb, "delete");
}

/* A watch resuming from a version, or a list continuing: what gone applies to. */
static bool resumes(ks_req *r)
{
    if (!strcmp(r->verb, "watch")) {
        const char *rv = ks_req_arg(r, "resourceVersion");
        return rv && rv[0] && strcmp(rv, "0") != 0 &&
               !ks_req_arg_bool(r, "sendInitialEvents", false);
    }
    const char *cont = ks_req_arg(r, "continue");
    return !strcmp(r->verb, "list") && cont && cont[0];
}

static bool applies(const fault_rule *fr, ks_req *r)
{
    switch (fr->action) {
    case FA_CONFLICT:
        return is_write(r->verb);
    case FA_GONE:
        return resumes(r);
    case FA_CUTWATCH:
        return false; /* decided by the watch streams */
    case FA_REFUSE:
        return !fr->timer;
    default:
        return true;
    }
}

/* ---------------------------------------------------------------------------------------------
 * the refusal thread
 */

static void timed_wait(ks_faults *f, int64_t until_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = until_ms - now_ms();
    if (left <= 0)
        return;
    ts.tv_sec += (time_t)(left / 1000);
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&f->cv, &f->mu, &ts);
}

static void *refuse_main(void *arg)
{
    ks_faults *f = arg;
    pthread_mutex_lock(&f->mu);
    while (!f->shutdown) {
        if (!f->pending) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        if (now_ms() < f->start_ms) {
            timed_wait(f, f->start_ms);
            continue;
        }
        f->pending = false;
        f->active = true;
        int64_t end = now_ms() + f->dur_ms;
        char name[128] = "";
        if (f->set && f->refuse_gen == atomic_load(&f->gen) && f->refuse_rule < f->set->n) {
            fault_rule *fr = &f->set->rules[f->refuse_rule];
            if (fr->timer) {
                fr->fired = true;
                fr->injected++;
            }
            snprintf(name, sizeof(name), "%s", fr->name);
        }
        int ports[2] = {f->srv->https_port, f->srv->http_port};
        pthread_mutex_unlock(&f->mu);
        kc_warn("fault injected", "rule=%s action=refuse seconds=%.1f https_port=%d http_port=%d",
                name, (double)f->dur_ms / 1000.0, ports[0], ports[1]);
        ks_server_pause(f->srv);
        pthread_mutex_lock(&f->mu);
        while (!f->shutdown && now_ms() < end)
            timed_wait(f, end);
        while (!f->shutdown) {
            pthread_mutex_unlock(&f->mu);
            kc_err err;
            kc_err_clear(&err);
            kc_code rc = ks_server_resume(f->srv, &err);
            pthread_mutex_lock(&f->mu);
            if (rc == KC_OK) {
                kc_info("fault ended", "rule=%s action=refuse: listening again", name);
                break;
            }
            kc_warn("fault: listening again failed, retrying", "rule=%s error=%s", name, err.msg);
            timed_wait(f, now_ms() + 200);
        }
        f->active = false;
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

ks_faults *ks_faults_new(struct ks_server *srv)
{
    ks_faults *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->srv = srv;
    atomic_init(&f->gen, 0);
    atomic_init(&f->any, false);
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&f->thread, NULL, refuse_main, f) != 0) {
        ks_faults_free(f);
        return NULL;
    }
    f->thread_started = true;
    return f;
}

void ks_faults_shutdown(ks_faults *f)
{
    if (!f || !f->thread_started)
        return;
    pthread_mutex_lock(&f->mu);
    f->shutdown = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    f->thread_started = false;
}

void ks_faults_free(ks_faults *f)
{
    if (!f)
        return;
    ks_faults_shutdown(f);
    ks_fault_set_free(f->set);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* ---------------------------------------------------------------------------------------------
 * installing and reporting
 */

/* Swaps in fs (may be NULL) under the lock; returns the old set for the caller to free. */
static ks_fault_set *swap_set(ks_faults *f, ks_fault_set *fs)
{
    pthread_mutex_lock(&f->mu);
    ks_fault_set *old = f->set;
    f->set = fs;
    f->installed_ms = now_ms();
    unsigned gen = atomic_load(&f->gen) + 1;
    atomic_store(&f->gen, gen);
    atomic_store(&f->any, fs && fs->n > 0);
    f->pending = false; /* a refusal not yet begun belongs to the old set */
    for (size_t i = 0; fs && i < fs->n && !f->active; i++) {
        fault_rule *fr = &fs->rules[i];
        if (!fr->timer)
            continue;
        int64_t delay = fr->after_ms > REFUSE_MIN_DELAY_MS ? fr->after_ms : REFUSE_MIN_DELAY_MS;
        f->pending = true;
        f->start_ms = f->installed_ms + delay;
        f->dur_ms = fr->seconds_ms;
        f->refuse_gen = gen;
        f->refuse_rule = i;
        break;
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return old;
}

static ks_faults *faults_of(ks_sim *sim)
{
    return sim && sim->server ? sim->server->faults : NULL;
}

kc_code ks_faults_install(ks_sim *sim, const json_t *doc, kc_err *err)
{
    ks_faults *f = faults_of(sim);
    if (!f)
        return kc_err_set(err, KC_EARG, "faults: the API server is not running");
    ks_fault_set *fs = NULL;
    kc_code rc = ks_fault_parse(doc, &fs, err);
    if (rc != KC_OK)
        return rc;
    ks_fault_set_free(swap_set(f, fs));
    kc_info("fault rules installed", "rules=%zu", ks_fault_set_len(fs));
    return KC_OK;
}

kc_code ks_faults_load_file(ks_sim *sim, const char *path, kc_err *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        return kc_err_set(err, KC_EBADREQUEST, "--faults %s: not valid JSON: %s (line %d)", path,
                          je.text, je.line);
    kc_code rc = ks_faults_install(sim, doc, err);
    json_decref(doc);
    if (rc != KC_OK)
        kc_err_prefix(err, "--faults %s", path);
    return rc;
}

void ks_faults_clear(ks_sim *sim)
{
    ks_faults *f = faults_of(sim);
    if (f)
        ks_fault_set_free(swap_set(f, NULL));
}

json_t *ks_faults_status(ks_sim *sim)
{
    json_t *out = json_pack("{s:[], s:[]}", "rules", "counters");
    ks_faults *f = faults_of(sim);
    if (!out || !f)
        return out;
    json_t *rules = json_object_get(out, "rules"), *counters = json_object_get(out, "counters");
    pthread_mutex_lock(&f->mu);
    int64_t now = now_ms();
    for (size_t i = 0; f->set && i < f->set->n; i++) {
        fault_rule *fr = &f->set->rules[i];
        json_array_append(rules, fr->orig);
        json_array_append_new(counters, json_pack("{s:s, s:s, s:I, s:I, s:b}", "name", fr->name,
                                                  "action", action_names[fr->action], "matched",
                                                  (json_int_t)fr->matched, "injected",
                                                  (json_int_t)fr->injected, "active",
                                                  rule_active(f, fr, now)));
    }
    json_object_set_new(out, "refusing", json_boolean(f->active));
    pthread_mutex_unlock(&f->mu);
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * the endpoint
 */

enum MHD_Result ks_fault_handle_admin(ks_req *r)
{
    if (!strcmp(r->method, "GET"))
        return ks_reply_json(r, 200, ks_faults_status(r->sim), NULL);
    if (!strcmp(r->method, "DELETE")) {
        ks_faults_clear(r->sim);
        kc_info("fault rules cleared", "user=%s", r->user.name);
        return ks_reply_json(r, 200, ks_faults_status(r->sim), NULL);
    }
    if (strcmp(r->method, "POST") != 0 && strcmp(r->method, "PUT") != 0)
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "/kubesim/v1/faults takes GET, POST (or PUT) and DELETE",
                               json_object());
    json_error_t je;
    json_t *doc = json_loadb(r->body ? r->body : "", r->body_len, 0, &je);
    if (!doc) {
        char msg[400];
        snprintf(msg, sizeof(msg), "the fault rule set is not valid JSON: %s (line %d)", je.text,
                 je.line);
        return ks_reply_status(r, 400, "BadRequest", msg, json_object());
    }
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = ks_faults_install(r->sim, doc, &err);
    json_decref(doc);
    if (rc != KC_OK)
        return ks_reply_status(r, rc == KC_EBADREQUEST ? 400 : 500,
                               rc == KC_EBADREQUEST ? "BadRequest" : "InternalError", err.msg,
                               json_object());
    return ks_reply_json(r, 200, ks_faults_status(r->sim), NULL);
}

/* ---------------------------------------------------------------------------------------------
 * the injected replies
 */

static const char *error_reason(int code)
{
    static const struct {
        int code;
        const char *reason;
    } t[] = {{400, "BadRequest"},
             {401, "Unauthorized"},
             {403, "Forbidden"},
             {404, "NotFound"},
             {405, "MethodNotAllowed"},
             {409, "Conflict"},
             {410, "Gone"},
             {413, "RequestEntityTooLarge"},
             {415, "UnsupportedMediaType"},
             {422, "Invalid"},
             {429, "TooManyRequests"},
             {500, "InternalError"},
             {503, "ServiceUnavailable"},
             {504, "Timeout"}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].code == code)
            return t[i].reason;
    return code >= 500 ? "InternalError" : "BadRequest";
}

static const char *error_text(int code)
{
    switch (code) {
    case 429:
        return "Too many requests, please try again later.";
    case 500:
        return "Internal error occurred: injected fault";
    case 503:
        return "the server is currently unable to handle the request";
    case 504:
        return "the server was unable to return a response in the time allotted, but may still "
               "be processing the request";
    default:
        return "injected fault";
    }
}

static json_t *status_json(int code, const char *reason, const char *message, json_t *details)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion",
                           "v1", "metadata", "status", "Failure", "message", message, "reason",
                           reason, "code", code);
    if (st && details)
        json_object_set(st, "details", details);
    json_decref(details);
    return st;
}

/* The copy of a firing rule taken under the lock (the set may be replaced right after). */
typedef struct fired_rule {
    fault_action action;
    char name[128];
    int code, retry_after;
    char message[1100];
} fired_rule;

static enum MHD_Result reply_error(ks_req *r, const fired_rule *fr)
{
    char msg[1400];
    if (fr->message[0])
        snprintf(msg, sizeof(msg), "%s", fr->message);
    else
        snprintf(msg, sizeof(msg), "%s (injected by kubesim fault rule \"%s\")",
                 error_text(fr->code), fr->name);
    json_t *details =
        fr->retry_after >= 0 ? json_pack("{s:i}", "retryAfterSeconds", fr->retry_after) : NULL;
    json_t *st = status_json(fr->code, error_reason(fr->code), msg, details);
    char *s = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    struct MHD_Response *resp =
        s ? MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (fr->retry_after >= 0) {
        char ra[24];
        snprintf(ra, sizeof(ra), "%d", fr->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    return ks_reply(r, (unsigned)fr->code, resp);
}

static enum MHD_Result reply_gone(ks_req *r)
{
    static const char continue_msg[] =
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list.";
    if (strcmp(r->verb, "watch") != 0)
        return ks_reply_status(r, 410, "Expired", continue_msg, NULL);
    /* The API server's answer to a too-old version: 200, then one ERROR event. */
    char msg[200];
    snprintf(msg, sizeof(msg), "too old resource version: %.40s (%llu)",
             ks_req_arg(r, "resourceVersion"), (unsigned long long)ks_store_rv(r->sim->store));
    json_t *ev =
        json_pack("{s:s, s:o}", "type", "ERROR", "object", status_json(410, "Expired", msg, NULL));
    char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    char *line = s ? malloc(strlen(s) + 2) : NULL;
    if (!line) {
        free(s);
        return MHD_NO;
    }
    snprintf(line, strlen(s) + 2, "%s\n", s);
    free(s);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(line), line, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(line);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return ks_reply(r, 200, resp);
}

static enum MHD_Result reply_conflict(ks_req *r)
{
    const ks_route *rt = &r->route;
    char name[256] = "";
    if (rt->name && (strcmp(r->verb, "create") != 0 || rt->sub)) {
        snprintf(name, sizeof(name), "%s", rt->name);
    } else {
        json_t *obj = NULL;
        kc_err e;
        if (ks_decode_body(r, &obj, &e) == KC_OK) {
            const char *n =
                json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
            snprintf(name, sizeof(name), "%s", n ? n : "");
        }
        json_decref(obj);
    }
    char qual[300], msg[900];
    if (rt->t->group[0])
        snprintf(qual, sizeof(qual), "%s.%s", rt->t->resource, rt->t->group);
    else
        snprintf(qual, sizeof(qual), "%s", rt->t->resource);
    snprintf(msg, sizeof(msg),
             "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please "
             "apply your changes to the latest version and try again",
             qual, name);
    json_t *d = json_pack("{s:s, s:s}", "name", name, "kind", rt->t->resource);
    if (d && rt->t->group[0])
        json_object_set_new(d, "group", json_string(rt->t->group));
    return ks_reply_status(r, 409, "Conflict", msg, d);
}

static void mark(ks_req *r, const char *name, fault_action a)
{
    size_t used = strlen(r->fault);
    snprintf(r->fault + used, sizeof(r->fault) - used, "%s%s:%s", used ? "," : "", name,
             action_names[a]);
}

bool ks_fault_on_request(ks_req *r, enum MHD_Result *ret)
{
    ks_faults *f = r->srv->faults;
    if (!f || !atomic_load(&f->any) || !r->route.t)
        return false;
    const char *ua = ks_req_header(r, "User-Agent");
    match_info mi = {.user = r->user.name,
                     .ua = ua ? ua : "",
                     .verb = r->verb,
                     .resource = r->route.t->resource,
                     .group = r->route.t->group,
                     .sub = r->route.sub,
                     .ns = r->route.ns};
    fired_rule hit = {.action = FA_ERROR};
    bool terminal = false;
    int64_t delay = 0;
    pthread_mutex_lock(&f->mu);
    int64_t now = now_ms();
    for (size_t i = 0; f->set && i < f->set->n && !terminal; i++) {
        fault_rule *fr = &f->set->rules[i];
        if (!rule_active(f, fr, now) || !applies(fr, r) || !rule_matches(fr, &mi))
            continue;
        if (fr->action == FA_REFUSE && (f->pending || f->active))
            continue; /* a refusal is already under way */
        if (!rule_fires(fr))
            continue;
        fr->injected++;
        mark(r, fr->name, fr->action);
        if (fr->action == FA_DELAY) {
            delay += fr->delay_ms;
            continue;
        }
        terminal = true;
        hit.action = fr->action;
        snprintf(hit.name, sizeof(hit.name), "%s", fr->name);
        hit.code = fr->code;
        hit.retry_after = fr->retry_after;
        snprintf(hit.message, sizeof(hit.message), "%s", fr->message ? fr->message : "");
        if (fr->action == FA_REFUSE) {
            fr->fired = true;
            f->pending = true;
            f->start_ms = now;
            f->dur_ms = fr->seconds_ms;
            f->refuse_gen = atomic_load(&f->gen);
            f->refuse_rule = i;
            pthread_cond_broadcast(&f->cv);
        }
    }
    pthread_mutex_unlock(&f->mu);
    if (!r->fault[0])
        return false;
    kc_info("fault injected", "rules=%s method=%s path=%s user=%s delay_ms=%lld", r->fault,
            r->method, r->url, r->user.name, (long long)delay);
    /* Held in short steps, so a stopping (or refusing) server does not wait for it. */
    for (int64_t end = now_ms() + delay; now_ms() < end && !atomic_load(&r->srv->stopping);) {
        int64_t left = end - now_ms();
        struct timespec ts = {0, (long)(left < 50 ? left : 50) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!terminal)
        return false;
    switch (hit.action) {
    case FA_ERROR:
        *ret = reply_error(r, &hit);
        break;
    case FA_GONE:
        *ret = reply_gone(r);
        break;
    case FA_CONFLICT:
        *ret = reply_conflict(r);
        break;
    case FA_REFUSE:
    default:
        *ret = MHD_NO; /* the connection closes; the refusal thread takes the listeners down */
        break;
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * watch streams
 */

void ks_fault_watch_init(ks_req *r, ks_fault_watch *fw)
{
    memset(fw, 0, sizeof(*fw));
    fw->srv = r->srv;
    fw->limit = -1;
    fw->recheck_ms = INT64_MAX;
    const char *ua = ks_req_header(r, "User-Agent");
    snprintf(fw->user, sizeof(fw->user), "%s", r->user.name);
    snprintf(fw->ua, sizeof(fw->ua), "%s", ua ? ua : "");
    snprintf(fw->resource, sizeof(fw->resource), "%s", r->route.t->resource);
    snprintf(fw->group, sizeof(fw->group), "%s", r->route.t->group);
    snprintf(fw->ns, sizeof(fw->ns), "%s", r->route.ns ? r->route.ns : "");
}

/* Decides the cutWatch rules this stream has not been decided on yet (f->mu held). */
static void watch_refresh(ks_faults *f, ks_fault_watch *fw)
{
    unsigned gen = atomic_load(&f->gen);
    if (gen != fw->gen) {
        fw->gen = gen;
        fw->evaluated = 0;
        fw->limit = -1;
    }
    fw->recheck_ms = INT64_MAX;
    if (fw->limit >= 0)
        return;
    match_info mi = {.user = fw->user,
                     .ua = fw->ua,
                     .verb = "watch",
                     .resource = fw->resource,
                     .group = fw->group,
                     .sub = NULL,
                     .ns = fw->ns[0] ? fw->ns : NULL};
    int64_t now = now_ms();
    for (size_t i = 0; f->set && i < f->set->n; i++) {
        fault_rule *fr = &f->set->rules[i];
        if (fr->action != FA_CUTWATCH || (fw->evaluated & (1ULL << i)))
            continue;
        if (!rule_started(f, fr, now)) {
            int64_t at = f->installed_ms + fr->after_ms;
            if (at < fw->recheck_ms)
                fw->recheck_ms = at;
            continue;
        }
        fw->evaluated |= 1ULL << i;
        if (!rule_active(f, fr, now) || !rule_matches(fr, &mi) || !rule_fires(fr))
            continue;
        fw->limit = fr->after_events;
        fw->base = fw->events;
        fw->rule = (int)i;
        snprintf(fw->rule_name, sizeof(fw->rule_name), "%s", fr->name);
        return;
    }
}

bool ks_fault_watch_cut(ks_fault_watch *fw)
{
    ks_faults *f = fw->srv ? fw->srv->faults : NULL;
    if (!f)
        return false;
    if (atomic_load(&f->gen) != fw->gen ||
        (fw->recheck_ms != INT64_MAX && now_ms() >= fw->recheck_ms)) {
        pthread_mutex_lock(&f->mu);
        watch_refresh(f, fw);
        pthread_mutex_unlock(&f->mu);
    }
    if (!ks_fault_watch_full(fw))
        return false;
    bool cut = false;
    pthread_mutex_lock(&f->mu);
    if (atomic_load(&f->gen) == fw->gen && f->set && (size_t)fw->rule < f->set->n) {
        fault_rule *fr = &f->set->rules[fw->rule];
        if (rule_active(f, fr, now_ms())) {
            fr->injected++;
            cut = true;
        }
    }
    pthread_mutex_unlock(&f->mu);
    fw->limit = -1;
    if (cut)
        kc_info("fault injected", "rules=%s:cutWatch resource=%s namespace=%s user=%s events=%llu",
                fw->rule_name, fw->resource, fw->ns[0] ? fw->ns : "-", fw->user,
                (unsigned long long)(fw->events - fw->base));
    return cut;
}
