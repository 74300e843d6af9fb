/* kc_jsonpatch: RFC 6901 JSON Pointer helpers and atomic RFC 6902 JSON patch application. */
#include "kc_patch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pointer internals report bare messages ("no member "x" at "/a""); the public wrappers and the
 * patch loop add what the caller needs to know (which pointer, which operation). */

/* Copies the token starting at p (just after a '/') up to the next '/' or the end, unescaping ~0
 * and ~1. Sets *next to the following '/' or the terminating NUL. */
static kc_code read_token(const char *p, const char **next, char **tok, kc_err *err)
{
    const char *end = strchr(p, '/');
    if (!end)
        end = p + strlen(p);
    char *t = malloc((size_t)(end - p) + 1);
    if (!t)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    size_t n = 0;
    for (const char *s = p; s < end; s++) {
        if (*s != '~') {
            t[n++] = *s;
            continue;
        }
        if (s + 1 < end && (s[1] == '0' || s[1] == '1')) {
            t[n++] = s[1] == '0' ? '~' : '/';
            s++;
            continue;
        }
        free(t);
        return kc_err_set(err, KC_EPARSE, "\"~\" must be followed by 0 or 1");
    }
    t[n] = 0;
    *tok = t;
    *next = end;
    return KC_OK;
}

/* Parses an array index token: digits only, no leading zero. "-" gives *idx = SIZE_MAX when
 * allowed. */
static kc_code parse_index(const char *tok, int dash_ok, size_t *idx, kc_err *err)
{
    if (strcmp(tok, "-") == 0) {
        if (!dash_ok)
            return kc_err_set(err, KC_EINVALID,
                              "index \"-\" (past the end) can only be used to add");
        *idx = SIZE_MAX;
        return KC_OK;
    }
    size_t n = strlen(tok);
    if (n == 0 || (n > 1 && tok[0] == '0'))
        return kc_err_set(err, KC_EINVALID, "\"%s\" is not a valid array index%s", tok,
                          n ? " (leading zero)" : "");
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return kc_err_set(err, KC_EINVALID, "\"%s\" is not a valid array index", tok);
        if (v > (SIZE_MAX / 2 - 9) / 10)
            return kc_err_set(err, KC_EINVALID, "array index %s is out of range", tok);
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *idx = v;
    return KC_OK;
}

/* Walks every token but the last. On success *parent is a borrowed container and *last the
 * unescaped final token (malloc'd). `ptr` must start with '/'. */
static kc_code walk_parent(json_t *doc, const char *ptr, json_t **parent, char **last, kc_err *err)
{
    json_t *cur = doc;
    const char *p = ptr;
    for (;;) {
        char *tok = NULL;
        const char *next = p + 1;
        kc_code rc = read_token(p + 1, &next, &tok, err);
        if (rc != KC_OK)
            return rc;
        if (*next == 0) {
            *parent = cur;
            *last = tok;
            return KC_OK;
        }
        json_t *child = NULL;
        int at = (int)(p - ptr);
        if (json_is_object(cur)) {
            child = json_object_get(cur, tok);
            if (!child)
                rc = kc_err_set(err, KC_EINVALID, "no member \"%s\" in the object at \"%.*s\"", tok,
                                at, ptr);
        } else if (json_is_array(cur)) {
            size_t i;
            rc = parse_index(tok, 0, &i, err);
            if (rc == KC_OK && i >= json_array_size(cur))
                rc = kc_err_set(err, KC_EINVALID,
                                "index %zu is out of range for the array at \"%.*s\" (size %zu)", i,
                                at, ptr, json_array_size(cur));
            if (rc == KC_OK)
                child = json_array_get(cur, i);
        } else {
            rc = kc_err_set(err, KC_EINVALID, "\"%.*s\" is a %s, not an object or array", at, ptr,
                            json_is_string(cur)   ? "string"
                            : json_is_number(cur) ? "number"
                            : json_is_null(cur)   ? "null"
                                                  : "boolean");
        }
        free(tok);
        if (rc != KC_OK)
            return rc;
        cur = child;
        p = next;
    }
}

/* Prefixes a failure with the pointer it concerns and hands back its code. */
static kc_code with_pointer(kc_code rc, kc_err *err, const char *what, const char *ptr)
{
    if (rc != KC_OK)
        kc_err_prefix(err, "%s \"%.200s\"", what, ptr ? ptr : "");
    return rc;
}

