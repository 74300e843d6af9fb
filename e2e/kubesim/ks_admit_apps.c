/* ks_admit_apps: defaulting and validation of the workload kinds (Deployment, ReplicaSet,
 * DaemonSet, StatefulSet from apps/v1; Job from batch/v1), as the API server does them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_selector.h"
#include "ks_admit.h"

static bool is_kind(const char *kind, const char *want)
{
    return strcmp(kind, want) == 0;
}

static json_t *template_spec(json_t *obj)
{
    json_t *tmpl = json_object_get(json_object_get(obj, "spec"), "template");
    return json_is_object(tmpl) ? ks_obj_child(tmpl, "spec") : NULL;
}

/* Fills the RollingUpdate parameters that clients read (helm's --wait dereferences them). */
static void rolling_default(json_t *strategy, const char *type_key, json_t *max_unavailable,
                            json_t *max_surge)
{
    ks_default_set(strategy, type_key, json_string("RollingUpdate"));
    if (strcmp(ks_str(strategy, type_key), "RollingUpdate") != 0) {
        json_decref(max_unavailable);
        json_decref(max_surge);
        return;
    }
    json_t *ru = ks_obj_child(strategy, "rollingUpdate");
    if (!ru) {
        json_decref(max_unavailable);
        json_decref(max_surge);
        return;
    }
    ks_default_set(ru, "maxUnavailable", max_unavailable);
    ks_default_set(ru, "maxSurge", max_surge);
}

/* Jobs get a selector on their own uid unless the user manages it (manualSelector). */
static void job_selector_default(json_t *obj, json_t *spec)
{
    if (json_is_true(json_object_get(spec, "manualSelector")) || json_object_get(spec, "selector"))
        return;
    json_t *md = json_object_get(obj, "metadata");
    const char *uid = ks_str(md, "uid");
    const char *name = ks_str(md, "name");
    if (!*uid)
        return;
    json_object_set_new(
        spec, "selector",
        json_pack("{s:{s:s}}", "matchLabels", "batch.kubernetes.io/controller-uid", uid));
    json_t *tmpl = ks_obj_child(spec, "template");
    json_t *tmd = tmpl ? ks_obj_child(tmpl, "metadata") : NULL;
    json_t *labels = tmd ? ks_obj_child(tmd, "labels") : NULL;
    if (!labels)
        return;
    ks_default_set(labels, "batch.kubernetes.io/controller-uid", json_string(uid));
    ks_default_set(labels, "batch.kubernetes.io/job-name", json_string(name));
    ks_default_set(labels, "controller-uid", json_string(uid));
    ks_default_set(labels, "job-name", json_string(name));
}

