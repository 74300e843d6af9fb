/* ks_table: meta.k8s.io Tables (what `kubectl get` prints) built from a type's printer columns:
 * a small JSONPath evaluator, the API machinery's HumanDuration, and the row/column layout.
 * Computed "@" columns are in ks_table_cells.c. */
#include "ks_server_int.h"
#include "ks_table_int.h"
#include "ks_types.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * HumanDuration
 */

const char *ks_human_duration(char *buf, size_t size, long long secs)
{
    if (secs < -1) {
        snprintf(buf, size, "<invalid>");
        return buf;
    }
    if (secs < 0)
        secs = 0;
    long long mins = secs / 60, hours = secs / 3600, days = hours / 24;
    if (secs < 120)
        snprintf(buf, size, "%llds", secs);
    else if (mins < 10)
        secs % 60 ? snprintf(buf, size, "%lldm%llds", mins, secs % 60)
                  : snprintf(buf, size, "%lldm", mins);
    else if (mins < 180)
        snprintf(buf, size, "%lldm", mins);
    else if (hours < 8)
        mins % 60 ? snprintf(buf, size, "%lldh%lldm", hours, mins % 60)
                  : snprintf(buf, size, "%lldh", hours);
    else if (hours < 48)
        snprintf(buf, size, "%lldh", hours);
    else if (hours < 24 * 8)
        hours % 24 ? snprintf(buf, size, "%lldd%lldh", days, hours % 24)
                   : snprintf(buf, size, "%lldd", days);
    else if (hours < 24 * 365 * 2)
        snprintf(buf, size, "%lldd", days);
    else if (hours < 24 * 365 * 8)
        days % 365 ? snprintf(buf, size, "%lldy%lldd", days / 365, days % 365)
                   : snprintf(buf, size, "%lldy", days / 365);
    else
        snprintf(buf, size, "%lldy", days / 365);
    return buf;
}

bool ks_parse_rfc3339(const char *s, time_t *out)
{
    if (!s)
        return false;
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    const char *p = s + n;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    long off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return false;
        off = (hh * 3600L + mm * 60L) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return false;
    }
    if (*p)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = timegm(&tm) - off;
    return true;
}

const char *ks_human_age(char *buf, size_t size, const char *rfc3339, time_t now)
{
    time_t t;
    if (!ks_parse_rfc3339(rfc3339, &t)) {
        snprintf(buf, size, "<unknown>");
        return buf;
    }
    return ks_human_duration(buf, size, (long long)(now - t));
}

/* ---------------------------------------------------------------------------------------------
 * JSONPath: .a.b, ['a.b'], [N], [*], [?(@.k=="v")], [?(@.k)], escaped dots (a\.b)
 */

typedef enum step_kind { STEP_FIELD, STEP_INDEX, STEP_ALL, STEP_FILTER } step_kind;

typedef struct step {
    step_kind kind;
    char key[256]; /* FIELD: the member; FILTER: the dotted path after @. */
    long index;
    int op;      /* FILTER: 0 exists, 1 ==, 2 != */
    json_t *val; /* FILTER: the value compared with (owned) */
} step;

#define MAX_STEPS 24

static bool read_name(const char **pp, char *out, size_t size)
{
    const char *p = *pp;
    size_t n = 0;
    while (*p && *p != '.' && *p != '[') {
        if (*p == '\\' && p[1])
            p++;
        if (n + 1 >= size)
            return false;
        out[n++] = *p++;
    }
    out[n] = '\0';
    *pp = p;
    return n > 0;
}

static json_t *literal(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0])
        return json_stringn(s + 1, n - 2);
    char buf[128];
    snprintf(buf, sizeof(buf), "%.*s", (int)(n < 127 ? n : 127), s);
    if (!strcmp(buf, "true") || !strcmp(buf, "false"))
        return json_boolean(!strcmp(buf, "true"));
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (buf[0] && end && !*end)
        return json_integer(v);
    double d = strtod(buf, &end);
    if (buf[0] && end && !*end)
        return json_real(d);
    return json_string(buf);
}

/* "?(@.a.b == "x")" → a FILTER step. */
static bool parse_filter(const char *s, size_t n, step *st)
{
    if (n < 4 || s[0] != '?' || s[1] != '(' || s[n - 1] != ')')
        return false;
    s += 2, n -= 3;
    while (n && isspace((unsigned char)*s))
        s++, n--;
    if (n < 2 || s[0] != '@' || s[1] != '.')
        return false;
    s += 2, n -= 2;
    size_t k = 0;
    while (k < n && !isspace((unsigned char)s[k]) && s[k] != '=' && s[k] != '!')
        k++;
    if (k == 0 || k >= sizeof(st->key))
        return false;
    memcpy(st->key, s, k);
    st->key[k] = '\0';
    st->kind = STEP_FILTER;
    const char *rest = s + k;
    size_t rn = n - k;
    while (rn && isspace((unsigned char)*rest))
        rest++, rn--;
    if (rn == 0) {
        st->op = 0;
        return true;
    }
    if (rn >= 2 && (!strncmp(rest, "==", 2) || !strncmp(rest, "!=", 2))) {
        st->op = rest[0] == '=' ? 1 : 2;
        st->val = literal(rest + 2, rn - 2);
        return st->val != NULL;
    }
    return false;
}

