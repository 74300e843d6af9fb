/* kc_config: resolves kubeconfig files (merged as kubectl does) and in-cluster settings. */
#include "kc_config.h"
#include "kc_base64.h"
#include "kc_config_int.h"
#include "kc_exec.h"
#include "kc_url.h"
#include "kc_yaml.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define KUBECONFIG_MAX_BYTES (16u << 20)
#define REFERENCED_MAX_BYTES (4u << 20)

/* One kubeconfig of a merged set. */
typedef struct kcfile {
    char *path; /* as named, for messages */
    char *dir;  /* absolute directory that relative paths in the file resolve against */
    json_t *doc;
} kcfile;

typedef struct kcset {
    kcfile *files;
    size_t n;
    const char *label; /* what to call the whole set in messages (a path or the KUBECONFIG list) */
} kcset;

/* What an error is about: "kubeconfig F: context "c": user "u"". */
typedef struct where {
    char s[400];
} where;

static void kcset_free(kcset *set)
{
    for (size_t i = 0; i < set->n; i++) {
        free(set->files[i].path);
        free(set->files[i].dir);
        json_decref(set->files[i].doc);
    }
    free(set->files);
    set->files = NULL;
    set->n = 0;
}

__attribute__((format(printf, 3, 4))) static kc_code cfg_err(kc_err *err, const where *w,
                                                             const char *fmt, ...)
{
    char msg[KC_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kc_err_set(err, KC_ECONFIG, "%s: %s", w->s, msg);
}

static kc_code oom(kc_err *err)
{
    return kc_err_set(err, KC_ENOMEM, "out of memory loading the Kubernetes configuration");
}

/* Reads a string field; absent, null and "" all leave *out NULL (Go reads them alike). Messages
 * call the field prefix+key ("exec." "command"). */
static kc_code get_str_at(const json_t *obj, const char *prefix, const char *key, const where *w,
                          const char **out, kc_err *err)
{
    *out = NULL;
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_string(v))
        return cfg_err(err, w, "%s%s: expected a string, got %s", prefix, key,
                       kc_json_kind(v, true));
    if (json_string_length(v) != strlen(json_string_value(v)))
        return cfg_err(err, w, "%s%s: contains a NUL character", prefix, key);
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return KC_OK;
}

static kc_code get_str(const json_t *obj, const char *key, const where *w, const char **out,
                       kc_err *err)
{
    return get_str_at(obj, "", key, w, out, err);
}

static kc_code get_bool_at(const json_t *obj, const char *prefix, const char *key, const where *w,
                           bool *out, kc_err *err)
{
    *out = false;
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_boolean(v))
        return cfg_err(err, w, "%s%s: expected true or false, got %s", prefix, key,
                       kc_json_kind(v, true));
    *out = json_is_true(v);
    return KC_OK;
}

static kc_code get_bool(const json_t *obj, const char *key, const where *w, bool *out, kc_err *err)
{
    return get_bool_at(obj, "", key, w, out, err);
}

/* How a mapping's fields are treated: the ones named in a table are read (why NULL) or refused
 * with why ("impersonation (as) is"); any other is refused as unsupported. */
typedef struct field_rule {
    const char *name;
    const char *why;
} field_rule;

/* Refuses the fields of obj that rules refuse or do not name. A null value counts as absent, as
 * Go reads it. Refusals the table lists come first, in its order, so that the message for a user
 * with several is stable; hint (may be "") follows them. prefix is put before unknown names
 * ("exec."). */
static kc_code check_fields(const json_t *obj, const field_rule *rules, size_t n,
                            const char *prefix, const char *hint, const where *w, kc_err *err)
{
    if (!json_is_object(obj))
        return KC_OK;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(obj, rules[i].name);
        if (rules[i].why && v && !json_is_null(v))
            return cfg_err(err, w, "%s not supported%s", rules[i].why, hint);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (i < n && strcmp(rules[i].name, key) != 0)
            i++;
        if (i == n && !json_is_null(v))
            return cfg_err(err, w, "unsupported field \"%s%.100s\"", prefix, key);
    }
    return KC_OK;
}

static char *join_path(const char *dir, const char *p)
{
    char *r = NULL;
    if (p[0] == '/')
        return strdup(p);
    if (asprintf(&r, "%s/%s", dir, p) < 0)
        return NULL;
    return r;
}

/* Reads a file the kubeconfig names (a certificate, key or token) into a NUL-terminated buffer. */
static kc_code read_referenced(const char *dir, const char *field, const char *value,
                               const where *w, char **buf, size_t *len, char **abs_out, kc_err *err)
{
    char *path = join_path(dir, value);
    if (!path)
        return oom(err);
    char why[160];
    kc_code rc = kc_config_read_file(path, REFERENCED_MAX_BYTES, buf, len, NULL, why, sizeof(why));
    if (rc == KC_ENOMEM)
        rc = oom(err);
    else if (rc != KC_OK)
        rc = cfg_err(err, w, "%s: cannot read %s: %s", field, path, why);
    else if (abs_out)
        *abs_out = path, path = NULL;
    free(path);
    return rc;
}