void ks_apps_default(const char *kind, json_t *obj)
{
    json_t *spec = ks_obj_child(obj, "spec");
    if (!spec)
        return;
    if (is_kind(kind, "Deployment")) {
        ks_default_set(spec, "replicas", json_integer(1));
        json_t *st = ks_obj_child(spec, "strategy");
        if (st)
            rolling_default(st, "type", json_string("25%"), json_string("25%"));
        ks_default_set(spec, "revisionHistoryLimit", json_integer(10));
        ks_default_set(spec, "progressDeadlineSeconds", json_integer(600));
    } else if (is_kind(kind, "ReplicaSet")) {
        ks_default_set(spec, "replicas", json_integer(1));
    } else if (is_kind(kind, "DaemonSet")) {
        json_t *st = ks_obj_child(spec, "updateStrategy");
        if (st)
            rolling_default(st, "type", json_integer(1), json_integer(0));
        ks_default_set(spec, "revisionHistoryLimit", json_integer(10));
    } else if (is_kind(kind, "StatefulSet")) {
        ks_default_set(spec, "replicas", json_integer(1));
        ks_default_set(spec, "podManagementPolicy", json_string("OrderedReady"));
        json_t *st = ks_obj_child(spec, "updateStrategy");
        if (st) {
            ks_default_set(st, "type", json_string("RollingUpdate"));
            if (strcmp(ks_str(st, "type"), "RollingUpdate") == 0) {
                json_t *ru = ks_obj_child(st, "rollingUpdate");
                if (ru)
                    ks_default_set(ru, "partition", json_integer(0));
            }
        }
        ks_default_set(spec, "revisionHistoryLimit", json_integer(10));
        ks_default_set(spec, "persistentVolumeClaimRetentionPolicy",
                       json_pack("{s:s, s:s}", "whenDeleted", "Retain", "whenScaled", "Retain"));
    } else if (is_kind(kind, "Job")) {
        bool has_completions = json_is_integer(json_object_get(spec, "completions"));
        bool has_parallelism = json_is_integer(json_object_get(spec, "parallelism"));
        if (!has_completions && !has_parallelism)
            ks_default_set(spec, "completions", json_integer(1));
        ks_default_set(spec, "parallelism", json_integer(1));
        ks_default_set(spec, "backoffLimit", json_integer(6));
        ks_default_set(spec, "completionMode", json_string("NonIndexed"));
        ks_default_set(spec, "suspend", json_false());
        ks_default_set(spec, "podReplacementPolicy", json_string("TerminatingOrFailed"));
        job_selector_default(obj, spec);
    } else {
        return;
    }
    ks_pod_spec_default(template_spec(obj), false);
}

/* ---- validation --------------------------------------------------------------------------- */

/* Go's %#v of an intstr.IntOrString. */
static char *go_intstr(const json_t *v)
{
    char *out = NULL;
    if (json_is_string(v)) {
        char *q = ks_go_quote(json_string_value(v));
        if (q && asprintf(&out, "intstr.IntOrString{Type:1, IntVal:0, StrVal:%s}", q) < 0)
            out = NULL;
        free(q);
    } else if (asprintf(&out, "intstr.IntOrString{Type:0, IntVal:%lld, StrVal:\"\"}",
                        (long long)json_integer_value(v)) < 0) {
        out = NULL;
    }
    return out;
}

/* The value of an int-or-percent ("25%" → 25), -1 when malformed. */
static long long intstr_value(const json_t *v, bool *percent)
{
    *percent = false;
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s)
        return -1;
    size_t n = strlen(s);
    if (n < 2 || s[n - 1] != '%')
        return -1;
    long long val = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] < '0' || s[i] > '9' || val > 1000000000)
            return -1;
        val = val * 10 + (s[i] - '0');
    }
    *percent = true;
    return val;
}

/* ValidatePositiveIntOrPercent and IsNotMoreThan100Percent; returns the value (0 when absent). */
static long long check_int_or_percent(ks_verr *v, const json_t *val, const char *path)
{
    if (!val || json_is_null(val))
        return 0;
    bool pct;
    long long n = intstr_value(val, &pct);
    char *gov = go_intstr(val);
    if (json_is_string(val) && n < 0) {
        ks_verr_invalid(v, path, gov, "must be an integer or percentage (e.g '5%')");
        n = 0;
    } else if (!json_is_string(val) && !json_is_integer(val)) {
        ks_verr_invalid(v, path, gov, "must be an integer or percentage (e.g '5%')");
        n = 0;
    } else if (n < 0) {
        ks_verr_invalid_int(v, path, n, "must be greater than or equal to 0");
    } else if (pct && n > 100) {
        ks_verr_invalid(v, path, gov, "must not be greater than 100%");
    }
    free(gov);
    return n;
}

static void nonneg(ks_verr *v, const json_t *spec, const char *key, const char *path)
{
    const json_t *val = json_object_get(spec, key);
    if (json_is_integer(val) && json_integer_value(val) < 0) {
        char p[256];
        snprintf(p, sizeof(p), "%s.%s", path, key);
        ks_verr_invalid_int(v, p, json_integer_value(val), "must be greater than or equal to 0");
    }
}