static void free_steps(step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(steps[i].val);
}

static bool parse_path(const char *path, step *steps, size_t *nsteps)
{
    *nsteps = 0;
    size_t len = strlen(path);
    char buf[1024];
    while (len && isspace((unsigned char)*path))
        path++, len--;
    if (len >= 2 && path[0] == '{' && path[len - 1] == '}')
        path++, len -= 2;
    if (len >= sizeof(buf))
        return false;
    memcpy(buf, path, len);
    buf[len] = '\0';
    const char *p = buf;
    if (*p == '$')
        p++;
    while (*p) {
        if (*nsteps == MAX_STEPS)
            goto fail;
        step *st = &steps[*nsteps];
        memset(st, 0, sizeof(*st));
        if (*p == '[') {
            const char *s = ++p;
            int depth = 0;
            char q = 0;
            while (*p && (q || depth || *p != ']')) {
                if (q) {
                    if (*p == q)
                        q = 0;
                } else if (*p == '"' || *p == '\'') {
                    q = *p;
                } else if (*p == '(') {
                    depth++;
                } else if (*p == ')') {
                    depth--;
                }
                p++;
            }
            if (*p != ']')
                goto fail;
            size_t n = (size_t)(p - s);
            p++;
            if (n == 1 && s[0] == '*') {
                st->kind = STEP_ALL;
            } else if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0]) {
                if (n - 2 >= sizeof(st->key))
                    goto fail;
                st->kind = STEP_FIELD;
                memcpy(st->key, s + 1, n - 2);
                st->key[n - 2] = '\0';
            } else if (n && s[0] == '?') {
                if (!parse_filter(s, n, st)) {
                    json_decref(st->val);
                    goto fail;
                }
            } else {
                char num[32];
                char *end = NULL;
                if (n == 0 || n >= sizeof(num))
                    goto fail;
                memcpy(num, s, n);
                num[n] = '\0';
                st->kind = STEP_INDEX;
                st->index = strtol(num, &end, 10);
                if (!end || *end)
                    goto fail;
            }
        } else {
            if (*p == '.')
                p++;
            if (*p == '.' || *p == '\0')
                goto fail; /* ".." (recursive descent) is not supported */
            if (*p == '[')
                continue;
            if (!read_name(&p, st->key, sizeof(st->key)))
                goto fail;
            st->kind = strcmp(st->key, "*") == 0 ? STEP_ALL : STEP_FIELD;
        }
        (*nsteps)++;
    }
    return true;
fail:
    free_steps(steps, *nsteps);
    *nsteps = 0;
    return false;
}

static const json_t *dotted(const json_t *node, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k && node; k = strtok_r(NULL, ".", &save))
        node = json_object_get(node, k);
    return node;
}

static bool filter_match(const step *st, const json_t *elem)
{
    const json_t *v = dotted(elem, st->key);
    if (st->op == 0)
        return v != NULL;
    bool eq = false;
    if (v && json_is_number(v) && json_is_number(st->val))
        eq = json_number_value(v) == json_number_value(st->val);
    else if (v)
        eq = json_equal((json_t *)v, st->val);
    return st->op == 1 ? eq : !eq;
}

static void eval(const json_t *node, const step *steps, size_t n, json_t *out)
{
    if (!node)
        return;
    if (n == 0) {
        json_array_append(out, (json_t *)node);
        return;
    }
    const step *st = &steps[0];
    size_t i;
    json_t *v;
    const char *k;
    switch (st->kind) {
    case STEP_FIELD:
        if (json_is_object(node))
            eval(json_object_get(node, st->key), steps + 1, n - 1, out);
        break;
    case STEP_INDEX:
        if (json_is_array(node)) {
            long sz = (long)json_array_size(node);
            long idx = st->index < 0 ? sz + st->index : st->index;
            if (idx >= 0 && idx < sz)
                eval(json_array_get(node, (size_t)idx), steps + 1, n - 1, out);
        }
        break;
    case STEP_ALL:
        if (json_is_array(node)) {
            json_array_foreach((json_t *)node, i, v)
            {
                eval(v, steps + 1, n - 1, out);
            }
        } else if (json_is_object(node)) {
            json_object_foreach((json_t *)node, k, v)
            {
                eval(v, steps + 1, n - 1, out);
            }
        }
        break;
    case STEP_FILTER:
        if (json_is_array(node)) {
            json_array_foreach((json_t *)node, i, v)
            {
                if (filter_match(st, v))
                    eval(v, steps + 1, n - 1, out);
            }
        }
        break;
    }
}

json_t *ks_jsonpath_eval(const json_t *obj, const char *path)
{
    step steps[MAX_STEPS];
    size_t n = 0;
    if (!path || !parse_path(path, steps, &n))
        return NULL;
    json_t *out = json_array();
    if (out)
        eval(obj, steps, n, out);
    free_steps(steps, n);
    return out;
}