/* Gets PEM bytes from `field` (a path) or `field-data` (base64); both set is an error. */
static kc_code get_pem(const json_t *obj, const char *dir, const char *field, const where *w,
                       char **pem, size_t *pem_len, char **file_out, kc_err *err)
{
    char data_field[64];
    snprintf(data_field, sizeof(data_field), "%s-data", field);
    const char *file = NULL, *data = NULL;
    kc_code rc = get_str(obj, field, w, &file, err);
    if (!rc)
        rc = get_str(obj, data_field, w, &data, err);
    if (rc)
        return rc;
    if (file && data)
        return cfg_err(err, w, "%s and %s are both set; use one", field, data_field);
    if (file)
        return read_referenced(dir, field, file, w, pem, pem_len, file_out, err);
    if (!data)
        return KC_OK;
    unsigned char *bin = NULL;
    kc_err e;
    kc_err_clear(&e);
    rc = kc_base64_decode(data, strlen(data), &bin, pem_len, &e);
    if (rc == KC_ENOMEM)
        return oom(err);
    if (rc)
        return cfg_err(err, w, "%s: %s", data_field, e.msg);
    *pem = (char *)bin;
    return KC_OK;
}

/* Accepts only http(s) URLs with a host and without query, fragment or credentials. */
static kc_code check_server(const char *server, const where *w, kc_err *err)
{
    kc_url u;
    kc_err e;
    kc_err_clear(&e);
    if (kc_url_parse(server, &u, &e) != KC_OK)
        return cfg_err(err, w, "server %s", e.msg);
    return KC_OK;
}

/* Finds the entry `name` in list `list` ("clusters") of the first file defining it. *inner is the
 * entry's `inner_key` mapping ("cluster"), NULL when the entry has none. The entry itself may hold
 * nothing else: its other fields are refused with their path ("clusters[2].nmae"). */
static kc_code find_named(const kcset *set, const char *list, const char *inner_key,
                          const char *name, const json_t **inner, const kcfile **from, bool *found,
                          kc_err *err)
{
    *found = false;
    for (size_t f = 0; f < set->n; f++) {
        const json_t *arr = json_object_get(set->files[f].doc, list);
        size_t i;
        const json_t *item;
        json_array_foreach(arr, i, item)
        {
            if (strcmp(json_string_value(json_object_get(item, "name")), name) != 0)
                continue;
            const json_t *in = json_object_get(item, inner_key);
            *inner = json_is_object(in) ? in : NULL;
            *from = &set->files[f];
            *found = true;
            const field_rule entry[] = {{"name", NULL}, {inner_key, NULL}};
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "%s[%zu].", list, i);
            where wf;
            snprintf(wf.s, sizeof(wf.s), "kubeconfig %.300s", set->files[f].path);
            /* A null mapping is an empty one (as Go reads it); anything else is a mistake that
             * must not pass as "no credentials". */
            if (in && !json_is_null(in) && !json_is_object(in))
                return cfg_err(err, &wf, "%s%s: expected a mapping, got %s", prefix, inner_key,
                               kc_json_kind(in, true));
            return check_fields(item, entry, 2, prefix, "", &wf, err);
        }
    }
    return KC_OK;
}

#define EXEC_EXTENSION "client.authentication.k8s.io/exec"

/* Accepts the proxy schemes client-go accepts (http, https, socks5, any case) with a host. The
 * URL itself is never quoted: proxy URLs often carry a password. */
static kc_code check_proxy_url(const char *url, const where *w, kc_err *err)
{
    static const char *const schemes[] = {"http", "https", "socks5"};
    const char *sep = strstr(url, "://");
    size_t slen = sep ? (size_t)(sep - url) : 0;
    bool known = false;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        known = known || (slen == strlen(schemes[i]) && strncasecmp(url, schemes[i], slen) == 0);
    if (!known) {
        bool word = slen > 0 && slen <= 20;
        for (size_t i = 0; word && i < slen; i++)
            word = (url[i] >= 'a' && url[i] <= 'z') || (url[i] >= 'A' && url[i] <= 'Z') ||
                   (i > 0 && ((url[i] >= '0' && url[i] <= '9') || strchr("+-.", url[i])));
        if (word)
            return cfg_err(err, w,
                           "proxy-url: the scheme \"%.*s\" is not supported (use http, https or "
                           "socks5)",
                           (int)slen, url);
        return cfg_err(err, w,
                       "proxy-url: not a URL of the form scheme://host[:port] (the scheme one of "
                       "http, https or socks5)");
    }
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return cfg_err(err, w, "proxy-url: contains a space or a control character");
    const char *auth = sep + 3;
    size_t alen = strcspn(auth, "/?#");
    const char *host = auth;
    for (const char *c = auth; c < auth + alen; c++)
        if (*c == '@')
            host = c + 1;
    if (host == auth + alen || *host == ':')
        return cfg_err(err, w, "proxy-url: no host");
    return KC_OK;
}