/* Selector presence/emptiness, and that it selects the template's labels. */
static void selector_checks(ks_verr *v, const char *kind, const json_t *spec, bool required)
{
    const json_t *sel = json_object_get(spec, "selector");
    const json_t *tlabels =
        json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "labels");
    char detail[64];
    snprintf(detail, sizeof(detail), "empty selector is invalid for %s",
             is_kind(kind, "DaemonSet")     ? "daemonset"
             : is_kind(kind, "StatefulSet") ? "statefulset"
                                            : "deployment");
    bool have = json_is_object(sel);
    if (!have && required)
        ks_verr_required(v, "spec.selector", "");
    if (have) {
        ks_validate_label_selector(v, sel, "spec.selector");
        if (json_object_size(json_object_get(sel, "matchLabels")) +
                json_array_size(json_object_get(sel, "matchExpressions")) ==
            0) {
            char *gov = ks_go_label_selector(sel);
            ks_verr_invalid(v, "spec.selector", gov, detail);
            free(gov);
        }
    }
    kc_label_selector *ls = NULL;
    bool matches = false;
    if (have) {
        if (kc_label_selector_from_json(sel, &ls, NULL) != KC_OK) {
            char *gov = ks_go_label_selector(sel);
            ks_verr_invalid(v, "spec.selector", gov, "invalid label selector");
            free(gov);
            return;
        }
        /* An empty selector selects everything: only the "empty selector" error applies. */
        matches = kc_label_selector_empty(ls) || kc_label_selector_matches(ls, tlabels);
        kc_label_selector_free(ls);
    }
    if (!matches) {
        char *gov = ks_go_string_map(tlabels);
        ks_verr_invalid(v, "spec.template.metadata.labels", gov,
                        "`selector` does not match template `labels`");
        free(gov);
    }
}

static void template_checks(ks_verr *v, const json_t *spec, const char *const *restart_allowed,
                            bool job)
{
    const json_t *tmpl = json_object_get(spec, "template");
    ks_validate_labels(v, json_object_get(json_object_get(tmpl, "metadata"), "labels"),
                       "spec.template.metadata.labels");
    const json_t *pspec = json_object_get(tmpl, "spec");
    ks_pod_spec_validate(v, pspec, "spec.template.spec");
    const char *rp = ks_str(pspec, "restartPolicy");
    bool ok = false;
    for (size_t i = 0; restart_allowed[i]; i++)
        ok |= strcmp(rp, restart_allowed[i]) == 0;
    if (!ok) {
        if (job) {
            ks_verr_required(v, "spec.template.spec.restartPolicy",
                             "valid values: \"OnFailure\", \"Never\"");
        } else {
            char *q = ks_go_quote(rp);
            ks_verr_unsupported(v, "spec.template.spec.restartPolicy", q, restart_allowed);
            free(q);
        }
    }
    if (!job && json_object_get(pspec, "activeDeadlineSeconds"))
        ks_verr_forbidden(v, "spec.template.spec.activeDeadlineSeconds",
                          "activeDeadlineSeconds in ReplicaSet is not Supported");
}

