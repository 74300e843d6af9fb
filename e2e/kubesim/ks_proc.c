/* ks_proc: what the kubelet needs to run a mapped container as a local process: the image map,
 * the container's argv and environment (downward API, Secret/ConfigMap references, in-cluster
 * variables), the mounted service-account files, probes and quantities. */
#include "ks_kubelet.h"
#include "ks_pki.h"

#include "kc_base64.h"
#include "kc_yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- string vectors ---- */

typedef struct strv {
    char **v;
    size_t n, cap;
    bool oom;
} strv;

static void strv_push(strv *s, char *item)
{
    if (!item) {
        s->oom = true;
        return;
    }
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            free(item);
            s->oom = true;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = item;
    s->v[s->n] = NULL;
}

/* Sets KEY=value, replacing an earlier KEY (later definitions win, as in a pod spec). */
static void env_set(strv *s, const char *key, const char *val)
{
    char *item = NULL;
    if (asprintf(&item, "%s=%s", key, val ? val : "") < 0) {
        s->oom = true;
        return;
    }
    size_t kl = strlen(key);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->v[i], key, kl) == 0 && s->v[i][kl] == '=') {
            free(s->v[i]);
            s->v[i] = item;
            return;
        }
    strv_push(s, item);
}

void ks_proc_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static char **strv_take(strv *s)
{
    if (s->oom) {
        ks_proc_strv_free(s->v);
        return NULL;
    }
    if (!s->v)
        return calloc(1, sizeof(char *));
    return s->v;
}

static const char *env_get(char *const *env, const char *key, size_t klen)
{
    for (char *const *p = env; p && *p; p++)
        if (strncmp(*p, key, klen) == 0 && (*p)[klen] == '=')
            return *p + klen + 1;
    return NULL;
}

char *ks_proc_expand(const char *s, char *const *env)
{
    size_t cap = strlen(s) + 1, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *p = s; *p;) {
        const char *piece = p;
        size_t plen = 1;
        if (p[0] == '$' && p[1] == '$') {
            plen = 1; /* "$$" is an escaped "$" */
            p += 2;
        } else if (p[0] == '$' && p[1] == '(' && strchr(p + 2, ')')) {
            const char *end = strchr(p + 2, ')');
            const char *val = env_get(env, p + 2, (size_t)(end - p - 2));
            if (val) {
                piece = val;
                plen = strlen(val);
            } else {
                plen = (size_t)(end - p) + 1; /* unknown references stay as written */
            }
            p = end + 1;
        } else {
            p++;
        }
        if (n + plen + 1 > cap) {
            cap = (n + plen + 1) * 2;
            char *o = realloc(out, cap);
            if (!o) {
                free(out);
                return NULL;
            }
            out = o;
        }
        memcpy(out + n, piece, plen);
        n += plen;
    }
    out[n] = '\0';
    return out;
}

/* ---- the image map ---- */

void ks_image_map_free(ks_image_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->entries[i].pattern);
        free(m->entries[i].program);
        ks_proc_strv_free(m->entries[i].args_prefix);
        ks_proc_strv_free(m->entries[i].env);
    }
    free(m->entries);
    m->entries = NULL;
    m->n = 0;
}