/* A cluster's extensions are ignorable by definition, and skipped; client-go reads one, which it
 * hands to exec plugins as spec.cluster.config. *out (caller frees) gets its JSON text. */
static kc_code exec_extension(const json_t *c, char **out, kc_err *err)
{
    const json_t *list = json_object_get(c, "extensions");
    size_t i;
    const json_t *item;
    json_array_foreach(list, i, item)
    {
        const json_t *name = json_object_get(item, "name");
        if (!json_is_string(name) || strcmp(json_string_value(name), EXEC_EXTENSION) != 0)
            continue;
        const json_t *ext = json_object_get(item, "extension");
        if (!ext || json_is_null(ext))
            return KC_OK;
        *out = json_dumps(ext, JSON_COMPACT | JSON_ENCODE_ANY);
        return *out ? KC_OK : oom(err);
    }
    return KC_OK;
}

static kc_code resolve_cluster(const kcset *set, const where *wctx, const char *ctxname,
                               const char *name, kc_config *cfg, char **exec_ext, kc_err *err)
{
    static const field_rule fields[] = {
        {"server", NULL},
        {"tls-server-name", NULL},
        {"insecure-skip-tls-verify", NULL},
        {"certificate-authority", NULL},
        {"certificate-authority-data", NULL},
        {"proxy-url", NULL},
        {"disable-compression", NULL}, /* kc_config.disable_compression: no Accept-Encoding */
        {"extensions", NULL},
    };
    const json_t *c;
    const kcfile *f;
    bool found;
    kc_code rc = find_named(set, "clusters", "cluster", name, &c, &f, &found, err);
    if (rc)
        return rc;
    if (!found)
        return cfg_err(err, wctx, "cluster \"%.100s\" not found", name);
    where w;
    snprintf(w.s, sizeof(w.s), "kubeconfig %.150s: context \"%.100s\": cluster \"%.100s\"", f->path,
             ctxname, name);
    rc = check_fields(c, fields, sizeof(fields) / sizeof(fields[0]), "", "", &w, err);
    if (rc)
        return rc;
    const char *server, *sni, *proxy;
    rc = get_str(c, "server", &w, &server, err);
    if (!rc)
        rc = get_str(c, "tls-server-name", &w, &sni, err);
    if (!rc)
        rc = get_bool(c, "insecure-skip-tls-verify", &w, &cfg->insecure_skip_tls_verify, err);
    if (!rc)
        rc = get_str(c, "proxy-url", &w, &proxy, err);
    if (!rc)
        rc = get_bool(c, "disable-compression", &w, &cfg->disable_compression, err);
    if (rc)
        return rc;
    if (!server)
        return cfg_err(err, &w, "no server set");
    rc = check_server(server, &w, err);
    if (!rc && proxy)
        rc = check_proxy_url(proxy, &w, err);
    if (rc)
        return rc;
    cfg->server = strdup(server);
    if (sni)
        cfg->tls_server_name = strdup(sni);
    if (proxy)
        cfg->proxy_url = strdup(proxy);
    if (!cfg->server || (sni && !cfg->tls_server_name) || (proxy && !cfg->proxy_url))
        return oom(err);
    size_t n = strlen(cfg->server);
    while (n > 0 && cfg->server[n - 1] == '/')
        cfg->server[--n] = '\0';
    rc = get_pem(c, f->dir, "certificate-authority", &w, &cfg->ca_pem, &cfg->ca_pem_len,
                 &cfg->ca_file, err);
    if (rc)
        return rc;
    if (cfg->ca_pem && cfg->insecure_skip_tls_verify)
        return cfg_err(err, &w,
                       "insecure-skip-tls-verify cannot be combined with a certificate-authority");
    return exec_extension(c, exec_ext, err);
}

/* Reads exec.args (a list of strings) into e. */
static kc_code exec_args(const json_t *ex, const where *w, kc_exec_config *e, kc_err *err)
{
    const json_t *a = json_object_get(ex, "args");
    if (!a || json_is_null(a))
        return KC_OK;
    if (!json_is_array(a))
        return cfg_err(err, w, "exec.args: expected a list, got %s", kc_json_kind(a, true));
    if (json_array_size(a) == 0)
        return KC_OK;
    e->args = calloc(json_array_size(a), sizeof(*e->args));
    if (!e->args)
        return oom(err);
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v))
            return cfg_err(err, w, "exec.args[%zu]: expected a string, got %s", i,
                           kc_json_kind(v, true));
        if (json_string_length(v) != strlen(json_string_value(v)))
            return cfg_err(err, w, "exec.args[%zu]: contains a NUL character", i);
        e->args[i] = strdup(json_string_value(v));
        if (!e->args[i])
            return oom(err);
        e->n_args++;
    }
    return KC_OK;
}