static kc_code check_syntax(const char *ptr, kc_err *err)
{
    if (!ptr)
        return kc_err_set(err, KC_EARG, "pointer is NULL");
    if (ptr[0] != 0 && ptr[0] != '/')
        return kc_err_set(err, KC_EPARSE, "a pointer must be empty or start with \"/\"");
    return KC_OK;
}

static kc_code ptr_resolve(const json_t *doc, const char *ptr, json_t **out, kc_err *err)
{
    json_t *parent;
    char *tok;
    kc_code rc = check_syntax(ptr, err);
    if (rc != KC_OK)
        return rc;
    if (!ptr[0]) {
        *out = (json_t *)doc;
        return KC_OK;
    }
    rc = walk_parent((json_t *)doc, ptr, &parent, &tok, err);
    if (rc != KC_OK)
        return rc;
    int at = (int)(strrchr(ptr, '/') - ptr);
    if (json_is_object(parent)) {
        *out = json_object_get(parent, tok);
        if (!*out)
            rc = kc_err_set(err, KC_EINVALID, "no member \"%s\" in the object at \"%.*s\"", tok, at,
                            ptr);
    } else if (json_is_array(parent)) {
        size_t i;
        rc = parse_index(tok, 0, &i, err);
        if (rc == KC_OK && i >= json_array_size(parent))
            rc = kc_err_set(err, KC_EINVALID,
                            "index %zu is out of range for the array at \"%.*s\" (size %zu)", i, at,
                            ptr, json_array_size(parent));
        if (rc == KC_OK)
            *out = json_array_get(parent, i);
    } else {
        rc = kc_err_set(err, KC_EINVALID, "\"%.*s\" is not an object or array", at, ptr);
    }
    free(tok);
    return rc;
}

