/* kc_exec: runs exec credential plugins and reads the ExecCredential they print. */
#include "kc_exec.h"
#include "kc_base64.h"
#include "kc_yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define EXEC_INFO_VAR "KUBERNETES_EXEC_INFO"
#define READ_CHUNK    16384

/* ---- ExecCredential parsing ----------------------------------------------------------------- */

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static bool leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 0001-01-01 to y-01-01 in the proleptic Gregorian calendar (y >= 1). */
static int64_t days_before(int64_t y)
{
    y -= 1;
    return 365 * y + y / 4 - y / 100 + y / 400;
}

bool kc_exec_parse_time(const char *s, time_t *out)
{
    static const int cum[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
    if (!s || strlen(s) < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
        s[7] != '-' || !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
        !digits(s + 17, 2, &sec))
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        /* Fractional seconds: any number of digits, at least one; below our resolution. */
        const char *q = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == q)
            return false;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p == '+' ? 1 : -1;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om))
            return false;
        p += 6;
    } else {
        return false;
    }
    /* RFC 3339 allows a leap second (60); Go's time.Parse, which client-go uses, does not. */
    if (*p || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y)) || h > 23 ||
        mi > 59 || sec > 59 || oh > 23 || om > 59)
        return false;
    /* Shifted by 400 years (a whole Gregorian cycle) so that year 0000 stays in range. */
    int64_t days = days_before((int64_t)y + 400) - days_before(1970 + 400) + cum[mo - 1] +
                   (mo > 2 && leap(y)) + (d - 1);
    int64_t t = days * 86400 + h * 3600 + mi * 60 + sec - sign * (oh * 3600 + om * 60);
    *out = (time_t)t;
    return true;
}

/* What jansson found wrong, in fixed words: its own text quotes the input near the fault, which
 * may be part of a token. */
static const char *json_problem(const json_error_t *je)
{
    switch (json_error_code(je)) {
    case json_error_out_of_memory:
        return "out of memory";
    case json_error_stack_overflow:
        return "nested too deeply";
    case json_error_invalid_utf8:
        return "invalid UTF-8";
    case json_error_premature_end_of_input:
        return "unexpected end of input";
    case json_error_end_of_input_expected:
        return "unexpected text after the JSON value";
    case json_error_null_character:
    case json_error_null_byte_in_key:
        return "NUL character";
    case json_error_duplicate_key:
        return "duplicate object key";
    case json_error_numeric_overflow:
        return "number out of range";
    default:
        return "invalid JSON syntax";
    }
}

/* True when v is a string that can be quoted in a message: printable ASCII, short. The checked
 * strings (kind, apiVersion, expirationTimestamp) are never secrets, but the output is not
 * trusted to be well-behaved. */
static bool quotable(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x20 || s[n] > 0x7e || s[n] == '"' || n >= 100)
            return false;
    return true;
}

/* Gets the string at key, NULL when absent, null or "". */
static kc_code cred_str(const json_t *obj, const char *path, const char *key, const char **out,
                        kc_err *err)
{
    *out = NULL;
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_string(v))
        return kc_err_set(err, KC_EPARSE, "%s%s: expected a string, got %s", path, key,
                          kc_json_kind(v, false));
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return KC_OK;
}

/* Checks a top-level identifying field (kind, apiVersion) against what it must be. */
static kc_code cred_expect(const json_t *doc, const char *key, const char *want, kc_err *err)
{
    const char *v;
    kc_code rc = cred_str(doc, "", key, &v, err);
    if (rc)
        return rc;
    if (!v)
        return kc_err_set(err, KC_EPARSE, "%s is missing (expected \"%s\")", key, want);
    if (strcmp(v, want) == 0)
        return KC_OK;
    if (quotable(v))
        return kc_err_set(err, KC_EPARSE, "%s is \"%s\", expected \"%s\"", key, v, want);
    return kc_err_set(err, KC_EPARSE, "%s is not \"%s\"", key, want);
}

static char *dup_secret(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n + 1);
        if (len)
            *len = n;
    }
    return r;
}