/* Reads exec.env (a list of {name, value}) into e. */
static kc_code exec_env(const json_t *ex, const where *w, kc_exec_config *e, kc_err *err)
{
    static const field_rule fields[] = {{"name", NULL}, {"value", NULL}};
    const json_t *a = json_object_get(ex, "env");
    if (!a || json_is_null(a))
        return KC_OK;
    if (!json_is_array(a))
        return cfg_err(err, w, "exec.env: expected a list, got %s", kc_json_kind(a, true));
    if (json_array_size(a) == 0)
        return KC_OK;
    e->env = calloc(json_array_size(a), sizeof(*e->env));
    if (!e->env)
        return oom(err);
    size_t i;
    const json_t *item;
    json_array_foreach(a, i, item)
    {
        char prefix[48];
        snprintf(prefix, sizeof(prefix), "exec.env[%zu].", i);
        if (!json_is_object(item))
            return cfg_err(err, w, "exec.env[%zu]: expected a mapping, got %s", i,
                           kc_json_kind(item, true));
        const char *name, *value;
        kc_code rc = check_fields(item, fields, 2, prefix, "", w, err);
        if (!rc)
            rc = get_str_at(item, prefix, "name", w, &name, err);
        if (!rc)
            rc = get_str_at(item, prefix, "value", w, &value, err);
        if (rc)
            return rc;
        if (!name)
            return cfg_err(err, w, "exec.env[%zu].name: not set", i);
        if (strchr(name, '='))
            return cfg_err(err, w, "exec.env[%zu].name: \"%.100s\" contains '='", i, name);
        kc_exec_env *ev = &e->env[e->n_env];
        ev->name = strdup(name);
        ev->value = strdup(value ? value : "");
        e->n_env++;
        if (!ev->name || !ev->value)
            return oom(err);
    }
    return KC_OK;
}

/* Reads a user's exec into *out (a new kc_exec_config). dir anchors a relative command path. */
static kc_code parse_exec(const json_t *ex, const char *dir, const where *w, kc_exec_config **out,
                          kc_err *err)
{
    static const field_rule fields[] = {
        {"apiVersion", NULL},
        {"command", NULL},
        {"args", NULL},
        {"env", NULL},
        {"installHint", NULL},
        {"provideClusterInfo", NULL},
        {"interactiveMode", NULL},
    };
    *out = NULL;
    if (!json_is_object(ex))
        return cfg_err(err, w, "exec: expected a mapping, got %s", kc_json_kind(ex, true));
    const char *api, *command, *hint, *mode;
    bool pci;
    kc_code rc = check_fields(ex, fields, sizeof(fields) / sizeof(fields[0]), "exec.", "", w, err);
    if (!rc)
        rc = get_str_at(ex, "exec.", "apiVersion", w, &api, err);
    if (!rc)
        rc = get_str_at(ex, "exec.", "command", w, &command, err);
    if (!rc)
        rc = get_str_at(ex, "exec.", "installHint", w, &hint, err);
    if (!rc)
        rc = get_str_at(ex, "exec.", "interactiveMode", w, &mode, err);
    if (!rc)
        rc = get_bool_at(ex, "exec.", "provideClusterInfo", w, &pci, err);
    if (rc)
        return rc;
    if (!api)
        return cfg_err(
            err, w, "exec.apiVersion: not set (use " KC_EXEC_API_V1 " or " KC_EXEC_API_V1BETA1 ")");
    bool v1 = strcmp(api, KC_EXEC_API_V1) == 0;
    if (!v1 && strcmp(api, KC_EXEC_API_V1BETA1) != 0)
        return cfg_err(err, w,
                       "exec.apiVersion: \"%.100s\" is not supported (use " KC_EXEC_API_V1
                       " or " KC_EXEC_API_V1BETA1 ")",
                       api);
    if (!command)
        return cfg_err(err, w, "exec.command: not set");
    kc_exec_interactive im;
    if (!mode && v1)
        return cfg_err(err, w,
                       "exec.interactiveMode: required with " KC_EXEC_API_V1
                       " (use Never or IfAvailable)");
    if (!mode || strcmp(mode, "IfAvailable") == 0) {
        /* v1beta1 without it means IfAvailable, as in client-go. */
        im = KC_EXEC_INTERACTIVE_IF_AVAILABLE;
    } else if (strcmp(mode, "Never") == 0) {
        im = KC_EXEC_INTERACTIVE_NEVER;
    } else if (strcmp(mode, "Always") == 0) {
        return cfg_err(err, w,
                       "exec.interactiveMode: Always is not supported: the operator runs without "
                       "a terminal, so a plugin that must prompt cannot work (use Never or "
                       "IfAvailable)");
    } else {
        return cfg_err(err, w,
                       "exec.interactiveMode: \"%.60s\" is not one of Never, IfAvailable or "
                       "Always",
                       mode);
    }
    kc_exec_config *e = calloc(1, sizeof(*e));
    if (!e)
        return oom(err);
    e->interactive_mode = im;
    e->provide_cluster_info = pci;
    e->api_version = strdup(api);
    /* As kubectl: a relative path is relative to the kubeconfig; a bare name is looked up in
     * PATH when the plugin runs. */
    e->command = strchr(command, '/') ? join_path(dir, command) : strdup(command);
    if (hint)
        e->install_hint = strdup(hint);
    if (!e->api_version || !e->command || (hint && !e->install_hint))
        rc = oom(err);
    if (!rc)
        rc = exec_args(ex, w, e, err);
    if (!rc)
        rc = exec_env(ex, w, e, err);
    if (rc) {
        kc_exec_config_free(e);
        return rc;
    }
    *out = e;
    return KC_OK;
}

