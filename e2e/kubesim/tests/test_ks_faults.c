/* Tests of kubesim's fault injection: the rule parser's messages, /kubesim/v1/faults, and each
 * action observed over real HTTP against an in-process kubesim (error, delay, cutWatch, gone,
 * refuse, conflict), matching, expiry, and libkube's client retrying through injected 503s. */
#include "ks_api_test.h"

#include "ks_fault.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

TestSuite(faults, .init = ka_start, .fini = ka_stop, .timeout = 60);

static int64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the parser ---- */

/* Parses text; returns the error message (static buffer) or NULL when valid. */
static const char *parse_msg(const char *text, size_t *nrules)
{
    static kc_err err;
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    cr_assert_not_null(doc, "test JSON: %s", je.text);
    ks_fault_set *fs = NULL;
    kc_err_clear(&err);
    kc_code rc = ks_fault_parse(doc, &fs, &err);
    json_decref(doc);
    if (rc != KC_OK) {
        cr_assert_null(fs);
        cr_assert_eq(rc, KC_EBADREQUEST, "%s", err.msg);
        return err.msg;
    }
    if (nrules)
        *nrules = ks_fault_set_len(fs);
    ks_fault_set_free(fs);
    return NULL;
}

Test(faults, parser_accepts_every_action_and_names_bad_fields)
{
    size_t n = 0;
    cr_assert_null(parse_msg("{\"rules\":[]}", &n));
    cr_assert_eq(n, 0);
    cr_assert_null(
        parse_msg("{\"rules\":[{\"name\":\"a\",\"match\":{\"userAgent\":\"gpu-operator\","
                  "\"user\":\"admin\",\"verbs\":[\"get\",\"list\"],\"resources\":[\"pods\","
                  "\"daemonsets.apps\"],\"namespace\":\"ns\"},\"every\":3,\"after\":0.5,"
                  "\"seconds\":60,\"action\":\"error\",\"code\":429,\"retryAfter\":1},"
                  "{\"action\":\"delay\",\"delayMs\":10,\"probability\":0.5,\"seed\":7},"
                  "{\"action\":\"cutWatch\",\"afterEvents\":5},{\"action\":\"gone\"},"
                  "{\"action\":\"refuse\",\"seconds\":2},{\"action\":\"conflict\"}]}",
                  &n));
    cr_assert_eq(n, 6);

    static const struct {
        const char *in, *want;
    } bad[] = {
        {"[]", "faults: want a JSON object {\"rules\": [...]} (an empty array clears)"},
        {"{}", "rules: required (an array of rules; an empty array clears)"},
        {"{\"rules\":{}}", "rules: want an array"},
        {"{\"rules\":[],\"rule\":1}", "rule: unknown field (want rules)"},
        {"{\"rules\":[{\"action\":\"error\"},{\"action\":\"eror\"}]}",
         "rules[1].action: unknown action \"eror\" (want error, delay, cutWatch, gone, refuse, "
         "conflict)"},
        {"{\"rules\":[{}]}",
         "rules[0].action: required (want error, delay, cutWatch, gone, refuse, conflict)"},
        {"{\"rules\":[{\"action\":5}]}", "rules[0].action: want a string"},
        {"{\"rules\":[1]}", "rules[0]: want an object"},
        {"{\"rules\":[{\"action\":\"error\",\"retry_after\":1}]}",
         "rules[0].retry_after: unknown field (want name, match, every, probability, seed, after, "
         "seconds, action, code, retryAfter, message, delayMs, afterEvents)"},
        {"{\"rules\":[{\"action\":\"error\",\"every\":0}]}",
         "rules[0].every: want an integer from 1 to 9223372036854775807"},
        {"{\"rules\":[{\"action\":\"error\",\"every\":2.5}]}",
         "rules[0].every: want an integer from 1 to 9223372036854775807"},
        {"{\"rules\":[{\"action\":\"error\",\"every\":2,\"probability\":0.5}]}",
         "rules[0].probability: give either every or probability, not both"},
        {"{\"rules\":[{\"action\":\"error\",\"probability\":1.5}]}",
         "rules[0].probability: want a number greater than 0 and at most 1"},
        {"{\"rules\":[{\"action\":\"error\",\"code\":200}]}",
         "rules[0].code: want an integer from 400 to 599"},
        {"{\"rules\":[{\"action\":\"delay\",\"code\":503,\"delayMs\":1}]}",
         "rules[0].code: only for action error (this is delay)"},
        {"{\"rules\":[{\"action\":\"delay\"}]}",
         "rules[0].delayMs: required for action delay (milliseconds to hold the response)"},
        {"{\"rules\":[{\"action\":\"refuse\"}]}",
         "rules[0].seconds: required for action refuse (how long the server stays down, > 0)"},
        {"{\"rules\":[{\"action\":\"error\",\"seconds\":-1}]}",
         "rules[0].seconds: want a number of seconds from 0 to 604800"},
        {"{\"rules\":[{\"action\":\"gone\",\"after\":\"1\"}]}",
         "rules[0].after: want a number of seconds from 0 to 604800"},
        {"{\"rules\":[{\"action\":\"gone\",\"match\":{\"verbs\":[\"get\",\"lst\"]}}]}",
         "rules[0].match.verbs[1]: unknown verb \"lst\" (want get, list, watch, create, update, "
         "patch, delete, deletecollection)"},
        {"{\"rules\":[{\"action\":\"gone\",\"match\":{\"resource\":[\"pods\"]}}]}",
         "rules[0].match.resource: unknown field (want userAgent, user, verbs, resources, "
         "namespace)"},
        {"{\"rules\":[{\"action\":\"gone\",\"match\":{\"resources\":[]}}]}",
         "rules[0].match.resources: want a non-empty array of resource names"},
        {"{\"rules\":[{\"action\":\"gone\",\"match\":{\"user\":\"\"}}]}",
         "rules[0].match.user: must not be empty"},
        {"{\"rules\":[{\"action\":\"gone\",\"name\":\"x\"},{\"action\":\"gone\",\"name\":\"x\"}]}",
         "rules[1].name: duplicate name \"x\" (also rules[0])"},
        {"{\"rules\":[{\"action\":\"gone\"},{\"action\":\"gone\",\"name\":\"rule-0\"}]}",
         "rules[1].name: duplicate name \"rule-0\" (also rules[0])"},
        {"{\"rules\":[{\"action\":\"cutWatch\",\"afterEvents\":-1}]}",
         "rules[0].afterEvents: want an integer from 0 to 9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *got = parse_msg(bad[i].in, NULL);
        cr_assert_not_null(got, "accepted: %s", bad[i].in);
        cr_assert_str_eq(got, bad[i].want, "for %s", bad[i].in);
    }
    /* more than 64 rules */
    char big[4096] = "{\"rules\":[";
    for (int i = 0; i < 65; i++)
        strcat(big, i ? ",{\"action\":\"gone\"}" : "{\"action\":\"gone\"}");
    strcat(big, "]}");
    cr_assert_str_eq(parse_msg(big, NULL), "rules: at most 64 rules (got 65)");
}

/* ---- raw HTTP with the headers faults add ---- */

typedef struct fr {
    long status;
    char *body;
    size_t len;
    char retry_after[32];
    CURLcode curl;
    double secs;
} fr;

static size_t fr_write(char *data, size_t sz, size_t n, void *ud)
{
    fr *r = ud;
    char *nb = realloc(r->body, r->len + sz * n + 1);
    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, data, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t fr_header(char *data, size_t sz, size_t n, void *ud)
{
    fr *r = ud;
    if (sz * n > 13 && !strncasecmp(data, "Retry-After: ", 13))
        snprintf(r->retry_after, sizeof(r->retry_after), "%.*s", (int)strcspn(data + 13, "\r\n"),
                 data + 13);
    return sz * n;
}

/* A request over plain HTTP as the admin with a User-Agent (NULL: "ks-faults-test/1.0"). */
static fr req(const char *method, const char *path, const char *ua, const char *body,
              long timeout_ms)
{
    fr r = {0};
    CURL *h = curl_easy_init();
    char url[1024], auth[300], uah[300], ct[] = "Content-Type: application/json";
    snprintf(url, sizeof(url), "%s%s", ka.sim.http_url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ka.token);
    snprintf(uah, sizeof(uah), "User-Agent: %s", ua ? ua : "ks-faults-test/1.0");
    struct curl_slist *hl = curl_slist_append(NULL, auth);
    hl = curl_slist_append(hl, uah);
    hl = curl_slist_append(hl, ct);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fr_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, fr_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    int64_t t0 = ms_now();
    r.curl = curl_easy_perform(h);
    r.secs = (double)(ms_now() - t0) / 1000.0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return r;
}

static json_t *fr_json(const fr *r)
{
    json_error_t je;
    json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, &je);
    cr_assert_not_null(j, "not JSON (%s): %.300s", je.text, r->body ? r->body : "");
    return j;
}

static void install(const char *rules)
{
    json_error_t je;
    json_t *doc = json_loads(rules, 0, &je);
    cr_assert_not_null(doc, "test JSON: %s", je.text);
    kc_err err;
    cr_assert_eq(ks_faults_install(&ka.sim, doc, &err), KC_OK, "%s", err.msg);
    json_decref(doc);
}

/* The counter field of rule `name` ("matched" / "injected"). */
static long long counter(const char *name, const char *field)
{
    json_t *st = ks_faults_status(&ka.sim);
    size_t i;
    json_t *c;
    long long v = -1;
    json_array_foreach(json_object_get(st, "counters"), i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "name")), name))
            v = json_integer_value(json_object_get(c, field));
    }
    json_decref(st);
    cr_assert_geq(v, 0, "no rule %s", name);
    return v;
}