kc_code kc_exec_parse_credential(const char *buf, size_t len, const char *api_version,
                                 kc_exec_result *out, kc_err *err)
{
    if (!out || (!buf && len) || !api_version)
        return kc_err_set(err, KC_EARG, "kc_exec_parse_credential: NULL argument");
    memset(out, 0, sizeof(*out));
    size_t blank = 0;
    while (blank < len && buf[blank] && strchr(" \t\r\n", buf[blank]))
        blank++;
    if (blank == len)
        return kc_err_set(err, KC_EPARSE,
                          "the output is empty (expected an ExecCredential in "
                          "JSON)");
    json_error_t je;
    json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        if (json_error_code(&je) == json_error_out_of_memory)
            return kc_err_set(err, KC_ENOMEM, "out of memory parsing an ExecCredential");
        return kc_err_set(err, KC_EPARSE, "invalid JSON at line %d, column %d: %s", je.line,
                          je.column, json_problem(&je));
    }
    kc_code rc;
    const json_t *status = NULL;
    if (!json_is_object(doc)) {
        rc = kc_err_set(err, KC_EPARSE, "expected an ExecCredential object, got %s",
                        kc_json_kind(doc, false));
        goto drop_doc;
    }
    rc = cred_expect(doc, "kind", "ExecCredential", err);
    if (!rc)
        rc = cred_expect(doc, "apiVersion", api_version, err);
    if (rc)
        goto drop_doc;
    status = json_object_get(doc, "status");
    if (!status || json_is_null(status)) {
        rc = kc_err_set(err, KC_EPARSE, "status is missing");
        goto drop_doc;
    }
    if (!json_is_object(status)) {
        rc = kc_err_set(err, KC_EPARSE, "status: expected an object, got %s",
                        kc_json_kind(status, false));
        goto drop_doc;
    }
    const char *token, *cert, *key, *exp;
    rc = cred_str(status, "status.", "token", &token, err);
    if (!rc)
        rc = cred_str(status, "status.", "clientCertificateData", &cert, err);
    if (!rc)
        rc = cred_str(status, "status.", "clientKeyData", &key, err);
    if (!rc)
        rc = cred_str(status, "status.", "expirationTimestamp", &exp, err);
    if (rc)
        goto drop_doc;
    if (!cert != !key) {
        rc = kc_err_set(err, KC_EPARSE, "status.%s is set but status.%s is not",
                        cert ? "clientCertificateData" : "clientKeyData",
                        cert ? "clientKeyData" : "clientCertificateData");
        goto drop_doc;
    }
    if (!token && !cert) {
        rc = kc_err_set(err, KC_EPARSE,
                        "status holds neither a token nor clientCertificateData and "
                        "clientKeyData");
        goto drop_doc;
    }
    if (token) {
        /* The token goes into an Authorization header: a control character would end it. */
        for (const char *c = token; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                rc = kc_err_set(err, KC_EPARSE, "status.token holds a control character");
                goto drop_doc;
            }
        }
    }
    if (exp) {
        if (!kc_exec_parse_time(exp, &out->expires)) {
            if (quotable(exp))
                rc = kc_err_set(err, KC_EPARSE,
                                "status.expirationTimestamp \"%s\" is not an RFC 3339 time "
                                "(such as 2026-11-26T18:00:00Z)",
                                exp);
            else
                rc = kc_err_set(err, KC_EPARSE,
                                "status.expirationTimestamp is not an RFC 3339 time (such as "
                                "2026-11-26T18:00:00Z)");
            goto drop_doc;
        }
        /* 0 means "never expires": an expiry at or before the epoch is simply in the past. */
        if (out->expires <= 0)
            out->expires = 1;
    }
    if ((token && !(out->token = dup_secret(token, NULL))) ||
        (cert && !(out->client_cert_pem = dup_secret(cert, &out->client_cert_pem_len))) ||
        (key && !(out->client_key_pem = dup_secret(key, &out->client_key_pem_len)))) {
        kc_exec_result_free(out);
        rc = kc_err_set(err, KC_ENOMEM, "out of memory copying an ExecCredential");
        goto drop_doc;
    }
    rc = KC_OK;
drop_doc:
    if (rc)
        out->expires = 0;
    /* jansson frees the strings without clearing them; the credential was in there. */
    if (json_is_object(status)) {
        static const char *const secret[] = {"token", "clientKeyData"};
        for (size_t i = 0; i < 2; i++) {
            json_t *v = json_object_get(status, secret[i]);
            if (json_is_string(v))
                explicit_bzero((char *)json_string_value(v), json_string_length(v));
        }
    }
    json_decref(doc);
    return rc;
}