/* Shared by set (add rules) and replace. Steals value. */
static kc_code ptr_put(json_t **doc, const char *ptr, json_t *value, int must_exist, kc_err *err)
{
    json_t *parent;
    char *tok = NULL;
    kc_code rc = check_syntax(ptr, err);
    if (rc != KC_OK || !value) {
        json_decref(value);
        return rc != KC_OK ? rc : kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    if (!ptr[0]) {
        json_decref(*doc);
        *doc = value;
        return KC_OK;
    }
    rc = walk_parent(*doc, ptr, &parent, &tok, err);
    if (rc != KC_OK)
        goto out_value;
    int at = (int)(strrchr(ptr, '/') - ptr);
    if (json_is_object(parent)) {
        if (must_exist && !json_object_get(parent, tok)) {
            rc = kc_err_set(err, KC_EINVALID, "no member \"%s\" in the object at \"%.*s\"", tok, at,
                            ptr);
            goto out_value;
        }
        rc = json_object_set_new(parent, tok, value) == 0
                 ? KC_OK
                 : kc_err_set(err, KC_ENOMEM, "out of memory");
        value = NULL;
    } else if (json_is_array(parent)) {
        size_t i, n = json_array_size(parent);
        rc = parse_index(tok, !must_exist, &i, err);
        if (rc != KC_OK)
            goto out_value;
        if (i == SIZE_MAX)
            i = n;
        if (i > n || (must_exist && i == n)) {
            rc = kc_err_set(err, KC_EINVALID,
                            "index %zu is out of range for the array at \"%.*s\" (size %zu)", i, at,
                            ptr, n);
            goto out_value;
        }
        int bad = must_exist ? json_array_set_new(parent, i, value)
                             : json_array_insert_new(parent, i, value);
        value = NULL;
        rc = bad ? kc_err_set(err, KC_ENOMEM, "out of memory") : KC_OK;
    } else {
        rc = kc_err_set(err, KC_EINVALID, "\"%.*s\" is not an object or array", at, ptr);
    }
out_value:
    json_decref(value);
    free(tok);
    return rc;
}

static kc_code ptr_remove(json_t *doc, const char *ptr, json_t **removed, kc_err *err)
{
    json_t *target = NULL;
    kc_code rc = ptr_resolve(doc, ptr, &target, err);
    if (rc != KC_OK)
        return rc;
    if (!ptr[0])
        return kc_err_set(err, KC_EINVALID, "cannot remove the whole document");
    json_t *parent;
    char *tok;
    rc = walk_parent(doc, ptr, &parent, &tok, err);
    if (rc != KC_OK)
        return rc;
    if (removed)
        *removed = json_incref(target);
    if (json_is_object(parent)) {
        json_object_del(parent, tok);
    } else {
        size_t i = 0;
        parse_index(tok, 0, &i, NULL); /* already validated by ptr_resolve */
        json_array_remove(parent, i);
    }
    free(tok);
    return KC_OK;
}

kc_code kc_json_pointer_resolve(const json_t *doc, const char *pointer, json_t **out, kc_err *err)
{
    if (!doc || !out)
        return kc_err_set(err, KC_EARG, "kc_json_pointer_resolve: doc and out are required");
    kc_code rc = ptr_resolve(doc, pointer, out, err);
    return with_pointer(rc, err, "pointer", pointer);
}

kc_code kc_json_pointer_set(json_t **doc, const char *pointer, json_t *value, kc_err *err)
{
    if (!doc || !*doc) {
        json_decref(value);
        return kc_err_set(err, KC_EARG, "kc_json_pointer_set: doc is required");
    }
    kc_code rc = ptr_put(doc, pointer, value, 0, err);
    return with_pointer(rc, err, "pointer", pointer);
}

kc_code kc_json_pointer_replace(json_t **doc, const char *pointer, json_t *value, kc_err *err)
{
    if (!doc || !*doc) {
        json_decref(value);
        return kc_err_set(err, KC_EARG, "kc_json_pointer_replace: doc is required");
    }
    kc_code rc = ptr_put(doc, pointer, value, 1, err);
    return with_pointer(rc, err, "pointer", pointer);
}

kc_code kc_json_pointer_remove(json_t *doc, const char *pointer, json_t **removed, kc_err *err)
{
    if (removed)
        *removed = NULL;
    if (!doc)
        return kc_err_set(err, KC_EARG, "kc_json_pointer_remove: doc is required");
    kc_code rc = ptr_remove(doc, pointer, removed, err);
    return with_pointer(rc, err, "pointer", pointer);
}

char *kc_json_pointer_append(const char *base, const char *token)
{
    if (!base)
        base = "";
    if (!token)
        return NULL;
    size_t bl = strlen(base), extra = 0;
    for (const char *s = token; *s; s++)
        extra += (*s == '~' || *s == '/');
    char *out = malloc(bl + 1 + strlen(token) + extra + 1);
    if (!out)
        return NULL;
    memcpy(out, base, bl);
    char *w = out + bl;
    *w++ = '/';
    for (const char *s = token; *s; s++) {
        if (*s == '~' || *s == '/') {
            *w++ = '~';
            *w++ = *s == '~' ? '0' : '1';
        } else {
            *w++ = *s;
        }
    }
    *w = 0;
    return out;
}

/* ---- RFC 6902 ---- */

/* Reads a string member of an operation; rejects NUL bytes, which a pointer cannot carry. */
static kc_code op_string(const json_t *op, const char *field, const char **out, kc_err *err)
{
    json_t *v = json_object_get(op, field);
    if (!v)
        return kc_err_set(err, KC_EPARSE, "missing \"%s\"", field);
    if (!json_is_string(v))
        return kc_err_set(err, KC_EPARSE, "\"%s\" must be a string", field);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return kc_err_set(err, KC_EPARSE, "\"%s\" holds a NUL byte", field);
    *out = json_string_value(v);
    return KC_OK;
}

static kc_code op_value(const json_t *op, json_t **copy, kc_err *err)
{
    json_t *v = json_object_get(op, "value");
    if (!v)
        return kc_err_set(err, KC_EPARSE, "missing \"value\"");
    *copy = json_deep_copy(v);
    return *copy ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
}

/* Each "copy" may double the document, so a short patch could ask for 2^60 nodes; like the API
 * server, cap what the copies of one patch may create in all. */
#define KC_JSON_PATCH_MAX_COPIED 1000000

/* Counts the nodes of v, stopping once the count passes limit. */
static size_t count_nodes(const json_t *v, size_t limit)
{
    size_t n = 1, i;
    const char *k;
    json_t *child;
    if (json_is_array(v)) {
        json_array_foreach(v, i, child)
        {
            if (n > limit)
                break;
            n += count_nodes(child, limit - n);
        }
    } else if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, child)
        {
            if (n > limit)
                break;
            n += count_nodes(child, limit - n);
        }
    }
    return n;
}

/* Applies one operation to *doc (owned by the caller's working copy); *copied counts the nodes
 * created by copy operations so far. */