static void deployment_strategy(ks_verr *v, const json_t *spec)
{
    const json_t *st = json_object_get(spec, "strategy");
    const char *type = ks_str(st, "type");
    const json_t *ru = json_object_get(st, "rollingUpdate");
    if (strcmp(type, "Recreate") == 0) {
        if (ru && !json_is_null(ru))
            ks_verr_forbidden(v, "spec.strategy.rollingUpdate",
                              "may not be specified when strategy `type` is 'Recreate'");
    } else if (strcmp(type, "RollingUpdate") == 0) {
        if (!json_is_object(ru)) {
            ks_verr_required(v, "spec.strategy.rollingUpdate",
                             "this should be defaulted and never be nil");
            return;
        }
        const json_t *mu = json_object_get(ru, "maxUnavailable");
        long long u = check_int_or_percent(v, mu, "spec.strategy.rollingUpdate.maxUnavailable");
        long long s = check_int_or_percent(v, json_object_get(ru, "maxSurge"),
                                           "spec.strategy.rollingUpdate."
                                           "maxSurge");
        if (u == 0 && s == 0) {
            json_t *zero = json_integer(0);
            char *gov = go_intstr(mu ? mu : zero);
            ks_verr_invalid(v, "spec.strategy.rollingUpdate.maxUnavailable", gov,
                            "may not be 0 when `maxSurge` is 0");
            free(gov);
            json_decref(zero);
        }
    } else {
        static const char *const allowed[] = {"Recreate", "RollingUpdate", NULL};
        char *q = ks_go_quote(type);
        char *gov = NULL;
        if (q && asprintf(&gov, "apps.DeploymentStrategy{Type:%s, RollingUpdate:%s}", q,
                          ru ? "(*apps.RollingUpdateDeployment)(0xc000000000)"
                             : "(*apps.RollingUpdateDeployment)(nil)") < 0)
            gov = NULL;
        ks_verr_unsupported(v, "spec.strategy", gov, allowed);
        free(gov);
        free(q);
    }
}

static void daemonset_strategy(ks_verr *v, const json_t *spec)
{
    const json_t *st = json_object_get(spec, "updateStrategy");
    const char *type = ks_str(st, "type");
    if (strcmp(type, "OnDelete") == 0)
        return;
    if (strcmp(type, "RollingUpdate") != 0) {
        static const char *const allowed[] = {"RollingUpdate", "OnDelete", NULL};
        char *q = ks_go_quote(type);
        char *gov = NULL;
        if (q && asprintf(&gov, "apps.DaemonSetUpdateStrategy{Type:%s, RollingUpdate:%s}", q,
                          json_object_get(st, "rollingUpdate")
                              ? "(*apps.RollingUpdateDaemonSet)(0xc000000000)"
                              : "(*apps.RollingUpdateDaemonSet)(nil)") < 0)
            gov = NULL;
        ks_verr_unsupported(v, "spec.updateStrategy", gov, allowed);
        free(gov);
        free(q);
        return;
    }
    const json_t *ru = json_object_get(st, "rollingUpdate");
    if (!json_is_object(ru)) {
        ks_verr_required(v, "spec.updateStrategy.rollingUpdate", "");
        return;
    }
    const json_t *ms = json_object_get(ru, "maxSurge");
    long long u = check_int_or_percent(v, json_object_get(ru, "maxUnavailable"),
                                       "spec.updateStrategy.rollingUpdate.maxUnavailable");
    long long s = check_int_or_percent(v, ms, "spec.updateStrategy.rollingUpdate.maxSurge");
    if (u != 0 && s != 0) {
        char *gov = go_intstr(ms);
        ks_verr_invalid(v, "spec.updateStrategy.rollingUpdate.maxSurge", gov,
                        "may not be set when maxUnavailable is non-zero");
        free(gov);
    } else if (u == 0 && s == 0) {
        ks_verr_required(v, "spec.updateStrategy.rollingUpdate.maxUnavailable",
                         "cannot be 0 when maxSurge is 0");
    }
}