static void make_cm(const char *name)
{
    json_t *cm = ka_cm(name, "k", "v");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK, "%s",
                 err.msg);
    json_decref(cm);
}

static const char CMS[] = "/api/v1/namespaces/default/configmaps";

/* ---- error ---- */

Test(faults, error_every_third_request_with_retry_after)
{
    install("{\"rules\":[{\"name\":\"e3\",\"match\":{\"resources\":[\"configmaps\"]},\"every\":3,"
            "\"action\":\"error\",\"code\":503,\"retryAfter\":2}]}");
    for (int i = 1; i <= 9; i++) {
        fr r = req("GET", CMS, NULL, NULL, 0);
        cr_assert_eq(r.curl, CURLE_OK);
        if (i % 3 == 0) {
            cr_assert_eq(r.status, 503, "request %d: %ld", i, r.status);
            cr_assert_str_eq(r.retry_after, "2", "request %d", i);
            json_t *st = fr_json(&r);
            const char *msg = ka_status(st, 503, "ServiceUnavailable");
            cr_assert_str_eq(msg, "the server is currently unable to handle the request "
                                  "(injected by kubesim fault rule \"e3\")");
            cr_assert_eq(json_integer_value(
                             json_object_get(json_object_get(st, "details"), "retryAfterSeconds")),
                         2);
            json_decref(st);
        } else {
            cr_assert_eq(r.status, 200, "request %d: %ld %s", i, r.status, r.body);
            cr_assert_str_eq(r.retry_after, "");
        }
        free(r.body);
    }
    cr_assert_eq(counter("e3", "matched"), 9);
    cr_assert_eq(counter("e3", "injected"), 3);
    /* other resources and kubesim's own endpoints are not faulted */
    fr r = req("GET", "/api/v1/namespaces", NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    free(r.body);
    cr_assert_eq(counter("e3", "matched"), 9);
}

Test(faults, error_429_and_500_reasons_and_custom_message)
{
    install("{\"rules\":[{\"name\":\"tm\",\"match\":{\"verbs\":[\"list\"]},\"action\":\"error\","
            "\"code\":429},{\"name\":\"ie\",\"match\":{\"verbs\":[\"get\"]},\"action\":\"error\","
            "\"code\":500,\"message\":\"etcdserver: leader changed\"}]}");
    fr r = req("GET", CMS, NULL, NULL, 0);
    json_t *st = fr_json(&r);
    cr_assert_str_eq(ka_status(st, 429, "TooManyRequests"),
                     "Too many requests, please try again later. (injected by kubesim fault rule "
                     "\"tm\")");
    cr_assert_str_eq(r.retry_after, "", "no Retry-After unless asked for");
    json_decref(st);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default", NULL, NULL, 0);
    st = fr_json(&r);
    cr_assert_str_eq(ka_status(st, 500, "InternalError"), "etcdserver: leader changed");
    json_decref(st);
    free(r.body);
}

/* ---- the endpoint ---- */

Test(faults, endpoint_installs_reports_and_clears_over_http)
{
    fr r = req("POST", "/kubesim/v1/faults", NULL,
               "{\"rules\":[{\"name\":\"x\",\"action\":\"error\",\"match\":{\"resources\":["
               "\"secrets\"]}}]}",
               0);
    cr_assert_eq(r.status, 200, "%s", r.body);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default/secrets", NULL, NULL, 0);
    cr_assert_eq(r.status, 503);
    free(r.body);
    r = req("GET", "/kubesim/v1/faults", NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    json_t *j = fr_json(&r);
    json_t *rule = json_array_get(json_object_get(j, "rules"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(rule, "name")), "x");
    json_t *c = json_array_get(json_object_get(j, "counters"), 0);
    cr_assert_eq(json_integer_value(json_object_get(c, "injected")), 1);
    cr_assert(json_is_true(json_object_get(c, "active")));
    json_decref(j);
    free(r.body);
    /* a bad set is refused with the parser's message and the old one stays */
    r = req("POST", "/kubesim/v1/faults", NULL, "{\"rules\":[{\"action\":\"eror\"}]}", 0);
    j = fr_json(&r);
    cr_assert_str_eq(ka_status(j, 400, "BadRequest"),
                     "rules[0].action: unknown action \"eror\" (want error, delay, cutWatch, "
                     "gone, refuse, conflict)");
    json_decref(j);
    free(r.body);
    r = req("POST", "/kubesim/v1/faults", NULL, "{\"rules\":", 0);
    cr_assert_eq(r.status, 400);
    free(r.body);
    cr_assert_eq(counter("x", "injected"), 1);
    r = req("DELETE", "/kubesim/v1/faults", NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    j = fr_json(&r);
    cr_assert_eq(json_array_size(json_object_get(j, "rules")), 0);
    json_decref(j);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default/secrets", NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    free(r.body);
}

Test(faults, endpoint_is_for_the_admin_only)
{
    ka_stop();
    ka_start_opts(true, false); /* RBAC on */
    json_t *sa = json_pack("{s:{s:s}}", "metadata", "name", "robot");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_SERVICEACCOUNTS, "default", sa, NULL, &err), KC_OK, "%s",
                 err.msg);
    json_decref(sa);
    char *tok = ks_auth_sa_token(&ka.sim, "default", "robot");
    cr_assert_not_null(tok);
    ka_resp r = ka_http_ex("GET", ka.sim.server_url, "/kubesim/v1/faults", tok, NULL, NULL, 0);
    cr_assert_eq(r.status, 403, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http_ex("POST", ka.sim.server_url, "/kubesim/v1/faults", tok, NULL,
                   "{\"rules\":[{\"action\":\"error\"}]}", 0);
    cr_assert_eq(r.status, 403, "%s", r.body);
    ka_resp_free(&r);
    free(tok);
    json_t *st = ks_faults_status(&ka.sim);
    cr_assert_eq(json_array_size(json_object_get(st, "rules")), 0);
    json_decref(st);
    r = ka_http_ex("GET", ka.sim.server_url, "/kubesim/v1/faults", ka.token, NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
}

/* ---- matching and time ---- */

Test(faults, match_by_user_agent_verb_resource_and_namespace)
{
    install("{\"rules\":[{\"name\":\"ua\",\"match\":{\"userAgent\":\"gpu-operator\"},"
            "\"action\":\"error\"},{\"name\":\"vr\",\"match\":{\"verbs\":[\"list\"],"
            "\"resources\":[\"secrets\"],\"namespace\":\"default\"},\"action\":\"error\","
            "\"code\":500}]}");
    fr r = req("GET", CMS, "gpu-operator@v1/linux", NULL, 0);
    cr_assert_eq(r.status, 503);
    free(r.body);
    r = req("GET", CMS, "kubectl/v1.32", NULL, 0);
    cr_assert_eq(r.status, 200);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default/secrets", NULL, NULL, 0);
    cr_assert_eq(r.status, 500);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default/secrets/nope", NULL, NULL, 0);
    cr_assert_eq(r.status, 404, "get is not list");
    free(r.body);
    r = req("GET", "/api/v1/secrets", NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "every namespace is not namespace default");
    free(r.body);
    cr_assert_eq(counter("ua", "injected"), 1);
    cr_assert_eq(counter("vr", "injected"), 1);
}

Test(faults, after_and_seconds_bound_the_rule)
{
    install("{\"rules\":[{\"name\":\"w\",\"after\":0.5,\"seconds\":2,\"action\":\"error\"}]}");
    fr r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "not active before `after`");
    free(r.body);
    sleep_ms(700);
    r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 503, "active");
    free(r.body);
    sleep_ms(2000);
    r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "expired after `seconds`");
    free(r.body);
    cr_assert_eq(counter("w", "injected"), 1);
}