static kc_code resolve_user(const kcset *set, const where *wctx, const char *ctxname,
                            const char *name, kc_config *cfg, kc_err *err)
{
    static const field_rule fields[] = {
        {"token", NULL},
        {"tokenFile", NULL},
        {"client-certificate", NULL},
        {"client-certificate-data", NULL},
        {"client-key", NULL},
        {"client-key-data", NULL},
        {"exec", NULL},
        {"extensions", NULL},
        {"auth-provider", "auth-provider plugins are"},
        {"username", "basic authentication (username/password) is"},
        {"password", "basic authentication (username/password) is"},
        {"as", "impersonation (as) is"},
        {"as-uid", "impersonation (as-uid) is"},
        {"as-groups", "impersonation (as-groups) is"},
        {"as-user-extra", "impersonation (as-user-extra) is"},
    };
    const json_t *u;
    const kcfile *f;
    bool found;
    kc_code rc = find_named(set, "users", "user", name, &u, &f, &found, err);
    if (rc)
        return rc;
    if (!found)
        return cfg_err(err, wctx, "user \"%.100s\" not found", name);
    where w;
    snprintf(w.s, sizeof(w.s), "kubeconfig %.150s: context \"%.100s\": user \"%.100s\"", f->path,
             ctxname, name);
    rc = check_fields(u, fields, sizeof(fields) / sizeof(fields[0]), "",
                      " (use token, tokenFile, exec or client-certificate/client-key)", &w, err);
    if (rc)
        return rc;
    const json_t *ex = json_object_get(u, "exec");
    if (ex && !json_is_null(ex)) {
        /* client-go would use the static credential and never run the plugin: say so rather
         * than pick one silently. The first six rules are the static credentials. */
        for (size_t i = 0; i < 6; i++) {
            const json_t *v = json_object_get(u, fields[i].name);
            if (v && !json_is_null(v))
                return cfg_err(err, &w,
                               "exec cannot be combined with %s (kubectl would use %s and never "
                               "run the plugin; keep one)",
                               fields[i].name, fields[i].name);
        }
        return parse_exec(ex, f->dir, &w, &cfg->exec, err);
    }
    const char *token, *token_file;
    rc = get_str(u, "token", &w, &token, err);
    if (!rc)
        rc = get_str(u, "tokenFile", &w, &token_file, err);
    if (rc)
        return rc;
    if (token) {
        /* As client-go: a static token takes precedence over tokenFile. */
        cfg->token = strdup(token);
        if (!cfg->token)
            return oom(err);
    } else if (token_file) {
        char *buf = NULL;
        size_t len = 0;
        rc =
            read_referenced(f->dir, "tokenFile", token_file, &w, &buf, &len, &cfg->token_file, err);
        if (rc)
            return rc;
        size_t nonblank = strspn(buf, " \t\r\n");
        free(buf);
        if (nonblank == len)
            return cfg_err(err, &w, "tokenFile: %s is empty", cfg->token_file);
    }
    rc = get_pem(u, f->dir, "client-certificate", &w, &cfg->client_cert_pem,
                 &cfg->client_cert_pem_len, &cfg->client_cert_file, err);
    if (!rc)
        rc = get_pem(u, f->dir, "client-key", &w, &cfg->client_key_pem, &cfg->client_key_pem_len,
                     &cfg->client_key_file, err);
    if (rc)
        return rc;
    if (!cfg->client_cert_pem != !cfg->client_key_pem)
        return cfg_err(err, &w, "%s is set but %s is not",
                       cfg->client_cert_pem ? "client-certificate" : "client-key",
                       cfg->client_cert_pem ? "client-key" : "client-certificate");
    return KC_OK;
}