static kc_code apply_op(json_t **doc, const json_t *op, const char *name, const char *path,
                        size_t *copied, kc_err *err)
{
    json_t *value = NULL, *found = NULL;
    const char *from = NULL;
    kc_code rc;

    if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0) {
        rc = op_value(op, &value, err);
        if (rc != KC_OK)
            return rc;
        return ptr_put(doc, path, value, name[0] == 'r', err);
    }
    if (strcmp(name, "remove") == 0)
        return ptr_remove(*doc, path, NULL, err);
    if (strcmp(name, "test") == 0) {
        json_t *want = json_object_get(op, "value");
        if (!want)
            return kc_err_set(err, KC_EPARSE, "missing \"value\"");
        rc = ptr_resolve(*doc, path, &found, err);
        /* A value that is not there does not match either: a precondition failed. */
        if (rc == KC_EINVALID) {
            char msg[KC_ERR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", err ? err->msg : "");
            return kc_err_set(err, KC_EPATCHTEST, "%s", msg);
        }
        if (rc != KC_OK)
            return rc;
        if (!kc_json_equal(found, want)) {
            char *have = json_dumps(found, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
            char *exp = json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
            rc = kc_err_set(err, KC_EPATCHTEST, "value is %.120s, expected %.120s",
                            have ? have : "?", exp ? exp : "?");
            free(have);
            free(exp);
        }
        return rc;
    }
    if (strcmp(name, "move") != 0 && strcmp(name, "copy") != 0)
        return kc_err_set(err, KC_EPARSE,
                          "unknown operation (expected add, remove, replace, move, copy or test)");
    rc = op_string(op, "from", &from, err);
    if (rc == KC_OK)
        rc = check_syntax(from, err);
    if (rc != KC_OK)
        return with_pointer(rc, err, "from", from);
    if (name[0] == 'c') {
        rc = ptr_resolve(*doc, from, &found, err);
        if (rc != KC_OK)
            return with_pointer(rc, err, "from", from);
        *copied += count_nodes(found, KC_JSON_PATCH_MAX_COPIED);
        if (*copied > KC_JSON_PATCH_MAX_COPIED)
            return kc_err_set(err, KC_EINVALID,
                              "copy operations would create more than %d values in all",
                              KC_JSON_PATCH_MAX_COPIED);
        value = json_deep_copy(found);
        if (!value)
            return kc_err_set(err, KC_ENOMEM, "out of memory");
        return ptr_put(doc, path, value, 0, err);
    }
    size_t fl = strlen(from);
    if (strcmp(from, path) == 0) {
        rc = ptr_resolve(*doc, from, &found, err);
        return with_pointer(rc, err, "from", from);
    }
    if (strncmp(from, path, fl) == 0 && path[fl] == '/')
        return kc_err_set(err, KC_EINVALID, "cannot move \"%s\" into one of its own children",
                          from);
    if (!from[0])
        return kc_err_set(err, KC_EINVALID, "cannot move the whole document");
    rc = ptr_remove(*doc, from, &value, err);
    if (rc != KC_OK)
        return with_pointer(rc, err, "from", from);
    return ptr_put(doc, path, value, 0, err);
}

kc_code kc_json_patch_apply(const json_t *doc, const json_t *ops, json_t **out, kc_err *err)
{
    kc_code rc = KC_OK;
    if (!doc || !out)
        return kc_err_set(err, KC_EARG, "kc_json_patch_apply: doc and out are required");
    *out = NULL;
    if (!json_is_array(ops))
        return kc_err_set(err, KC_EPARSE, "a JSON patch must be an array of operations");
    json_t *work = json_deep_copy(doc);
    if (!work)
        return kc_err_set(err, KC_ENOMEM, "out of memory copying the document");
    size_t i, copied = 0;
    json_t *op;
    json_array_foreach(ops, i, op)
    {
        const char *name = NULL, *path = NULL;
        if (!json_is_object(op)) {
            rc = kc_err_set(err, KC_EPARSE, "operation %zu: must be an object", i);
            goto out_work;
        }
        rc = op_string(op, "op", &name, err);
        if (rc != KC_OK) {
            kc_err_prefix(err, "operation %zu", i);
            goto out_work;
        }
        rc = op_string(op, "path", &path, err);
        if (rc == KC_OK)
            rc = check_syntax(path, err);
        if (rc == KC_OK)
            rc = apply_op(&work, op, name, path, &copied, err);
        if (rc != KC_OK) {
            kc_err_prefix(err, "operation %zu (%.20s) path \"%.200s\"", i, name, path ? path : "");
            goto out_work;
        }
    }
    *out = work;
    return KC_OK;
out_work:
    json_decref(work);
    return rc;
}