static kc_code map_entry(const char *path, size_t i, const json_t *e, ks_image_map_entry *out,
                         kc_err *err)
{
    const char *image = json_string_value(json_object_get(e, "image"));
    const char *prog = json_string_value(json_object_get(e, "program"));
    if (!json_is_object(e))
        return kc_err_set(err, KC_EINVALID, "image map %s: images[%zu]: expected a mapping", path,
                          i);
    if (!image || !*image)
        return kc_err_set(err, KC_EINVALID,
                          "image map %s: images[%zu].image: Required value (an image glob)", path,
                          i);
    if (!prog || prog[0] != '/')
        return kc_err_set(
            err, KC_EINVALID,
            "image map %s: images[%zu].program: expected an absolute path, got %s%s%s", path, i,
            prog ? "\"" : "", prog ? prog : "nothing", prog ? "\"" : "");
    if (access(prog, X_OK) != 0)
        return kc_err_set(err, KC_EINVALID, "image map %s: images[%zu].program: %s: %s", path, i,
                          prog, strerror(errno));
    strv args = {0}, env = {0};
    const json_t *ap = json_object_get(e, "args_prefix");
    if (ap && !json_is_array(ap))
        return kc_err_set(err, KC_EINVALID,
                          "image map %s: images[%zu].args_prefix: expected a list of strings", path,
                          i);
    size_t j;
    json_t *v;
    json_array_foreach(ap, j, v)
    {
        if (!json_is_string(v)) {
            ks_proc_strv_free(strv_take(&args));
            return kc_err_set(err, KC_EINVALID,
                              "image map %s: images[%zu].args_prefix[%zu]: expected a string", path,
                              i, j);
        }
        strv_push(&args, strdup(json_string_value(v)));
    }
    const char *k;
    json_object_foreach((json_t *)json_object_get(e, "env"), k, v)
    {
        char num[64];
        const char *s = json_string_value(v);
        if (!s && json_is_integer(v)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
            s = num;
        } else if (!s && json_is_boolean(v)) {
            s = json_is_true(v) ? "true" : "false";
        }
        env_set(&env, k, s ? s : "");
    }
    const json_t *user = json_object_get(e, "user");
    char ubuf[64] = "";
    if (json_is_integer(user))
        snprintf(ubuf, sizeof(ubuf), "%lld", (long long)json_integer_value(user));
    else if (json_is_string(user))
        snprintf(ubuf, sizeof(ubuf), "%s", json_string_value(user));
    if (user && !json_is_null(user)) {
        char *end = NULL;
        errno = 0;
        long long uid = strtoll(ubuf, &end, 10), gid = 0;
        bool ok = end != ubuf && uid >= 0 && uid <= 2147483647LL && !errno;
        if (ok && *end == ':') {
            const char *g = end + 1;
            gid = strtoll(g, &end, 10);
            ok = end != g && gid >= 0 && gid <= 2147483647LL && !errno;
        }
        if (!ok || *end) {
            ks_proc_strv_free(strv_take(&args));
            ks_proc_strv_free(strv_take(&env));
            return kc_err_set(err, KC_EINVALID,
                              "image map %s: images[%zu].user: expected a numeric uid[:gid], got "
                              "\"%s\"",
                              path, i, ubuf);
        }
        out->user_uid = uid;
        out->user_gid = gid;
    }
    out->pattern = strdup(image);
    out->program = strdup(prog);
    out->args_prefix = strv_take(&args);
    out->env = strv_take(&env);
    if (!out->pattern || !out->program || !out->args_prefix || !out->env)
        return kc_err_set(err, KC_ENOMEM, "out of memory reading image map %s", path);
    return KC_OK;
}

kc_code ks_image_map_load(const char *path, ks_image_map *out, kc_err *err)
{
    memset(out, 0, sizeof(*out));
    json_t *docs = NULL;
    kc_code rc = kc_yaml_parse_file(path, &docs, err);
    if (rc != KC_OK) {
        kc_err_prefix(err, "image map");
        return rc;
    }
    const json_t *images = json_object_get(json_array_get(docs, 0), "images");
    if (!json_is_array(images)) {
        rc = kc_err_set(err, KC_EINVALID,
                        "image map %s: expected a top-level `images:` list of {image, program}",
                        path);
        goto out;
    }
    out->entries = calloc(json_array_size(images) + 1, sizeof(*out->entries));
    if (!out->entries) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory reading image map %s", path);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(images, i, e)
    {
        out->n = i + 1;
        if ((rc = map_entry(path, i, e, &out->entries[i], err)) != KC_OK)
            goto out;
    }
out:
    if (rc != KC_OK)
        ks_image_map_free(out);
    json_decref(docs);
    return rc;
}