/* Gives the exec plugin the cluster fields client-go sends with provideClusterInfo; takes
 * *config_json. */
static kc_code exec_cluster_info(kc_config *cfg, char **config_json, kc_err *err)
{
    kc_exec_cluster *c = &cfg->exec->cluster;
    c->insecure_skip_tls_verify = cfg->insecure_skip_tls_verify;
    c->disable_compression = cfg->disable_compression;
    c->config_json = *config_json;
    *config_json = NULL;
    if (cfg->tls_server_name && !(c->tls_server_name = strdup(cfg->tls_server_name)))
        return oom(err);
    if (cfg->proxy_url && !(c->proxy_url = strdup(cfg->proxy_url)))
        return oom(err);
    return KC_OK;
}

/* Picks the context and builds the config from the merged set. */
static kc_code kcset_resolve(const kcset *set, const char *context, kc_config **out, kc_err *err)
{
    static const field_rule fields[] = {
        {"cluster", NULL}, {"user", NULL}, {"namespace", NULL}, {"extensions", NULL}};
    where w;
    snprintf(w.s, sizeof(w.s), "kubeconfig %.300s", set->label);
    const char *name = context && context[0] ? context : NULL;
    for (size_t i = 0; !name && i < set->n; i++) {
        const json_t *cc = json_object_get(set->files[i].doc, "current-context");
        if (json_is_string(cc) && json_string_length(cc) > 0)
            name = json_string_value(cc);
    }
    if (!name)
        return cfg_err(err, &w, "no context given and current-context is not set");
    const json_t *ctx;
    const kcfile *f;
    bool found;
    kc_code rc = find_named(set, "contexts", "context", name, &ctx, &f, &found, err);
    if (rc)
        return rc;
    if (!found)
        return cfg_err(err, &w, "context \"%.100s\" not found", name);
    snprintf(w.s, sizeof(w.s), "kubeconfig %.150s: context \"%.100s\"", f->path, name);
    const char *cluster, *user, *ns;
    rc = check_fields(ctx, fields, sizeof(fields) / sizeof(fields[0]), "", "", &w, err);
    if (!rc)
        rc = get_str(ctx, "cluster", &w, &cluster, err);
    if (!rc)
        rc = get_str(ctx, "user", &w, &user, err);
    if (!rc)
        rc = get_str(ctx, "namespace", &w, &ns, err);
    if (rc)
        return rc;
    if (!cluster)
        return cfg_err(err, &w, "no cluster set");
    char *exec_ext = NULL;
    kc_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return oom(err);
    cfg->namespace_ = strdup(ns ? ns : "default");
    cfg->context = strdup(name);
    cfg->source = strdup(f->path);
    if (!cfg->namespace_ || !cfg->context || !cfg->source) {
        rc = oom(err);
        goto free_cfg;
    }
    rc = resolve_cluster(set, &w, name, cluster, cfg, &exec_ext, err);
    if (!rc && user)
        rc = resolve_user(set, &w, name, user, cfg, err);
    if (!rc && cfg->exec)
        rc = exec_cluster_info(cfg, &exec_ext, err);
    if (rc)
        goto free_cfg;
    free(exec_ext);
    *out = cfg;
    return KC_OK;
free_cfg:
    free(exec_ext);
    kc_config_free(cfg);
    return rc;
}

/* Checks the shape kubectl requires of a named list and its unique names. */
static kc_code check_list(const json_t *doc, const char *list, const where *w, kc_err *err)
{
    const json_t *arr = json_object_get(doc, list);
    if (!arr || json_is_null(arr)) {
        /* Normalize to an empty list so lookups need not care. */
        return json_object_set_new((json_t *)doc, list, json_array()) ? oom(err) : KC_OK;
    }
    if (!json_is_array(arr))
        return cfg_err(err, w, "%s: expected a list, got %s", list, kc_json_kind(arr, true));
    /* The names seen so far, as keys of an object, so large files are checked in linear time. */
    json_t *seen = json_object();
    if (!seen)
        return oom(err);
    kc_code rc = KC_OK;
    size_t i;
    const json_t *item;
    json_array_foreach(arr, i, item)
    {
        const json_t *name = json_object_get(item, "name");
        if (!json_is_object(item)) {
            rc = cfg_err(err, w, "%s[%zu]: expected a mapping, got %s", list, i,
                         kc_json_kind(item, true));
            break;
        }
        if (!json_is_string(name) || json_string_length(name) == 0 ||
            json_string_length(name) != strlen(json_string_value(name))) {
            rc = cfg_err(err, w, "%s[%zu]: name: expected a non-empty string, got %s", list, i,
                         name ? kc_json_kind(name, true) : "none");
            break;
        }
        const char *n = json_string_value(name);
        if (json_object_get(seen, n)) {
            rc = cfg_err(err, w, "%s: duplicate name \"%.100s\"", list, n);
            break;
        }
        if (json_object_set_new(seen, n, json_true())) {
            rc = oom(err);
            break;
        }
    }
    json_decref(seen);
    return rc;
}