Test(faults, probability_with_a_seed_is_repeatable)
{
    int first[20], second[20], hits = 0;
    for (int round = 0; round < 2; round++) {
        install("{\"rules\":[{\"name\":\"p\",\"probability\":0.5,\"seed\":42,"
                "\"action\":\"error\"}]}");
        for (int i = 0; i < 20; i++) {
            fr r = req("GET", CMS, NULL, NULL, 0);
            (round ? second : first)[i] = (int)r.status;
            hits += round == 0 && r.status == 503;
            free(r.body);
        }
    }
    cr_assert_arr_eq(first, second, sizeof(first));
    cr_assert(hits > 2 && hits < 18, "hits %d", hits);
}

/* ---- delay ---- */

Test(faults, delay_holds_the_response)
{
    install("{\"rules\":[{\"name\":\"d\",\"match\":{\"verbs\":[\"list\"]},\"action\":\"delay\","
            "\"delayMs\":800}]}");
    fr r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    cr_assert_geq(r.secs, 0.79, "took %.3f s", r.secs);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default", NULL, NULL, 0);
    cr_assert_lt(r.secs, 0.5, "a get is not delayed (%.3f s)", r.secs);
    free(r.body);
    cr_assert_eq(counter("d", "injected"), 1);
}

/* ---- conflict ---- */