void kc_exec_result_free(kc_exec_result *r)
{
    if (!r)
        return;
    if (r->token)
        explicit_bzero(r->token, strlen(r->token));
    free(r->token);
    free(r->client_cert_pem);
    if (r->client_key_pem)
        explicit_bzero(r->client_key_pem, r->client_key_pem_len);
    free(r->client_key_pem);
    memset(r, 0, sizeof(*r));
}

/* ---- configuration copies ------------------------------------------------------------------- */

void kc_exec_config_free(kc_exec_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->api_version);
    free(cfg->command);
    for (size_t i = 0; i < cfg->n_args; i++)
        free(cfg->args[i]);
    free(cfg->args);
    for (size_t i = 0; i < cfg->n_env; i++) {
        free(cfg->env[i].name);
        free(cfg->env[i].value);
    }
    free(cfg->env);
    free(cfg->install_hint);
    free(cfg->cluster.tls_server_name);
    free(cfg->cluster.proxy_url);
    free(cfg->cluster.config_json);
    free(cfg);
}

kc_exec_config *kc_exec_config_dup(const kc_exec_config *cfg)
{
    if (!cfg)
        return NULL;
    kc_exec_config *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    bool ok = true;
#define DUP_STR(f)                                                                                 \
    do {                                                                                           \
        if (cfg->f && !(c->f = strdup(cfg->f)))                                                    \
            ok = false;                                                                            \
    } while (0)
    DUP_STR(api_version);
    DUP_STR(command);
    DUP_STR(install_hint);
    DUP_STR(cluster.tls_server_name);
    DUP_STR(cluster.proxy_url);
    DUP_STR(cluster.config_json);
#undef DUP_STR
    c->interactive_mode = cfg->interactive_mode;
    c->provide_cluster_info = cfg->provide_cluster_info;
    c->cluster.insecure_skip_tls_verify = cfg->cluster.insecure_skip_tls_verify;
    c->cluster.disable_compression = cfg->cluster.disable_compression;
    c->timeout_ms = cfg->timeout_ms;
    if (ok && cfg->n_args) {
        c->args = calloc(cfg->n_args, sizeof(*c->args));
        ok = c->args != NULL;
        for (size_t i = 0; ok && i < cfg->n_args; i++, c->n_args++)
            ok = (c->args[i] = strdup(cfg->args[i])) != NULL;
    }
    if (ok && cfg->n_env) {
        c->env = calloc(cfg->n_env, sizeof(*c->env));
        ok = c->env != NULL;
        for (size_t i = 0; ok && i < cfg->n_env; i++, c->n_env++) {
            c->env[i].name = strdup(cfg->env[i].name);
            c->env[i].value = strdup(cfg->env[i].value);
            ok = c->env[i].name && c->env[i].value;
        }
    }
    if (!ok) {
        kc_exec_config_free(c);
        return NULL;
    }
    return c;
}

/* ---- running the plugin --------------------------------------------------------------------- */

static bool api_supported(const char *v)
{
    return v && (strcmp(v, KC_EXEC_API_V1) == 0 || strcmp(v, KC_EXEC_API_V1BETA1) == 0);
}

/* Appends "; install hint: ..." with the hint's line breaks folded, so the message stays one
 * line in the logs. */
static void hint_suffix(const kc_exec_config *cfg, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!cfg->install_hint || !cfg->install_hint[0])
        return;
    size_t n = (size_t)snprintf(buf, size, "; install hint: ");
    bool space = false;
    for (const char *c = cfg->install_hint; *c && n + 1 < size; c++) {
        if (*c == '\n' || *c == '\r' || *c == '\t' || *c == ' ') {
            space = true;
            continue;
        }
        if (space && n + 2 < size)
            buf[n++] = ' ';
        space = false;
        buf[n++] = *c;
    }
    buf[n] = '\0';
}

static bool is_executable_file(const char *path, int *e)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        *e = errno;
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        *e = EISDIR;
        return false;
    }
    if (access(path, X_OK) != 0) {
        /* Told apart from a failing stat: this file is there but may not be run. */
        *e = errno == EACCES ? -1 : errno;
        return false;
    }
    return true;
}