static void statefulset_checks(ks_verr *v, const json_t *old, const json_t *spec)
{
    static const char *const pmp[] = {"OrderedReady", "Parallel", NULL};
    static const char *const ust[] = {"RollingUpdate", "OnDelete", NULL};
    const char *p = ks_str(spec, "podManagementPolicy");
    bool ok = false;
    for (size_t i = 0; pmp[i]; i++)
        ok |= strcmp(p, pmp[i]) == 0;
    if (!ok) {
        char *q = ks_go_quote(p);
        ks_verr_unsupported(v, "spec.podManagementPolicy", q, pmp);
        free(q);
    }
    const char *t = ks_str(json_object_get(spec, "updateStrategy"), "type");
    ok = false;
    for (size_t i = 0; ust[i]; i++)
        ok |= strcmp(t, ust[i]) == 0;
    if (!ok) {
        char *q = ks_go_quote(t);
        ks_verr_unsupported(v, "spec.updateStrategy.type", q, ust);
        free(q);
    }
    if (!old)
        return;
    /* Only some fields of a StatefulSet's spec may change. */
    json_t *a = json_deep_copy(json_object_get(old, "spec"));
    json_t *b = json_deep_copy(spec);
    static const char *const mut[] = {"replicas",        "ordinals",
                                      "template",        "updateStrategy",
                                      "minReadySeconds", "persistentVolumeClaimRetentionPolicy"};
    for (size_t i = 0; a && b && i < sizeof(mut) / sizeof(mut[0]); i++) {
        json_object_del(a, mut[i]);
        json_object_del(b, mut[i]);
    }
    /* The selector has its own immutability message. */
    if (a && b) {
        json_object_del(a, "selector");
        json_object_del(b, "selector");
        if (!json_equal(a, b))
            ks_verr_forbidden(v, "spec",
                              "updates to statefulset spec for fields other than 'replicas', "
                              "'ordinals', 'template', 'updateStrategy', "
                              "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                              "forbidden");
    }
    json_decref(a);
    json_decref(b);
}

/* Semantic equality of two selectors: absent and empty matchLabels/matchExpressions are the
 * same, as in the API server's DeepEqual. */
static bool selector_equal(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"matchLabels", "matchExpressions"};
    if (!json_is_object(a) || !json_is_object(b))
        return json_is_object(a) == json_is_object(b);
    for (size_t i = 0; i < 2; i++) {
        const json_t *x = json_object_get(a, keys[i]), *y = json_object_get(b, keys[i]);
        bool xe = !x || json_is_null(x) || json_object_size(x) + json_array_size(x) == 0;
        bool ye = !y || json_is_null(y) || json_object_size(y) + json_array_size(y) == 0;
        if (xe != ye || (!xe && !json_equal((json_t *)x, (json_t *)y)))
            return false;
    }
    return true;
}

void ks_apps_validate(ks_verr *v, const char *kind, const json_t *old, const json_t *obj)
{
    static const char *const always[] = {"Always", NULL};
    static const char *const job_restart[] = {"OnFailure", "Never", NULL};
    const json_t *spec = json_object_get(obj, "spec");
    bool deploy = is_kind(kind, "Deployment"), rs = is_kind(kind, "ReplicaSet");
    bool ds = is_kind(kind, "DaemonSet"), sts = is_kind(kind, "StatefulSet");
    bool job = is_kind(kind, "Job");
    if (!deploy && !rs && !ds && !sts && !job)
        return; /* ControllerRevision, CronJob ...: nothing checked */

    if (!ds)
        nonneg(v, spec, "replicas", "spec");
    nonneg(v, spec, "minReadySeconds", "spec");
    nonneg(v, spec, "revisionHistoryLimit", "spec");
    if (job) {
        nonneg(v, spec, "parallelism", "spec");
        nonneg(v, spec, "completions", "spec");
        nonneg(v, spec, "backoffLimit", "spec");
    }
    selector_checks(v, kind, spec, !ds);
    template_checks(v, spec, job ? job_restart : always, job);
    if (deploy)
        deployment_strategy(v, spec);
    else if (ds)
        daemonset_strategy(v, spec);
    else if (sts)
        statefulset_checks(v, old, spec);

    if (old) {
        const json_t *os = json_object_get(json_object_get(old, "spec"), "selector");
        const json_t *ns = json_object_get(spec, "selector");
        if (os && !selector_equal(os, ns)) {
            char *gov = ks_go_label_selector(ns);
            ks_verr_invalid(v, "spec.selector", gov, "field is immutable");
            free(gov);
        }
    }
}