Test(faults, conflict_answers_writes_with_409_not_reads)
{
    make_cm("c1");
    install("{\"rules\":[{\"name\":\"cf\",\"action\":\"conflict\"}]}");
    fr r = req("POST", CMS, NULL,
               "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c2\"}}", 0);
    json_t *st = fr_json(&r);
    cr_assert_str_eq(ka_status(st, 409, "Conflict"),
                     "Operation cannot be fulfilled on configmaps \"c2\": the object has been "
                     "modified; please apply your changes to the latest version and try again");
    json_decref(st);
    free(r.body);
    r = req("PUT", "/api/v1/namespaces/default/configmaps/c1", NULL,
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c1\"}}", 0);
    st = fr_json(&r);
    cr_assert_str_eq(ka_status(st, 409, "Conflict"),
                     "Operation cannot be fulfilled on configmaps \"c1\": the object has been "
                     "modified; please apply your changes to the latest version and try again");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "details"), "name")),
                     "c1");
    json_decref(st);
    free(r.body);
    r = req("DELETE", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, 0);
    cr_assert_eq(r.status, 409);
    free(r.body);
    r = req("GET", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "reads pass: %s", r.body);
    free(r.body);
    r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    free(r.body);
    cr_assert_eq(counter("cf", "matched"), 3, "reads do not count");
    cr_assert_eq(counter("cf", "injected"), 3);
    ks_faults_clear(&ka.sim);
    r = req("GET", "/api/v1/namespaces/default/configmaps/c2", NULL, NULL, 0);
    cr_assert_eq(r.status, 404, "the conflicting create wrote nothing");
    free(r.body);
}