/* Finds what to run: a command with a '/' as it is, a bare name in $PATH. Looking it up here
 * rather than with posix_spawnp makes "not found" a message with the install hint in every
 * environment (a failed exec inside posix_spawn is not always reported back to the parent). */
static kc_code resolve_command(const kc_exec_config *cfg, char **path, kc_err *err)
{
    const char *cmd = cfg->command;
    char hint[KC_ERR_MSG_MAX];
    int e = 0;
    *path = NULL;
    hint_suffix(cfg, hint, sizeof(hint));
    if (strchr(cmd, '/')) {
        if (is_executable_file(cmd, &e)) {
            *path = strdup(cmd);
            if (!*path)
                return kc_err_set(err, KC_ENOMEM, "out of memory running an exec plugin");
            return KC_OK;
        }
        if (e == ENOENT || e == ENOTDIR)
            return kc_err_set(err, KC_ECONFIG, "exec plugin \"%s\": not found%s", cmd, hint);
        return kc_err_set(err, KC_ECONFIG, "exec plugin \"%s\": cannot run it: %s%s", cmd,
                          e == -1 ? "not executable" : strerror(e), hint);
    }
    const char *env = getenv("PATH");
    const char *p = env ? env : "";
    while (*p) {
        size_t n = strcspn(p, ":");
        /* Directories that are not absolute are skipped: like Go's exec.LookPath (Go 1.19 on),
         * a plugin is never taken from wherever the current directory happens to be. */
        if (n > 0 && p[0] == '/') {
            char *cand = NULL;
            if (asprintf(&cand, "%.*s/%s", (int)n, p, cmd) < 0)
                return kc_err_set(err, KC_ENOMEM, "out of memory running an exec plugin");
            if (is_executable_file(cand, &e)) {
                *path = cand;
                return KC_OK;
            }
            free(cand);
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return kc_err_set(err, KC_ECONFIG, "exec plugin \"%s\": not found in PATH%s", cmd, hint);
}

/* The ExecCredential the plugin gets in KUBERNETES_EXEC_INFO; NULL on allocation failure (or a
 * field that is not UTF-8, which the loader never produces). */
static char *exec_info(const kc_exec_config *cfg, const char *server, const char *ca_pem)
{
    char *text = NULL, *ca64 = NULL;
    json_t *doc = json_object(), *spec = json_object(), *cluster = NULL;
    bool ok = doc && spec;
    ok = ok && !json_object_set_new(doc, "apiVersion", json_string(cfg->api_version));
    ok = ok && !json_object_set_new(doc, "kind", json_string("ExecCredential"));
    /* The operator has no terminal: a plugin must never wait for someone to type. */
    ok = ok && !json_object_set_new(spec, "interactive", json_false());
    if (ok && cfg->provide_cluster_info) {
        const kc_exec_cluster *c = &cfg->cluster;
        /* As client-go: every field but server is left out when empty. */
        ok = (cluster = json_object()) != NULL;
        ok = ok && !json_object_set_new(cluster, "server", json_string(server ? server : ""));
        if (ok && c->tls_server_name)
            ok = !json_object_set_new(cluster, "tls-server-name", json_string(c->tls_server_name));
        if (ok && c->insecure_skip_tls_verify)
            ok = !json_object_set_new(cluster, "insecure-skip-tls-verify", json_true());
        if (ok && ca_pem && ca_pem[0]) {
            ca64 = kc_base64_encode((const unsigned char *)ca_pem, strlen(ca_pem));
            ok = ca64 &&
                 !json_object_set_new(cluster, "certificate-authority-data", json_string(ca64));
        }
        if (ok && c->proxy_url)
            ok = !json_object_set_new(cluster, "proxy-url", json_string(c->proxy_url));
        if (ok && c->disable_compression)
            ok = !json_object_set_new(cluster, "disable-compression", json_true());
        if (ok && c->config_json)
            ok = !json_object_set_new(cluster, "config",
                                      json_loads(c->config_json, JSON_DECODE_ANY, NULL));
        ok = ok && !json_object_set(spec, "cluster", cluster);
    }
    ok = ok && !json_object_set(doc, "spec", spec);
    if (ok)
        text = json_dumps(doc, JSON_COMPACT);
    free(ca64);
    json_decref(cluster);
    json_decref(spec);
    json_decref(doc);
    return text;
}

/* Our environment with cfg->env on top (the last of a repeated name wins, as in Go) and info. The
 * strings from index *first_owned on are ours to free. */
static char **build_env(const kc_exec_config *cfg, const char *info, size_t *first_owned)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **envp = calloc(n + cfg->n_env + 2, sizeof(*envp));
    if (!envp)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *ent = environ[i];
        size_t len = strcspn(ent, "=");
        bool replaced = len == strlen(EXEC_INFO_VAR) && strncmp(ent, EXEC_INFO_VAR, len) == 0;
        for (size_t j = 0; !replaced && j < cfg->n_env; j++)
            replaced = strlen(cfg->env[j].name) == len && strncmp(ent, cfg->env[j].name, len) == 0;
        if (!replaced)
            envp[k++] = environ[i];
    }
    *first_owned = k;
    for (size_t j = 0; j < cfg->n_env; j++) {
        bool later = false;
        for (size_t l = j + 1; !later && l < cfg->n_env; l++)
            later = strcmp(cfg->env[j].name, cfg->env[l].name) == 0;
        if (later || strcmp(cfg->env[j].name, EXEC_INFO_VAR) == 0)
            continue;
        if (asprintf(&envp[k], "%s=%s", cfg->env[j].name, cfg->env[j].value) < 0)
            goto free_owned;
        k++;
    }
    if (asprintf(&envp[k], "%s=%s", EXEC_INFO_VAR, info) < 0)
        goto free_owned;
    return envp;
free_owned:
    envp[k] = NULL;
    for (size_t i = *first_owned; i < k; i++)
        free(envp[i]);
    free(envp);
    return NULL;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The plugin's stdout. Grown by copying, so that no freed block keeps a piece of a credential. */
typedef struct outbuf {
    char *data;
    size_t len, cap;
    bool eof, too_big;
} outbuf;

static void outbuf_free(outbuf *o)
{
    if (o->data)
        explicit_bzero(o->data, o->cap);
    free(o->data);
    o->data = NULL;
    o->len = o->cap = 0;
}

static bool outbuf_append(outbuf *o, const char *p, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *d = malloc(cap);
        if (!d)
            return false;
        if (o->len)
            memcpy(d, o->data, o->len);
        outbuf_free(&(outbuf){.data = o->data, .cap = o->cap});
        o->data = d;
        o->cap = cap;
    }
    memcpy(o->data + o->len, p, n);
    o->len += n;
    o->data[o->len] = '\0';
    return true;
}