/* Parses one kubeconfig text and appends it to the set. */
static kc_code kcset_add_buffer(kcset *set, const char *buf, size_t len, const char *path,
                                kc_err *err)
{
    where w;
    snprintf(w.s, sizeof(w.s), "kubeconfig %.300s", path);
    json_t *doc = NULL;
    kcfile f = {0};
    kc_err yerr;
    kc_err_clear(&yerr);
    kc_code rc = kc_yaml_parse_one(buf, len, NULL, &doc, &yerr);
    if (rc == KC_ENOMEM)
        return oom(err);
    if (rc)
        return cfg_err(err, &w, "%s", yerr.msg);
    if (!json_is_object(doc)) {
        rc = cfg_err(err, &w, "expected a mapping at the top level, got %s",
                     kc_json_kind(doc, true));
        goto fail;
    }
    /* preferences only ever held kubectl's display settings; extensions are ignorable. */
    static const field_rule top[] = {
        {"apiVersion", NULL}, {"kind", NULL},  {"preferences", NULL},     {"clusters", NULL},
        {"contexts", NULL},   {"users", NULL}, {"current-context", NULL}, {"extensions", NULL},
    };
    rc = check_fields(doc, top, sizeof(top) / sizeof(top[0]), "", "", &w, err);
    if (rc)
        goto fail;
    static const char *const lists[] = {"clusters", "contexts", "users"};
    for (size_t i = 0; i < 3; i++) {
        rc = check_list(doc, lists[i], &w, err);
        if (rc)
            goto fail;
    }
    const json_t *cc = json_object_get(doc, "current-context");
    if (cc && !json_is_null(cc) && !json_is_string(cc)) {
        rc = cfg_err(err, &w, "current-context: expected a string, got %s", kc_json_kind(cc, true));
        goto fail;
    }
    f.path = strdup(path);
    f.dir = kc_config_dir_of(path);
    kcfile *files = realloc(set->files, (set->n + 1) * sizeof(*files));
    if (!f.path || !f.dir || !files) {
        if (files)
            set->files = files;
        rc = oom(err);
        goto fail;
    }
    set->files = files;
    f.doc = doc;
    set->files[set->n++] = f;
    return KC_OK;
fail:
    free(f.path);
    free(f.dir);
    json_decref(doc);
    return rc;
}

/* Reads and adds one file; *missing is set (and KC_OK returned) when it does not exist and
 * skip_missing is true. */
static kc_code kcset_add_file(kcset *set, const char *path, bool skip_missing, bool *missing,
                              kc_err *err)
{
    char *buf = NULL, why[160];
    size_t len = 0;
    int e = 0;
    *missing = false;
    kc_code rc = kc_config_read_file(path, KUBECONFIG_MAX_BYTES, &buf, &len, &e, why, sizeof(why));
    if (rc == KC_ENOMEM)
        return oom(err);
    if (rc) {
        *missing = e == ENOENT;
        if (*missing && skip_missing)
            return KC_OK;
        return kc_err_set(err, KC_ECONFIG, "kubeconfig %.300s: cannot read: %s", path, why);
    }
    rc = kcset_add_buffer(set, buf, len, path, err);
    free(buf);
    return rc;
}

kc_code kc_config_parse_kubeconfig(const char *buf, size_t len, const char *name,
                                   const char *context, kc_config **out, kc_err *err)
{
    if (!out || (!buf && len))
        return kc_err_set(err, KC_EARG, "kc_config_parse_kubeconfig: NULL argument");
    *out = NULL;
    kcset set = {.label = name ? name : "<memory>"};
    kc_code rc = kcset_add_buffer(&set, buf ? buf : "", len, set.label, err);
    if (!rc)
        rc = kcset_resolve(&set, context, out, err);
    kcset_free(&set);
    return rc;
}

/* Loads every existing file of a ':'-separated list, first wins, duplicates ignored. */
static kc_code load_list(kcset *set, const char *list, kc_err *err)
{
    char *copy = strdup(list);
    if (!copy)
        return oom(err);
    kc_code rc = KC_OK;
    char *save = NULL;
    for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        bool dup = false, missing;
        for (size_t i = 0; i < set->n && !dup; i++)
            dup = strcmp(set->files[i].path, p) == 0;
        if (dup)
            continue;
        rc = kcset_add_file(set, p, true, &missing, err);
        if (rc)
            goto done;
    }
    if (set->n == 0)
        rc = kc_err_set(err, KC_ECONFIG, "KUBECONFIG=\"%.300s\": none of the listed files exists",
                        list);