const ks_image_map_entry *ks_image_map_match(const ks_image_map *m, const char *image)
{
    for (size_t i = 0; m && image && i < m->n; i++)
        if (fnmatch(m->entries[i].pattern, image, 0) == 0)
            return &m->entries[i];
    return NULL;
}

/* ---- quantities ---- */

bool ks_quantity_parse(const char *s, double *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return false;
    static const struct {
        const char *suffix;
        double mul;
    } units[] = {{"Ki", 1024.0},
                 {"Mi", 1048576.0},
                 {"Gi", 1073741824.0},
                 {"Ti", 1099511627776.0},
                 {"Pi", 1125899906842624.0},
                 {"Ei", 1152921504606846976.0},
                 {"n", 1e-9},
                 {"u", 1e-6},
                 {"m", 1e-3},
                 {"k", 1e3},
                 {"M", 1e6},
                 {"G", 1e9},
                 {"T", 1e12},
                 {"P", 1e15},
                 {"E", 1e18},
                 {"", 1}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(end, units[i].suffix) == 0) {
            *out = v * units[i].mul;
            return true;
        }
    return false;
}

/* ---- environment ---- */

static const char *sget(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

/* metadata.labels['k'] / metadata.annotations['k'] */
static const char *bracket_field(const json_t *meta, const char *path, const char *which, char *buf,
                                 size_t size)
{
    size_t wl = strlen(which);
    if (strncmp(path, which, wl) != 0 || path[wl] != '[')
        return NULL;
    const char *k = path + wl + 1;
    char q = *k;
    if (q != '\'' && q != '"')
        return NULL;
    const char *end = strchr(k + 1, q);
    if (!end)
        return NULL;
    snprintf(buf, size, "%.*s", (int)(end - k - 1), k + 1);
    const char *v = json_string_value(json_object_get(json_object_get(meta, which), buf));
    return v ? v : "";
}

static const char *field_ref(const json_t *pod, const char *path, char *buf, size_t size)
{
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *status = json_object_get(pod, "status");
    const char *v = NULL;
    if (!strcmp(path, "metadata.name") || !strcmp(path, "metadata.namespace") ||
        !strcmp(path, "metadata.uid"))
        v = sget(meta, path + 9, NULL);
    else if (!strcmp(path, "spec.nodeName") || !strcmp(path, "spec.serviceAccountName"))
        v = sget(spec, path + 5, NULL);
    else if (!strcmp(path, "status.podIP") || !strcmp(path, "status.podIPs"))
        v = sget(status, "podIP", NULL);
    else if (!strcmp(path, "status.hostIP") || !strcmp(path, "status.hostIPs"))
        v = sget(status, "hostIP", NULL);
    else if (!strncmp(path, "metadata.labels", 15))
        v = bracket_field(meta, path + 9, "labels", buf, size);
    else if (!strncmp(path, "metadata.annotations", 20))
        v = bracket_field(meta, path + 9, "annotations", buf, size);
    if (v && v != buf) {
        snprintf(buf, size, "%s", v);
        v = buf;
    }
    return v ? v : "";
}

static kc_code resource_ref(ks_sim *sim, const json_t *pod, const json_t *ctr, const json_t *ref,
                            char *buf, size_t size, kc_err *err)
{
    const char *res = sget(ref, "resource", NULL);
    const char *cname = sget(ref, "containerName", NULL);
    if (cname && *cname) {
        size_t i;
        json_t *c;
        json_array_foreach(
            json_object_get(json_object_get(pod, "spec"), "containers"), i,
            c) if (!strcmp(sget(c, "name", NULL) ? sget(c, "name", NULL) : "", cname)) ctr = c;
    }
    if (!res || !strchr(res, '.'))
        return kc_err_set(err, KC_EINVALID, "unsupported resourceFieldRef resource %s",
                          res ? res : "(none)");
    char kind[32];
    snprintf(kind, sizeof(kind), "%.*s", (int)(strchr(res, '.') - res), res);
    const char *name = strchr(res, '.') + 1;
    const json_t *q =
        json_object_get(json_object_get(json_object_get(ctr, "resources"), kind), name);
    double v = 0, div = 1;
    if (!q && !strcmp(kind, "limits")) {
        /* No limit: the node's allocatable, as the kubelet reports it. */
        const ks_rtype *nt = ks_store_type(sim->store, "", "v1", "nodes");
        json_t *node = NULL;
        const char *nn = sget(json_object_get(pod, "spec"), "nodeName", NULL);
        if (nt && nn && ks_get(sim->store, nt, NULL, nn, &node, NULL) == KC_OK)
            ks_quantity_parse(
                sget(json_object_get(json_object_get(node, "status"), "allocatable"), name, NULL),
                &v);
        json_decref(node);
    } else if (json_is_string(q)) {
        ks_quantity_parse(json_string_value(q), &v);
    } else if (json_is_number(q)) {
        v = json_number_value(q);
    }
    const json_t *d = json_object_get(ref, "divisor");
    if (json_is_string(d))
        ks_quantity_parse(json_string_value(d), &div);
    else if (json_is_number(d))
        div = json_number_value(d);
    if (div <= 0)
        div = 1;
    snprintf(buf, size, "%.0f", ceil(v / div - 1e-9));
    return KC_OK;
}

/* Looks up data[key] of a Secret (base64-decoded) or ConfigMap; *val malloc'd, NULL when the
 * reference is optional and missing. */
static kc_code ref_value(ks_sim *sim, const char *ns, bool secret, const json_t *ref,
                         const char *key, char **val, kc_err *err)
{
    *val = NULL;
    const char *name = sget(ref, "name", NULL);
    bool optional = json_is_true(json_object_get(ref, "optional"));
    const ks_rtype *t = ks_store_type(sim->store, "", "v1", secret ? "secrets" : "configmaps");
    json_t *obj = NULL;
    if (!t || !name || ks_get(sim->store, t, ns, name, &obj, NULL) != KC_OK) {
        if (optional)
            return KC_OK;
        return kc_err_set(err, KC_ENOTFOUND, "%s \"%s\" not found", secret ? "secret" : "configmap",
                          name ? name : "");
    }
    kc_code rc = KC_OK;
    const json_t *data = json_object_get(obj, "data");
    const char *v = key ? sget(data, key, NULL) : NULL;
    if (key && !v && !secret)
        v = sget(json_object_get(obj, "binaryData"), key, NULL);
    if (key && !v) {
        if (!optional)
            rc = kc_err_set(err, KC_ENOTFOUND, "couldn't find key %s in %s %s/%s", key,
                            secret ? "Secret" : "ConfigMap", ns, name);
        goto out;
    }
    if (!key) { /* the whole object (envFrom): hand it back through val as JSON */
        *val = json_dumps(data ? data : json_object(), JSON_COMPACT);
        goto out;
    }
    if (secret) {
        unsigned char *dec = NULL;
        size_t dlen = 0;
        if (kc_base64_decode(v, strlen(v), &dec, &dlen, err) != KC_OK) {
            rc = KC_EINVALID;
            kc_err_prefix(err, "secret %s/%s key %s", ns, name, key);
            goto out;
        }
        *val = (char *)dec;
    } else {
        *val = strdup(v);
    }
out:
    json_decref(obj);
    return rc;
}

static kc_code env_from(ks_sim *sim, const char *ns, const json_t *ctr, strv *env, kc_err *err)
{
    size_t i;
    json_t *src;
    json_array_foreach(json_object_get(ctr, "envFrom"), i, src)
    {
        const char *prefix = sget(src, "prefix", NULL);
        bool secret = json_object_get(src, "secretRef") != NULL;
        const json_t *ref = json_object_get(src, secret ? "secretRef" : "configMapRef");
        if (!ref)
            continue;
        char *dump = NULL;
        kc_code rc = ref_value(sim, ns, secret, ref, NULL, &dump, err);
        if (rc != KC_OK)
            return rc;
        json_t *data = dump ? json_loads(dump, 0, NULL) : NULL;
        free(dump);
        const char *k;
        json_t *v;
        json_object_foreach(data, k, v)
        {
            char key[512];
            snprintf(key, sizeof(key), "%s%s", prefix ? prefix : "", k);
            const char *s = json_string_value(v);
            if (secret && s) {
                unsigned char *dec = NULL;
                size_t dl;
                if (kc_base64_decode(s, strlen(s), &dec, &dl, NULL) == KC_OK)
                    env_set(env, key, (char *)dec);
                free(dec);
            } else {
                env_set(env, key, s);
            }
        }
        json_decref(data);
    }
    return KC_OK;
}

static const char *server_port(ks_sim *sim, char *buf, size_t size)
{
    const char *colon = sim->server_url ? strrchr(sim->server_url, ':') : NULL;
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1))
        snprintf(buf, size, "%s", colon + 1);
    else
        snprintf(buf, size, "%d", sim->opts.https_port > 0 ? sim->opts.https_port : 443);
    return buf;
}

