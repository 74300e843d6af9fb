/* op_image: resolves a component section's repository/image/version into an image reference. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_render.h"

/* A path component of an image name: lowercase alphanumerics separated by '.', '_', '-'. */
static bool valid_component(const char *s, size_t n)
{
    if (n == 0 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A registry host with optional port (e.g. nvcr.io, registry.example.com:5000, localhost). */
static bool valid_host(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || c == '.' || c == '-' || c == ':'))
            return false;
    }
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

/* "a/b/c": slash-separated components; the first may be a registry host when allow_host. */
static bool valid_path(const char *s, size_t n, bool allow_host)
{
    if (n == 0)
        return false;
    size_t start = 0;
    bool first = true;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/')
            continue;
        const char *c = s + start;
        size_t len = i - start;
        bool host_like = first && allow_host && i < n &&
                         (memchr(c, '.', len) || memchr(c, ':', len) ||
                          (len == 9 && memcmp(c, "localhost", 9) == 0));
        if (host_like ? !valid_host(c, len) : !valid_component(c, len))
            return false;
        first = false;
        start = i + 1;
    }
    return true;
}

static bool valid_tag(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || !(isalnum((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* algorithm:hex, e.g. sha256:<64 hex>. */
static bool valid_digest(const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s)
        return false;
    for (const char *p = s; p < colon; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p)))
            return false;
    size_t hex = strlen(colon + 1);
    if (hex < 32)
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (!isxdigit((unsigned char)*p))
            return false;
    return true;
}

static bool is_digest_version(const char *v)
{
    return strchr(v, ':') != NULL;
}

/* Splits a full reference into its name and its tag (or digest, with *is_digest). The tag is the
 * part after a ':' that follows the last '/'. Pointers index into ref; lengths returned. */
static void split_ref(const char *ref, size_t *name_len, const char **tag, bool *is_digest)
{
    const char *at = strchr(ref, '@');
    if (at) {
        *name_len = (size_t)(at - ref);
        *tag = at + 1;
        *is_digest = true;
        /* name@digest may also carry a tag (name:tag@digest): keep it out of the name */
        const char *slash = memrchr(ref, '/', *name_len);
        const char *colon = memchr(slash ? slash : ref, ':', (size_t)(at - (slash ? slash : ref)));
        if (colon)
            *name_len = (size_t)(colon - ref);
        return;
    }
    *is_digest = false;
    const char *slash = strrchr(ref, '/');
    const char *colon = strchr(slash ? slash : ref, ':');
    if (colon) {
        *name_len = (size_t)(colon - ref);
        *tag = colon + 1;
    } else {
        *name_len = strlen(ref);
        *tag = NULL;
    }
}

static bool has_space(const char *s)
{
    for (; *s; s++)
        if (isspace((unsigned char)*s))
            return true;
    return false;
}

/* Reads section.key as an optional string ("" counts as absent). */
static int get_field(const json_t *section, const char *key, const char *path, const char **out,
                     kc_err *err)
{
    *out = NULL;
    json_t *v = section ? json_object_get(section, key) : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        kc_err_set(err, KC_EINVALID, "%s.%s: must be a string", path, key);
        return -1;
    }
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return 0;
}

/* strdup that says so in err when memory runs out (callers retry out-of-memory failures). */
static char *dup_or_oom(const char *s, const char *path, kc_err *err)
{
    char *d = strdup(s);
    if (!d)
        kc_err_set(err, KC_ENOMEM, "%s: out of memory", path);
    return d;
}

char *op_image(const json_t *section, const char *field_path, const char *def, kc_err *err)
{
    const char *path = field_path ? field_path : "image";
    if (section && !json_is_null(section) && !json_is_object(section)) {
        kc_err_set(err, KC_EINVALID, "%s: must be an object", path);
        return NULL;
    }
    const char *repo, *img, *ver;
    if (get_field(section, "repository", path, &repo, err) ||
        get_field(section, "image", path, &img, err) ||
        get_field(section, "version", path, &ver, err))
        return NULL;
    if (repo && (has_space(repo) || !valid_path(repo, strlen(repo), true))) {
        kc_err_set(err, KC_EINVALID, "%s.repository: \"%s\" is not a valid image repository", path,
                   repo);
        return NULL;
    }
    if (ver && (has_space(ver) || !(is_digest_version(ver) ? valid_digest(ver) : valid_tag(ver)))) {
        kc_err_set(err, KC_EINVALID, "%s.version: \"%s\" is not a valid image tag", path, ver);
        return NULL;
    }
    if (img) {
        size_t name_len;
        const char *tag = NULL;
        bool digest = false;
        split_ref(img, &name_len, &tag, &digest);
        bool ok = !has_space(img) && valid_path(img, name_len, true) &&
                  (!tag || (digest ? valid_digest(tag) : valid_tag(tag)));
        if (!ok) {
            kc_err_set(err, KC_EINVALID, "%s.image: \"%s\" is not a valid image name", path, img);
            return NULL;
        }
        if (tag) /* already complete: used as it is */
            return dup_or_oom(img, path, err);
    }
    if (!repo && !img && !ver) {
        if (!def) {
            kc_err_set(err, KC_EINVALID, "%s: names no image (set repository, image and version)",
                       path);
            return NULL;
        }
        return dup_or_oom(def, path, err);
    }

    /* Missing parts come from the default, e.g. a mirror that sets only repository. */
    char *dname = NULL;
    const char *drepo_end = NULL, *dimg = NULL, *dtag = NULL;
    size_t dimg_len = 0, drepo_len = 0;
    if (def) {
        size_t name_len;
        bool digest;
        split_ref(def, &name_len, &dtag, &digest);
        dname = strndup(def, name_len);
        if (!dname)
            goto oom;
        drepo_end = strrchr(dname, '/');
        dimg = drepo_end ? drepo_end + 1 : dname;
        dimg_len = strlen(dimg);
        drepo_len = drepo_end ? (size_t)(drepo_end - dname) : 0;
    }
    char *out = NULL;
    if (!img && !dimg) {
        kc_err_set(err, KC_EINVALID, "%s.image: required", path);
        goto done;
    }
    /* The default's version only fits the default's image. */
    bool same_image = !img || (dimg && strlen(img) == dimg_len && memcmp(img, dimg, dimg_len) == 0);
    if (!ver && !(same_image && dtag)) {
        kc_err_set(err, KC_EINVALID, "%s.version: required: image \"%s\" has no tag", path,
                   img ? img : dimg);
        goto done;
    }
    const char *use_ver = ver ? ver : dtag;
    bool digest = is_digest_version(use_ver);
    int n;
    if (repo)
        n = asprintf(&out, "%s/%s%s%s", repo, img ? img : dimg, digest ? "@" : ":", use_ver);
    else if (drepo_len)
        n = asprintf(&out, "%.*s/%s%s%s", (int)drepo_len, dname, img ? img : dimg,
                     digest ? "@" : ":", use_ver);
    else
        n = asprintf(&out, "%s%s%s", img ? img : dimg, digest ? "@" : ":", use_ver);
    if (n < 0) {
        out = NULL;
        free(dname);
        goto oom;
    }
done:
    free(dname);
    return out;
oom:
    kc_err_set(err, KC_ENOMEM, "%s: out of memory", path);
    return NULL;
}