/* ---- gone ---- */

Test(faults, gone_expires_resumed_watches_and_continued_lists)
{
    make_cm("g1");
    install("{\"rules\":[{\"name\":\"gn\",\"action\":\"gone\"}]}");
    char path[256];
    snprintf(path, sizeof(path), "%s?watch=true&resourceVersion=1&timeoutSeconds=5", CMS);
    fr r = req("GET", path, NULL, NULL, 0);
    cr_assert_eq(r.curl, CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_lt(r.secs, 2.0, "the stream ends after the ERROR event");
    cr_assert_eq(strchr(r.body, '\n') - r.body + 1, (long)r.len, "one line: %s", r.body);
    json_t *ev = fr_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "ERROR");
    const char *msg = ka_status(json_object_get(ev, "object"), 410, "Expired");
    cr_assert(!strncmp(msg, "too old resource version: 1 (", 29), "%s", msg);
    json_decref(ev);
    free(r.body);
    /* a list continuing */
    snprintf(path, sizeof(path), "%s?limit=1&continue=abc", CMS);
    r = req("GET", path, NULL, NULL, 0);
    json_t *st = fr_json(&r);
    msg = ka_status(st, 410, "Expired");
    cr_assert(!strncmp(msg, "The provided continue parameter is too old", 42), "%s", msg);
    json_decref(st);
    free(r.body);
    /* new watches and first pages are not resuming: untouched, not counted */
    snprintf(path, sizeof(path), "%s?watch=true&timeoutSeconds=1", CMS);
    r = req("GET", path, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "\"ADDED\"") && strstr(r.body, "g1"), "%s", r.body);
    free(r.body);
    r = req("GET", CMS, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    free(r.body);
    cr_assert_eq(counter("gn", "matched"), 2);
    cr_assert_eq(counter("gn", "injected"), 2);
}