kc_code ks_proc_build_env(ks_sim *sim, const json_t *pod, const json_t *container,
                          const ks_image_map_entry *map, const char *sa_root, char ***out,
                          kc_err *err)
{
    *out = NULL;
    strv env = {0};
    const char *ns = sget(json_object_get(pod, "metadata"), "namespace", NULL);
    const char *pname = sget(json_object_get(pod, "metadata"), "name", NULL);
    const char *path = getenv("PATH");
    env_set(&env, "PATH", path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin");
    env_set(&env, "HOSTNAME", pname ? pname : "");
    const char *home = getenv("HOME");
    env_set(&env, "HOME", home ? home : "/root");
    /* Sanitizer and temp settings of the test run carry over to the programs it starts. */
    static const char *const pass[] = {"TMPDIR",       "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                       "LSAN_OPTIONS", "KC_LOG_LEVEL", NULL};
    for (int i = 0; pass[i]; i++)
        if (getenv(pass[i]))
            env_set(&env, pass[i], getenv(pass[i]));
    char port[16];
    server_port(sim, port, sizeof(port));
    char url[64];
    env_set(&env, "KUBERNETES_SERVICE_HOST", "127.0.0.1");
    env_set(&env, "KUBERNETES_SERVICE_PORT", port);
    env_set(&env, "KUBERNETES_SERVICE_PORT_HTTPS", port);
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%s", port);
    env_set(&env, "KUBERNETES_PORT", url);
    if (sa_root)
        env_set(&env, "KC_INCLUSTER_ROOT", sa_root);
    for (char **e = map ? map->env : NULL; e && *e; e++) {
        char *eq = strchr(*e, '=');
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - *e), *e);
        env_set(&env, key, eq + 1);
    }
    kc_code rc = env_from(sim, ns ? ns : "", container, &env, err);
    if (rc != KC_OK)
        goto fail;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(container, "env"), i, e)
    {
        const char *name = sget(e, "name", NULL);
        if (!name || !*name)
            continue;
        const json_t *vf = json_object_get(e, "valueFrom");
        char buf[4096];
        if (!vf) {
            const char *v = sget(e, "value", NULL);
            char *x = ks_proc_expand(v ? v : "", env.v);
            env_set(&env, name, x);
            env.oom = env.oom || !x;
            free(x);
        } else if (json_object_get(vf, "fieldRef")) {
            env_set(&env, name,
                    field_ref(pod,
                              sget(json_object_get(vf, "fieldRef"), "fieldPath", NULL)
                                  ? sget(json_object_get(vf, "fieldRef"), "fieldPath", NULL)
                                  : "",
                              buf, sizeof(buf)));
        } else if (json_object_get(vf, "resourceFieldRef")) {
            rc = resource_ref(sim, pod, container, json_object_get(vf, "resourceFieldRef"), buf,
                              sizeof(buf), err);
            if (rc != KC_OK)
                goto fail;
            env_set(&env, name, buf);
        } else {
            bool secret = json_object_get(vf, "secretKeyRef") != NULL;
            const json_t *ref = json_object_get(vf, secret ? "secretKeyRef" : "configMapKeyRef");
            if (!ref)
                continue;
            char *val = NULL;
            rc = ref_value(sim, ns ? ns : "", secret, ref, sget(ref, "key", NULL), &val, err);
            if (rc != KC_OK)
                goto fail;
            if (val)
                env_set(&env, name, val);
            free(val);
        }
    }
    *out = strv_take(&env);
    if (!*out)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a container environment");
    return KC_OK;