const json_t *ks_jsonpath_first(const json_t *obj, const char *path, json_t **holder)
{
    *holder = ks_jsonpath_eval(obj, path);
    return json_array_get(*holder, 0);
}

/* ---------------------------------------------------------------------------------------------
 * tables
 */

ks_include ks_include_parse(const char *s)
{
    if (s && !strcmp(s, "Object"))
        return KS_INCLUDE_OBJECT;
    if (s && !strcmp(s, "None"))
        return KS_INCLUDE_NONE;
    return KS_INCLUDE_METADATA;
}

json_t *ks_partial_metadata(const json_t *obj, const char *meta_version)
{
    json_t *meta = json_object_get(obj, "metadata");
    return json_pack("{s:s, s:s, s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                     meta_version && !strcmp(meta_version, "v1beta1") ? "meta.k8s.io/v1beta1"
                                                                      : "meta.k8s.io/v1",
                     "metadata", meta ? meta : json_object());
}

/* Name and Age, for a type registered without columns. */
static json_t *default_columns(void)
{
    return json_pack("[{s:s, s:s, s:s, s:s, s:i, s:s}, {s:s, s:s, s:s, s:s, s:i, s:s}]", "name",
                     "Name", "type", "string", "format", "name", "description", KS_NAME_COLUMN_DESC,
                     "priority", 0, "jsonPath", ".metadata.name", "name", "Age", "type", "date",
                     "format", "", "description", KS_AGE_COLUMN_DESC, "priority", 0, "jsonPath",
                     ".metadata.creationTimestamp");
}

static json_t *as_text(const json_t *v)
{
    if (json_is_string(v))
        return json_incref((json_t *)v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *out = json_string(s ? s : "");
    free(s);
    return out;
}

json_t *ks_table_cell(const json_t *col, const json_t *obj, time_t now)
{
    const char *path = json_string_value(json_object_get(col, "jsonPath"));
    const char *type = json_string_value(json_object_get(col, "type"));
    json_t *dflt = json_object_get(col, "default");
    if (!path)
        return dflt ? json_incref(dflt) : json_null();
    if (path[0] == '@') {
        json_t *v = ks_table_computed(path + 1, obj, now);
        if (v)
            return v;
        return dflt ? json_incref(dflt) : json_null();
    }
    json_t *holder = NULL;
    const json_t *v = ks_jsonpath_first(obj, path, &holder);
    json_t *out;
    if (!v || json_is_null(v)) {
        out = dflt ? json_incref(dflt) : json_null();
    } else if (type && !strcmp(type, "date")) {
        char age[32];
        out = json_string(ks_human_age(age, sizeof(age), json_string_value(v), now));
    } else if (!type || !strcmp(type, "string")) {
        out = as_text(v);
    } else {
        out = json_incref((json_t *)v);
    }
    json_decref(holder);
    return out;
}

json_t *ks_table_build(const ks_rtype *t, const json_t *items, const char *rv, const char *cont,
                       ks_include include, bool headers, const char *table_version)
{
    json_t *own = NULL;
    const json_t *cols = t ? t->printer_columns : NULL;
    if (!json_is_array(cols) || json_array_size(cols) == 0)
        cols = own = default_columns();
    const char *ver = table_version && !strcmp(table_version, "v1beta1") ? "v1beta1" : "v1";
    char av[32];
    snprintf(av, sizeof(av), "meta.k8s.io/%s", ver);
    json_t *defs = json_array(), *rows = json_array(), *meta = json_object();
    json_t *table = json_pack("{s:s, s:s, s:o, s:o, s:o}", "kind", "Table", "apiVersion", av,
                              "metadata", meta, "columnDefinitions", defs, "rows", rows);
    if (!table) {
        json_decref(own);
        return NULL;
    }
    if (rv)
        json_object_set_new(meta, "resourceVersion", json_string(rv));
    if (cont && cont[0])
        json_object_set_new(meta, "continue", json_string(cont));
    size_t i;
    json_t *c;
    if (headers) {
        json_array_foreach((json_t *)cols, i, c)
        {
            const char *fmt = json_string_value(json_object_get(c, "format"));
            const char *desc = json_string_value(json_object_get(c, "description"));
            json_array_append_new(
                defs, json_pack("{s:O, s:O, s:s, s:s, s:I}", "name", json_object_get(c, "name"),
                                "type", json_object_get(c, "type"), "format", fmt ? fmt : "",
                                "description", desc ? desc : "", "priority",
                                json_integer_value(json_object_get(c, "priority"))));
        }
    }
    time_t now = time(NULL);
    json_t *it;
    json_array_foreach((json_t *)items, i, it)
    {
        json_t *cells = json_array();
        size_t k;
        json_array_foreach((json_t *)cols, k, c)
        {
            json_array_append_new(cells, ks_table_cell(c, it, now));
        }
        json_t *row = json_pack("{s:o}", "cells", cells);
        if (!row)
            continue;
        if (include == KS_INCLUDE_OBJECT)
            json_object_set(row, "object", it);
        else if (include == KS_INCLUDE_METADATA)
            json_object_set_new(row, "object", ks_partial_metadata(it, ver));
        json_array_append_new(rows, row);
    }
    json_decref(own);
    return table;
}