/* ---- cutWatch ---- */

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

Test(faults, cut_watch_after_events_ends_the_stream_midway)
{
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "w%d", i);
        make_cm(name);
    }
    install("{\"rules\":[{\"name\":\"cw\",\"match\":{\"resources\":[\"configmaps\"]},"
            "\"action\":\"cutWatch\",\"afterEvents\":2}]}");
    char path[256];
    snprintf(path, sizeof(path), "%s?watch=true&timeoutSeconds=10", CMS);
    fr r = req("GET", path, NULL, NULL, 0);
    cr_assert_neq(r.curl, CURLE_OK, "the stream is cut, not ended cleanly");
    cr_assert_neq(r.curl, CURLE_OPERATION_TIMEDOUT);
    cr_assert_eq(r.status, 200);
    cr_assert_lt(r.secs, 5.0);
    cr_assert_eq(count_lines(r.body), 2, "exactly 2 events: %s", r.body);
    cr_assert_null(strstr(r.body, "ERROR"));
    free(r.body);
    cr_assert_eq(counter("cw", "injected"), 1);
    /* a watch of another resource is not cut */
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/secrets?watch=true&timeoutSeconds=1");
    r = req("GET", path, NULL, NULL, 0);
    cr_assert_eq(r.curl, CURLE_OK);
    free(r.body);
    cr_assert_eq(counter("cw", "matched"), 1);
}

typedef struct bg_watch {
    fr r;
} bg_watch;

/* Waits until the server has counted `n` configmap watches of this test's client. */
static void wait_watches(long long n)
{
    int64_t deadline = ms_now() + 5000;
    for (;;) {
        json_t *st = ks_server_request_stats(&ka.sim);
        json_t *c = json_object_get(json_object_get(st, "clients"), "admin ks-faults-test");
        long long got =
            json_integer_value(json_object_get(json_object_get(c, "requests"), "watch configmaps"));
        json_decref(st);
        if (got >= n)
            break;
        cr_assert_lt(ms_now(), deadline, "the watch did not start");
        sleep_ms(20);
    }
    sleep_ms(200); /* its handler has sent the first event */
}

static void *watch_thread(void *arg)
{
    bg_watch *w = arg;
    char path[256];
    snprintf(path, sizeof(path), "%s?watch=true&resourceVersion=0&timeoutSeconds=20", CMS);
    w->r = req("GET", path, NULL, NULL, 30000);
    return NULL;
}

Test(faults, cut_watch_zero_cuts_open_streams_now)
{
    make_cm("z1");
    bg_watch w = {0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, watch_thread, &w), 0);
    wait_watches(1);
    int64_t t0 = ms_now();
    install("{\"rules\":[{\"name\":\"cw0\",\"action\":\"cutWatch\",\"afterEvents\":0}]}");
    pthread_join(t, NULL);
    cr_assert_lt(ms_now() - t0, 3000, "cut within a poll period, not at the watch's timeout");
    cr_assert_neq(w.r.curl, CURLE_OK);
    cr_assert_eq(count_lines(w.r.body), 1, "the one event before the cut: %s", w.r.body);
    free(w.r.body);
    cr_assert_eq(counter("cw0", "injected"), 1);
}

/* ---- refuse ---- */

static int try_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    int e = errno;
    close(fd);
    return rc == 0 ? 0 : e;
}