fail:
    ks_proc_strv_free(env.v);
    return rc;
}

char **ks_proc_build_argv(const json_t *container, const ks_image_map_entry *map, char **env)
{
    strv argv = {0};
    strv_push(&argv, strdup(map->program));
    for (char **a = map->args_prefix; a && *a; a++)
        strv_push(&argv, strdup(*a));
    const json_t *cmd = json_object_get(container, "command");
    size_t i;
    json_t *v;
    json_array_foreach(cmd, i, v) if (i > 0 && json_is_string(v))
        strv_push(&argv, ks_proc_expand(json_string_value(v), env));
    json_array_foreach(json_object_get(container, "args"), i, v) if (json_is_string(v))
        strv_push(&argv, ks_proc_expand(json_string_value(v), env));
    return strv_take(&argv);
}

/* ---- service account files ---- */

kc_code ks_proc_write_sa(ks_sim *sim, const json_t *pod, char **root, kc_err *err)
{
    *root = NULL;
    const json_t *meta = json_object_get(pod, "metadata");
    const char *ns = sget(meta, "namespace", NULL), *name = sget(meta, "name", NULL);
    const char *sa = sget(json_object_get(pod, "spec"), "serviceAccountName", NULL);
    if (!sa || !*sa)
        sa = "default";
    if (!sim->opts.dir || !*sim->opts.dir)
        return kc_err_set(err, KC_EARG,
                          "kubesim has no state directory (--dir) to mount the service account "
                          "token of pod %s/%s in",
                          ns ? ns : "", name ? name : "");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/pods/%s_%s/serviceaccount", sim->opts.dir, ns ? ns : "",
             name ? name : "");
    kc_code rc = ks_pki_mkdirs(dir, err);
    if (rc != KC_OK)
        return rc;
    /* A process reaches the volume through a descriptor kubesim-runas opens for it, as a mount
     * point would, whatever the modes above it; around it, it sees nothing: the pod's directory
     * and pods/ are searchable but not listable. */
    char up[4096];
    snprintf(up, sizeof(up), "%s", dir);
    for (int lvl = 0; lvl < 2; lvl++) {
        char *slash = strrchr(up, '/');
        if (!slash || slash == up)
            break;
        *slash = '\0';
        if (chmod(up, 0711) != 0)
            return kc_err_set(err, KC_EIO, "cannot set the mode of %s: %s", up, strerror(errno));
    }
    chmod(dir, 0755);
    char *token = ks_auth_sa_token(sim, ns ? ns : "", sa);
    char path[4200];
    snprintf(path, sizeof(path), "%s/token", dir);
    rc = ks_pki_write_file(path, token ? token : "", token ? strlen(token) : 0, 0644, err);
    free(token);
    if (rc == KC_OK) {
        snprintf(path, sizeof(path), "%s/ca.crt", dir);
        rc = ks_pki_write_file(path, sim->ca_pem ? sim->ca_pem : "",
                               sim->ca_pem ? strlen(sim->ca_pem) : 0, 0644, err);
    }
    if (rc == KC_OK) {
        snprintf(path, sizeof(path), "%s/namespace", dir);
        rc = ks_pki_write_file(path, ns ? ns : "", ns ? strlen(ns) : 0, 0644, err);
    }
    const json_t *fsg = json_object_get(
        json_object_get(json_object_get(pod, "spec"), "securityContext"), "fsGroup");
    if (rc == KC_OK && json_is_integer(fsg))
        rc = ks_runas_own_volume(dir, json_integer_value(fsg), true, err);
    if (rc != KC_OK)
        return rc;
    *root = strdup(dir);
    return *root ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
}