/* Reads what fd has now (it is non-blocking); sets o->eof at end of file and o->too_big past the
 * cap. Returns 0, or an errno. */
static int drain(int fd, outbuf *o)
{
    char chunk[READ_CHUNK];
    int rc = 0;
    while (!o->eof && !o->too_big) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
            break;
        }
        if (r == 0) {
            o->eof = true;
        } else if (o->len + (size_t)r > KC_EXEC_MAX_OUTPUT) {
            o->too_big = true;
        } else if (!outbuf_append(o, chunk, (size_t)r)) {
            rc = ENOMEM;
            break;
        }
    }
    explicit_bzero(chunk, sizeof(chunk));
    return rc;
}

typedef enum outcome { RAN, TIMED_OUT, TOO_BIG, READ_FAILED } outcome;

/* Collects the child's stdout and its exit status until it exits, the deadline passes or the
 * output grows too big; then the child is killed when still running, and reaped in every case.
 * Once the child has exited, what is left in the pipe is read and reading stops, even without an
 * end of file: a process the plugin left behind may hold the pipe open. */
static outcome collect(pid_t pid, int fd, unsigned timeout_ms, outbuf *o, int *status,
                       int *read_errno)
{
    int64_t deadline = now_ms() + timeout_ms;
    int nap = 1;
    bool exited = false;
    outcome how = RAN;
    *read_errno = 0;
    for (;;) {
        if (!exited) {
            pid_t w = waitpid(pid, status, WNOHANG);
            exited = w == pid;
            if (w < 0 && errno != EINTR) {
                /* Reaped by someone else (a SIGCHLD handler of the program): nothing to wait for.
                 */
                *status = 0;
                exited = true;
            }
        }
        if (!o->eof) {
            *read_errno = drain(fd, o);
            if (*read_errno) {
                how = READ_FAILED;
                break;
            }
        }
        if (o->too_big) {
            how = TOO_BIG;
            break;
        }
        if (exited)
            break;
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            how = TIMED_OUT;
            break;
        }
        if (!o->eof) {
            /* The slice bounds how late an exit is noticed when a descendant keeps the pipe. */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            (void)poll(&pfd, 1, (int)(left < 100 ? left : 100));
        } else {
            /* Output complete, waiting for the exit: short naps, longer while it lingers. */
            (void)poll(NULL, 0, (int)(left < nap ? left : nap));
            nap = nap < 50 ? nap * 2 : 50;
        }
    }
    if (!exited) {
        (void)kill(pid, SIGKILL);
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
            ;
    }
    return how;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP:
        return " (SIGHUP)";
    case SIGINT:
        return " (SIGINT)";
    case SIGQUIT:
        return " (SIGQUIT)";
    case SIGABRT:
        return " (SIGABRT)";
    case SIGKILL:
        return " (SIGKILL)";
    case SIGSEGV:
        return " (SIGSEGV)";
    case SIGPIPE:
        return " (SIGPIPE)";
    case SIGTERM:
        return " (SIGTERM)";
    default:
        return "";
    }
}