Test(faults, refuse_takes_the_server_down_then_back_with_its_state)
{
    make_cm("kept");
    int http = ka.sim.server->http_port, https = ka.sim.server->https_port;
    bg_watch w = {0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, watch_thread, &w), 0);
    wait_watches(1);
    install("{\"rules\":[{\"name\":\"down\",\"action\":\"refuse\",\"seconds\":2}]}");
    sleep_ms(700);
    cr_assert_eq(try_connect(http), ECONNREFUSED);
    cr_assert_eq(try_connect(https), ECONNREFUSED);
    pthread_join(t, NULL); /* the open watch was closed */
    cr_assert_eq(count_lines(w.r.body), 1, "%s", w.r.body);
    free(w.r.body);
    cr_assert_eq(counter("down", "injected"), 1);
    int64_t deadline = ms_now() + 5000;
    while (try_connect(http) != 0 && ms_now() < deadline)
        sleep_ms(100);
    cr_assert_eq(try_connect(http), 0, "listening again");
    cr_assert_eq(try_connect(https), 0);
    fr r = req("GET", "/api/v1/namespaces/default/configmaps/kept", NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "the state is kept: %s", r.body);
    free(r.body);
    ka_resp k = ka_http("GET", "/api/v1/namespaces/default/configmaps/kept", NULL, NULL, NULL);
    cr_assert_eq(k.status, 200, "HTTPS too");
    ka_resp_free(&k);
    /* one outage per rule: it is spent */
    sleep_ms(500);
    cr_assert_eq(try_connect(http), 0);
    json_t *st = ks_faults_status(&ka.sim);
    cr_assert(json_is_false(json_object_get(st, "refusing")));
    json_decref(st);
}

Test(faults, refuse_on_a_matching_request_closes_it)
{
    install("{\"rules\":[{\"name\":\"r1\",\"match\":{\"resources\":[\"secrets\"]},"
            "\"action\":\"refuse\",\"seconds\":1}]}");
    sleep_ms(400);
    cr_assert_eq(try_connect(ka.sim.server->http_port), 0, "waits for a matching request");
    fr r = req("GET", "/api/v1/namespaces/default/secrets", NULL, NULL, 0);
    cr_assert_neq(r.curl, CURLE_OK, "the triggering request gets no answer");
    free(r.body);
    sleep_ms(300);
    cr_assert_eq(try_connect(ka.sim.server->http_port), ECONNREFUSED);
    sleep_ms(1500);
    r = req("GET", "/api/v1/namespaces/default/secrets", NULL, NULL, 0);
    cr_assert_eq(r.status, 200, "back, and the rule is spent");
    free(r.body);
}

Test(faults, server_stops_cleanly_during_an_outage)
{
    install("{\"rules\":[{\"name\":\"long\",\"action\":\"refuse\",\"seconds\":30}]}");
    sleep_ms(600);
    cr_assert_eq(try_connect(ka.sim.server->http_port), ECONNREFUSED);
    int64_t t0 = ms_now();
    kc_client_free(ka.c);
    ka.c = NULL;
    ks_server_stop(&ka.sim);
    cr_assert_lt(ms_now() - t0, 3000);
}

/* ---- libkube's client retries through injected 503s ---- */

Test(faults, kc_client_retries_through_every_second_503)
{
    make_cm("r1");
    install("{\"rules\":[{\"name\":\"flaky\",\"match\":{\"resources\":[\"configmaps\"]},"
            "\"every\":2,\"action\":\"error\",\"code\":503,\"retryAfter\":1}]}");
    kc_config cfg = {0};
    cfg.server = ka.sim.server_url;
    cfg.ca_pem = ka.sim.ca_pem;
    cfg.ca_pem_len = strlen(ka.sim.ca_pem);
    cfg.token = (char *)ka.token;
    kc_client_opts o = {.qps = -1, .max_retries = 3, .timeout_ms = 10000, .user_agent = "gpu-op"};
    kc_client *c = NULL;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &c, &err), KC_OK, "%s", err.msg);
    int64_t t0 = ms_now();
    for (int i = 0; i < 3; i++) {
        json_t *out = NULL;
        cr_assert_eq(kc_get(c, &KC_RES_CONFIGMAPS, "default", "r1", &out, &err), KC_OK,
                     "get %d: %s", i, err.msg);
        json_decref(out);
    }
    int64_t took = ms_now() - t0;
    kc_client_free(c);
    /* requests 1 ok, 2 503 → retried after 1 s as 3 ok, 4 503 → 5 ok, 6 503 would be next */
    cr_assert_eq(counter("flaky", "matched"), 5);
    cr_assert_eq(counter("flaky", "injected"), 2);
    cr_assert_geq(took, 1900, "Retry-After honoured (%lld ms)", (long long)took);
}