done:
    free(copy);
    return rc;
}

/* As kc_config_load_kubeconfig; *missing tells the caller the one file asked for was absent. */
static kc_code load_kubeconfig(const char *path, const char *context, kc_config **out,
                               bool *missing, kc_err *err)
{
    kcset set = {0};
    kc_code rc;
    char *home_cfg = NULL;
    const char *env = getenv("KUBECONFIG");
    *missing = false;
    if (path && path[0]) {
        set.label = path;
        rc = kcset_add_file(&set, path, false, missing, err);
    } else if (env && env[0]) {
        set.label = env;
        rc = load_list(&set, env, err);
    } else {
        const char *home = getenv("HOME");
        if (!home || !home[0])
            return kc_err_set(err, KC_ECONFIG,
                              "no kubeconfig given, KUBECONFIG is not set and HOME is not set "
                              "to find ~/.kube/config");
        if (asprintf(&home_cfg, "%s/.kube/config", home) < 0)
            return oom(err);
        set.label = home_cfg;
        rc = kcset_add_file(&set, home_cfg, false, missing, err);
    }
    if (!rc)
        rc = kcset_resolve(&set, context, out, err);
    kcset_free(&set);
    free(home_cfg);
    return rc;
}

kc_code kc_config_load_kubeconfig(const char *path, const char *context, kc_config **out,
                                  kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_config_load_kubeconfig: NULL out");
    *out = NULL;
    bool missing;
    return load_kubeconfig(path, context, out, &missing, err);
}

kc_code kc_config_load_default(const char *kubeconfig_flag, const char *context, kc_config **out,
                               kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_config_load_default: NULL out");
    *out = NULL;
    const char *env = getenv("KUBECONFIG");
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    bool missing = false;
    if ((kubeconfig_flag && kubeconfig_flag[0]) || (env && env[0]))
        return load_kubeconfig(kubeconfig_flag, context, out, &missing, err);
    if (host && host[0])
        return kc_config_load_incluster(NULL, out, err);
    kc_code rc = load_kubeconfig(NULL, context, out, &missing, err);
    if (rc && missing)
        kc_err_prefix(err, "no configuration found (pass --kubeconfig, set KUBECONFIG, run in a "
                           "cluster or create ~/.kube/config)");
    return rc;
}

kc_config *kc_config_dup(const kc_config *cfg)
{
    if (!cfg)
        return NULL;
    kc_config *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    bool ok = true;
#define DUP_STR(f)                                                                                 \
    do {                                                                                           \
        if (cfg->f && !(c->f = strdup(cfg->f)))                                                    \
            ok = false;                                                                            \
    } while (0)
#define DUP_MEM(f, n)                                                                              \
    do {                                                                                           \
        if (cfg->f) {                                                                              \
            c->f = malloc(cfg->n + 1);                                                             \
            if (c->f) {                                                                            \
                memcpy(c->f, cfg->f, cfg->n);                                                      \
                c->f[cfg->n] = '\0';                                                               \
                c->n = cfg->n;                                                                     \
            } else {                                                                               \
                ok = false;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    DUP_STR(server);
    DUP_MEM(ca_pem, ca_pem_len);
    c->insecure_skip_tls_verify = cfg->insecure_skip_tls_verify;
    DUP_STR(tls_server_name);
    DUP_STR(proxy_url);
    c->disable_compression = cfg->disable_compression;
    if (cfg->exec && !(c->exec = kc_exec_config_dup(cfg->exec)))
        ok = false;
    DUP_STR(token);
    DUP_STR(token_file);
    DUP_MEM(client_cert_pem, client_cert_pem_len);
    DUP_MEM(client_key_pem, client_key_pem_len);
    DUP_STR(ca_file);
    DUP_STR(client_cert_file);
    DUP_STR(client_key_file);
    DUP_STR(namespace_);
    DUP_STR(context);
    DUP_STR(source);
#undef DUP_STR
#undef DUP_MEM
    if (!ok) {
        kc_config_free(c);
        return NULL;
    }
    return c;
}

void kc_config_free(kc_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->server);
    free(cfg->ca_pem);
    free(cfg->tls_server_name);
    free(cfg->proxy_url);
    kc_exec_config_free(cfg->exec);
    if (cfg->token)
        explicit_bzero(cfg->token, strlen(cfg->token));
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->client_cert_pem);
    /* Keys are secrets: do not leave them in freed memory. */
    if (cfg->client_key_pem)
        explicit_bzero(cfg->client_key_pem, cfg->client_key_pem_len);
    free(cfg->client_key_pem);
    free(cfg->ca_file);
    free(cfg->client_cert_file);
    free(cfg->client_key_file);
    free(cfg->namespace_);
    free(cfg->context);
    free(cfg->source);
    free(cfg);
}