/* Starts the plugin with stdin from /dev/null, stdout into out_fd and our stderr. */
static int spawn(const char *path, char *const argv[], char *const envp[], int out_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc)
        return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc)
        goto destroy_fa;
    rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* The plugin gets stdin, stdout and stderr only, even where some descriptor of the program
     * lacks close-on-exec: it must not hold our sockets open or write into them. */
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
    /* The plugin starts as from a shell: the operator may block signals for a signal-handling
     * thread or ignore SIGPIPE, and both would be inherited across exec. */
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    static const int reset[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP,
                                SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
        sigaddset(&defaults, reset[i]);
    if (!rc)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (!rc)
        rc = posix_spawnattr_setsigdefault(&attr, &defaults);
    if (!rc)
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (!rc)
        rc = posix_spawn(pid, path, &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
destroy_fa:
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* Moves fd above the standard descriptors (keeping close-on-exec), so that the dup2 onto stdout
 * in the child always makes a new descriptor. */
static int lift_fd(int fd)
{
    if (fd > STDERR_FILENO)
        return fd;
    int n = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(fd);
    return n;
}

kc_code kc_exec_run(const kc_exec_config *cfg, const char *server, const char *ca_pem,
                    kc_exec_result *out, kc_err *err)
{
    if (!cfg || !out || !cfg->command || !cfg->command[0])
        return kc_err_set(err, KC_EARG, "kc_exec_run: NULL argument or no command");
    memset(out, 0, sizeof(*out));
    const char *cmd = cfg->command;
    if (!api_supported(cfg->api_version))
        return kc_err_set(
            err, KC_ECONFIG,
            "exec plugin \"%s\": apiVersion \"%.100s\" is not supported (use " KC_EXEC_API_V1
            " or " KC_EXEC_API_V1BETA1 ")",
            cmd, cfg->api_version ? cfg->api_version : "");
    if (cfg->interactive_mode == KC_EXEC_INTERACTIVE_ALWAYS)
        return kc_err_set(err, KC_ECONFIG,
                          "exec plugin \"%s\": interactiveMode Always is not supported: the "
                          "operator has no terminal to give the plugin",
                          cmd);
    for (size_t i = 0; i < cfg->n_env; i++)
        if (!cfg->env[i].name || !cfg->env[i].name[0] || strchr(cfg->env[i].name, '=') ||
            !cfg->env[i].value)
            return kc_err_set(err, KC_EARG,
                              "exec plugin \"%s\": env[%zu] has no valid name or "
                              "value",
                              cmd, i);
    for (size_t i = 0; i < cfg->n_args; i++)
        if (!cfg->args[i])
            return kc_err_set(err, KC_EARG, "exec plugin \"%s\": args[%zu] is NULL", cmd, i);

    char *path = NULL;
    kc_code rc = resolve_command(cfg, &path, err);
    if (rc)
        return rc;
    size_t first_owned = 0;
    char **envp = NULL, **argv = NULL;
    char *info = exec_info(cfg, server, ca_pem);
    if (!info) {
        rc = kc_err_set(err, KC_ENOMEM, "exec plugin \"%s\": out of memory building %s", cmd,
                        EXEC_INFO_VAR);
        goto free_path;
    }
    envp = build_env(cfg, info, &first_owned);
    argv = calloc(cfg->n_args + 2, sizeof(*argv));
    if (!envp || !argv) {
        rc = kc_err_set(err, KC_ENOMEM, "exec plugin \"%s\": out of memory", cmd);
        goto free_env;
    }
    /* argv[0] is the command as configured, as Go's exec.Command sets it. */
    argv[0] = (char *)cmd;
    for (size_t i = 0; i < cfg->n_args; i++)
        argv[i + 1] = cfg->args[i];

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        rc = kc_err_set(err, KC_EIO, "exec plugin \"%s\": cannot create a pipe: %s", cmd,
                        strerror(errno));
        goto free_env;
    }
    fds[0] = lift_fd(fds[0]);
    fds[1] = lift_fd(fds[1]);
    if (fds[0] < 0 || fds[1] < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        rc = kc_err_set(err, KC_EIO, "exec plugin \"%s\": cannot set up its stdout: %s", cmd,
                        strerror(errno));
        goto close_pipe;
    }
    pid_t pid;
    int e = spawn(path, argv, envp, fds[1], &pid);
    if (e) {
        rc = kc_err_set(err, e == ENOMEM ? KC_ENOMEM : KC_EIO,
                        "exec plugin \"%s\": cannot start: %s", cmd, strerror(e));
        goto close_pipe;
    }
    /* Our copy of the write end must go, or the pipe never reaches end of file. */
    close(fds[1]);
    fds[1] = -1;

    outbuf o = {0};
    int status = 0, read_errno = 0;
    unsigned timeout = cfg->timeout_ms ? cfg->timeout_ms : KC_EXEC_DEFAULT_TIMEOUT_MS;
    switch (collect(pid, fds[0], timeout, &o, &status, &read_errno)) {
    case TIMED_OUT:
        if (timeout % 1000 == 0)
            rc = kc_err_set(err, KC_ETIMEDOUT,
                            "exec plugin \"%s\": did not finish within %u s and was killed", cmd,
                            timeout / 1000);
        else
            rc = kc_err_set(err, KC_ETIMEDOUT,
                            "exec plugin \"%s\": did not finish within %u ms and was killed", cmd,
                            timeout);
        goto free_out;
    case TOO_BIG:
        rc = kc_err_set(err, KC_EPARSE,
                        "exec plugin \"%s\": printed more than %u bytes on stdout (an "
                        "ExecCredential expected); it was stopped",
                        cmd, KC_EXEC_MAX_OUTPUT);
        goto free_out;
    case READ_FAILED:
        rc = kc_err_set(err, read_errno == ENOMEM ? KC_ENOMEM : KC_EIO,
                        "exec plugin \"%s\": reading its stdout: %s", cmd, strerror(read_errno));
        goto free_out;
    case RAN:
        break;
    }
    if (WIFSIGNALED(status)) {
        rc = kc_err_set(err, KC_EIO, "exec plugin \"%s\": killed by signal %d%s", cmd,
                        WTERMSIG(status), signal_name(WTERMSIG(status)));
        goto free_out;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        rc = kc_err_set(err, KC_EIO,
                        "exec plugin \"%s\": exited with status %d (its stderr is passed on to "
                        "ours)",
                        cmd, WEXITSTATUS(status));
        goto free_out;
    }
    rc = kc_exec_parse_credential(o.data ? o.data : "", o.len, cfg->api_version, out, err);
    if (rc)
        kc_err_prefix(err, "exec plugin \"%s\": stdout", cmd);
free_out:
    outbuf_free(&o);
close_pipe:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
free_env:
    if (envp) {
        for (size_t i = first_owned; envp[i]; i++)
            free(envp[i]);
        free(envp);
    }
    free(argv);
    if (info)
        explicit_bzero(info, strlen(info));
    free(info);
free_path:
    free(path);
    return rc;
}
