/* ks_crd_schema: structural-schema handling of custom objects as the API server does it:
 * pruning of undeclared fields and of non-nullable nulls, defaults, and validation of the common
 * OpenAPI constraints with the API server's messages (types, enum, pattern, date/date-time
 * formats, bounds, lengths, required, list-type set/map uniqueness ...). */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_crd.h"
#include "ks_sim.h"

#define MAX_DEPTH 256 /* deeper objects are left alone (jansson parses at most 2048 levels) */

static bool flag(const json_t *schema, const char *key)
{
    return json_is_true(json_object_get(schema, key));
}

/* ---- pruning ------------------------------------------------------------------------------ */

static void path_child(char *out, size_t size, const char *path, const char *key)
{
    snprintf(out, size, "%s%s%s", path, *path ? "." : "", key);
}

static size_t prune_node(const json_t *schema, json_t *val, const char *path, json_t *pruned,
                         bool root, int depth)
{
    size_t n = 0;
    char p[1024];
    if (!json_is_object(schema) || depth > MAX_DEPTH)
        return 0;
    if (json_is_array(val)) {
        const json_t *items = json_object_get(schema, "items");
        for (size_t i = 0; json_is_object(items) && i < json_array_size(val); i++) {
            snprintf(p, sizeof(p), "%s[%zu]", path, i);
            n += prune_node(items, json_array_get(val, i), p, pruned, false, depth + 1);
        }
        return n;
    }
    if (!json_is_object(val) || flag(schema, "x-kubernetes-int-or-string"))
        return 0;
    const json_t *props = json_object_get(schema, "properties");
    const json_t *ap = json_object_get(schema, "additionalProperties");
    bool preserve = flag(schema, "x-kubernetes-preserve-unknown-fields") || json_is_true(ap);
    bool embedded = flag(schema, "x-kubernetes-embedded-resource");
    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe(val, tmp, key, child)
    {
        if ((root || embedded) && (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0 ||
                                   strcmp(key, "metadata") == 0))
            continue;
        path_child(p, sizeof(p), path, key);
        const json_t *sub = json_object_get(props, key);
        if (sub)
            n += prune_node(sub, child, p, pruned, false, depth + 1);
        else if (json_is_object(ap))
            n += prune_node(ap, child, p, pruned, false, depth + 1);
        else if (!preserve) {
            if (json_is_array(pruned))
                json_array_append_new(pruned, json_string(p));
            json_object_del(val, key);
            n++;
        }
    }
    return n;
}

size_t ks_crd_prune(const json_t *schema, json_t *obj, json_t *pruned)
{
    return prune_node(schema, obj, "", pruned, true, 0);
}

/* ---- defaults ----------------------------------------------------------------------------- */

static void default_node(const json_t *schema, json_t *val, bool root, int depth)
{
    if (!json_is_object(schema) || depth > MAX_DEPTH)
        return;
    if (json_is_array(val)) {
        const json_t *items = json_object_get(schema, "items");
        for (size_t i = 0; i < json_array_size(val); i++)
            default_node(items, json_array_get(val, i), false, depth + 1);
        return;
    }
    if (!json_is_object(val))
        return;
    const json_t *props = json_object_get(schema, "properties");
    const char *key;
    json_t *sub;
    json_object_foreach((json_t *)props, key, sub)
    {
        if (root && strcmp(key, "metadata") == 0)
            continue;
        const json_t *dflt = json_object_get(sub, "default");
        json_t *cur = json_object_get(val, key);
        if (cur && json_is_null(cur) && !dflt && !flag(sub, "nullable")) {
            json_object_del(val, key); /* a non-nullable null without a default is pruned */
            continue;
        }
        if (dflt && (!cur || (json_is_null(cur) && !flag(sub, "nullable"))))
            json_object_set_new(val, key, json_deep_copy(dflt));
        default_node(sub, json_object_get(val, key), false, depth + 1);
    }
    const json_t *ap = json_object_get(schema, "additionalProperties");
    if (json_is_object(ap)) {
        const json_t *dflt = json_object_get(ap, "default");
        bool nullable = flag(ap, "nullable");
        json_t *child;
        void *tmp;
        json_object_foreach_safe(val, tmp, key, child)
        {
            if (json_object_get(props, key))
                continue;
            if (json_is_null(child) && !nullable) {
                if (dflt)
                    json_object_set_new(val, key, json_deep_copy(dflt));
                else
                    json_object_del(val, key);
                continue;
            }
            default_node(ap, child, false, depth + 1);
        }
    }
}

void ks_crd_default(const json_t *schema, json_t *obj)
{
    default_node(schema, obj, true, 0);
}

/* ---- patterns ----------------------------------------------------------------------------- */

/* Translates an OpenAPI (Go RE2) pattern into a POSIX ERE: \d \w \s and friends, (?:, lazy
 * quantifiers, {,n}. Returns NULL (the check is skipped) for what ERE cannot express (flags,
 * lookarounds, \b, back-references, \p{..}), for what RE2 rejects (a repetition of nothing or of
 * a repetition: "a**"), and for bounded repetitions large enough to make regcomp expensive (the
 * pattern's length times the product of its repetition bounds over 100000): such patterns are
 * not enforced. */
static char *translate_pattern(const char *pat)
{
    size_t n = strlen(pat);
    if (n > 1024)
        return NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    bool ok = true, in_bracket = false;
    bool can_repeat = false; /* the last thing written is an atom a quantifier may follow */
    double bound_product = 1;
    for (size_t i = 0; i < n && ok; i++) {
        char c = pat[i];
        if (in_bracket) {
            if (c == '\\') {
                char d = pat[++i];
                if (d == 'd' || d == 'w' || d == 's')
                    fputs(d == 'd' ? "0-9" : d == 'w' ? "A-Za-z0-9_" : "[:space:]", f);
                else if (!d || d == ']' || d == '-' || d == '^' || (d >= 'a' && d <= 'z') ||
                         (d >= 'A' && d <= 'Z') || (d >= '0' && d <= '9'))
                    ok = false;
                else
                    fputc(d, f);
            } else if (c == '[' && pat[i + 1] == ':') {
                /* a POSIX class inside a bracket expression: copy through its ":]" */
                const char *end = strstr(pat + i + 2, ":]");
                if (!end)
                    ok = false;
                else {
                    fwrite(pat + i, 1, (size_t)(end + 2 - (pat + i)), f);
                    i = (size_t)(end + 1 - pat);
                }
            } else {
                if (c == ']') {
                    in_bracket = false;
                    can_repeat = true;
                }
                fputc(c, f);
            }
            continue;
        }
        if (c == '\\') {
            char d = pat[++i];
            can_repeat = true;
            if (d == 'd' || d == 'w' || d == 's')
                fprintf(f, "[%s]", d == 'd' ? "0-9" : d == 'w' ? "A-Za-z0-9_" : "[:space:]");
            else if (d == 'D' || d == 'W' || d == 'S')
                fprintf(f, "[^%s]", d == 'D' ? "0-9" : d == 'W' ? "A-Za-z0-9_" : "[:space:]");
            else if (d == 't' || d == 'n' || d == 'r' || d == 'f' || d == 'v')
                fputc(d == 't'   ? '\t'
                      : d == 'n' ? '\n'
                      : d == 'r' ? '\r'
                      : d == 'f' ? '\f'
                                 : '\v',
                      f);
            else if (d == 'A' || d == 'z') {
                fputc(d == 'A' ? '^' : '$', f);
                can_repeat = false;
            } else if (!d || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') ||
                       (d >= '0' && d <= '9'))
                ok = false; /* \b \B \p \x \u, back-references ... */
            else
                fprintf(f, "\\%c", d);
            continue;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            long lo = 0, hi = 0;
            const char *q = pat + i + 1;
            char *end = (char *)q;
            if (c == '{') {
                if (*q != ',')
                    lo = strtol(q, &end, 10);
                if (end == q && *q != ',') { /* not a repetition: a literal brace */
                    fputs("\\{", f);
                    can_repeat = true;
                    continue;
                }
                hi = lo;
                if (*end == ',') {
                    const char *h = end + 1;
                    if (*h == '}')
                        end = (char *)h;
                    else
                        hi = strtol(h, &end, 10);
                }
                if (*end != '}' || lo < 0 || hi < lo) {
                    ok = false;
                    break;
                }
            }
            if (!can_repeat) {
                ok = false;
                break;
            }
            /* regcomp copies a repeated subexpression once per allowed repetition, nested
             * repetitions multiply: keep pattern length times the product of the bounds small. */
            bound_product *= c == '{' ? (double)(hi > 0 ? hi : 1) : c == '+' ? 2 : 1;
            if (bound_product * (double)n > 100000) {
                ok = false;
                break;
            }
            if (c == '{') {
                fprintf(f, "{%s", *q == ',' ? "0" : "");
                fwrite(q, 1, (size_t)(end + 1 - q), f);
                i = (size_t)(end - pat);
            } else {
                fputc(c, f);
            }
            if (pat[i + 1] == '?')
                i++; /* lazy: the same matches for a yes/no search */
            can_repeat = false;
            continue;
        }
        if (c == '[') {
            in_bracket = true;
            fputc(c, f);
            if (pat[i + 1] == '^')
                fputc(pat[++i], f);
            if (pat[i + 1] == ']')
                fputc(pat[++i], f); /* a leading ']' is literal */
            continue;
        }
        if (c == '(') {
            if (pat[i + 1] == '?') {
                if (pat[i + 2] != ':') {
                    ok = false;
                    break;
                }
                i += 2;
            }
            fputc('(', f);
            can_repeat = false;
            continue;
        }
        fputc(c, f);
        can_repeat = !(c == '|' || c == '^' || c == '$');
    }
    if (in_bracket)
        ok = false;
    fclose(f);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* 1 match, 0 no match, -1 unsupported pattern (not enforced). */
static int pattern_match(const char *pattern, const char *s)
{
    char *ere = translate_pattern(pattern);
    if (!ere)
        return -1;
    regex_t re;
    int rc = regcomp(&re, ere, REG_EXTENDED | REG_NOSUB);
    free(ere);
    if (rc != 0)
        return -1;
    rc = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    return rc == 0 ? 1 : 0;
}

/* ---- validation --------------------------------------------------------------------------- */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static bool type_ok(const char *want, const json_t *v)
{
    if (strcmp(want, "integer") == 0)
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
                fabs(json_real_value(v)) < 9.2e18);
    if (strcmp(want, "number") == 0)
        return json_is_number(v);
    return strcmp(want, json_type_name(v)) == 0;
}

/* The number's %v as Go prints it. */
static char *num_str(const json_t *n)
{
    return ks_go_value(n);
}

static double num(const json_t *v)
{
    return json_number_value(v);
}

/* The path as a schema message names it "in body". */
static const char *body_path(const ks_verr *v, const char *path)
{
    return v->body_skip <= strlen(path) ? path + v->body_skip : path;
}

static void type_error(ks_verr *v, const char *path, const char *want, const char *actual)
{
    char *q = ks_go_quote(actual);
    char detail[1400];
    snprintf(detail, sizeof(detail), "%s in body must be of type %s: %s", body_path(v, path), want,
             q ? q : "\"\"");
    ks_verr_type_invalid(v, path, q, detail);
    free(q);
}

static void invalid_detail(ks_verr *v, const char *path, const json_t *val, const char *fmt,
                           const char *arg)
{
    char *gov = ks_go_value(val);
    char detail[2200];
    snprintf(detail, sizeof(detail), fmt, body_path(v, path), arg);
    ks_verr_invalid(v, path, gov, detail);
    free(gov);
}

static size_t utf8_len(const char *s, size_t bytes)
{
    size_t n = 0;
    for (size_t i = 0; i < bytes; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

static void check_enum(ks_verr *v, const json_t *schema, const json_t *val, const char *path)
{
    const json_t *en = json_object_get(schema, "enum");
    if (!json_is_array(en))
        return;
    for (size_t i = 0; i < json_array_size(en); i++)
        if (json_equal(json_array_get(en, i), (json_t *)val))
            return;
    size_t n = json_array_size(en);
    char **texts = calloc(n + 1, sizeof(*texts));
    if (!texts) {
        v->nomem = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(en, i);
        texts[i] = json_is_string(e) ? strdup(json_string_value(e))
                                     : json_dumps(e, JSON_ENCODE_ANY | JSON_COMPACT);
    }
    char *gov = ks_go_value(val);
    ks_verr_unsupported(v, path, gov, (const char *const *)texts);
    free(gov);
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
}

static void check_number(ks_verr *v, const json_t *schema, const json_t *val, const char *path)
{
    /* multipleOf, minimum, maximum: the order the API server's validator reports them in */
    const json_t *mx = json_object_get(schema, "maximum");
    const json_t *mn = json_object_get(schema, "minimum");
    const json_t *mult = json_object_get(schema, "multipleOf");
    if (json_is_number(mult) && num(mult) > 0) {
        double q = num(val) / num(mult);
        if (fabs(q - round(q)) > 1e-9) {
            char *m = num_str(mult);
            invalid_detail(v, path, val, "%s in body should be a multiple of %s", m ? m : "");
            free(m);
        }
    }
    if (json_is_number(mn)) {
        bool excl = flag(schema, "exclusiveMinimum");
        if (excl ? num(val) <= num(mn) : num(val) < num(mn)) {
            char *lim = num_str(mn);
            invalid_detail(v, path, val,
                           excl ? "%s in body should be greater than %s"
                                : "%s in body should be greater than or equal to %s",
                           lim ? lim : "");
            free(lim);
        }
    }
    if (json_is_number(mx)) {
        bool excl = flag(schema, "exclusiveMaximum");
        if (excl ? num(val) >= num(mx) : num(val) > num(mx)) {
            char *lim = num_str(mx);
            invalid_detail(v, path, val,
                           excl ? "%s in body should be less than %s"
                                : "%s in body should be less than or equal to %s",
                           lim ? lim : "");
            free(lim);
        }
    }
}

/* Go's time.Parse("2006-01-02", s) succeeds: four-digit year, two-digit month and day, the day
 * within the month. */
static bool is_date(const char *s, size_t n)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
            return false;
    int y = atoi(s), m = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    if (m < 1 || m > 12 || d < 1)
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d <= days[m - 1] + (m == 2 && leap);
}

/* The OpenAPI date-time check the API server uses: lower-cased and split at 't', the first part
 * is a date, the second matches HH:MM:SS, an optional fraction (any character then digits) and
 * 'z' or a +hh:mm offset, with hours <= 23 and minutes and seconds <= 59. */
static bool is_date_time(const char *s)
{
    size_t n = strlen(s);
    if (n < 4 || n > 256)
        return false;
    char low[257];
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    char *t = strchr(low, 't');
    if (!t || !is_date(low, (size_t)(t - low)))
        return false;
    char *hms = t + 1, *end = strchr(hms, 't');
    if (end)
        *end = '\0';
    if (strchr(hms, '\n'))
        return false; /* '.' does not match a newline and the anchors are the text's ends */
    regex_t re;
    if (regcomp(&re, "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$",
                REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    bool ok = regexec(&re, hms, 0, NULL, 0) == 0;
    regfree(&re);
    return ok && strncmp(hms, "23", 2) <= 0 && strncmp(hms + 3, "59", 2) <= 0 &&
           strncmp(hms + 6, "59", 2) <= 0;
}

/* The string formats kubesim checks, by their normalised name (the API server ignores dashes and
 * underscores in format names): 1 valid, 0 invalid, -1 not checked. */
static int format_ok(const char *format, const char *s, size_t len)
{
    char name[32];
    size_t k = 0;
    for (const char *p = format; *p && k + 1 < sizeof(name); p++)
        if (*p != '-' && *p != '_')
            name[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    name[k] = '\0';
    if (strlen(s) != len)
        return -1; /* embedded NUL: left to the API server */
    if (strcmp(name, "date") == 0)
        return is_date(s, len);
    if (strcmp(name, "datetime") == 0)
        return is_date_time(s);
    return -1;
}

static void check_string(ks_verr *v, const json_t *schema, const json_t *val, const char *path)
{
    const char *s = json_string_value(val);
    size_t len = utf8_len(s, json_string_length(val));
    const json_t *mx = json_object_get(schema, "maxLength");
    const json_t *mn = json_object_get(schema, "minLength");
    if (json_is_integer(mx) && (json_int_t)len > json_integer_value(mx))
        ks_verr_too_long(v, path, json_integer_value(mx));
    if (json_is_integer(mn) && (json_int_t)len < json_integer_value(mn)) {
        char arg[32];
        snprintf(arg, sizeof(arg), "%lld", (long long)json_integer_value(mn));
        invalid_detail(v, path, val, "%s in body should be at least %s chars long", arg);
    }
    const char *pat = json_string_value(json_object_get(schema, "pattern"));
    if (pat && strlen(s) == json_string_length(val) && pattern_match(pat, s) == 0)
        invalid_detail(v, path, val, "%s in body should match '%s'", pat);
    const char *format = json_string_value(json_object_get(schema, "format"));
    if (format && format_ok(format, s, json_string_length(val)) == 0) {
        char *q = ks_go_quote(s);
        char detail[1400];
        snprintf(detail, sizeof(detail), "%s in body must be of type %s: %s", body_path(v, path),
                 format, q ? q : "\"\"");
        ks_verr_type_invalid(v, path, q, detail);
        free(q);
    }
}

static void check_node(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                       bool root, int depth);

static void check_array(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                        int depth)
{
    size_t n = json_array_size(val);
    const json_t *mx = json_object_get(schema, "maxItems");
    const json_t *mn = json_object_get(schema, "minItems");
    if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
        ks_verr_too_many(v, path, (long long)n, json_integer_value(mx));
    if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn)) {
        json_t *count = json_integer((json_int_t)n);
        char arg[32];
        snprintf(arg, sizeof(arg), "%lld", (long long)json_integer_value(mn));
        invalid_detail(v, path, count, "%s in body should have at least %s items", arg);
        json_decref(count);
    }
    const json_t *items = json_object_get(schema, "items");
    char p[1024];
    for (size_t i = 0; json_is_object(items) && i < n; i++) {
        snprintf(p, sizeof(p), "%s[%zu]", path, i);
        check_node(v, items, json_array_get(val, i), p, false, depth + 1);
    }
}

static void check_object(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                         bool root, int depth)
{
    char p[1024];
    const json_t *req = json_object_get(schema, "required");
    for (size_t i = 0; i < json_array_size(req); i++) {
        const char *k = json_string_value(json_array_get(req, i));
        if (k && !json_object_get(val, k) && !(root && strcmp(k, "metadata") == 0)) {
            path_child(p, sizeof(p), path, k);
            ks_verr_required(v, p, "");
        }
    }
    size_t n = json_object_size(val);
    const json_t *mx = json_object_get(schema, "maxProperties");
    const json_t *mn = json_object_get(schema, "minProperties");
    if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
        ks_verr_too_many(v, path, (long long)n, json_integer_value(mx));
    if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn)) {
        json_t *count = json_integer((json_int_t)n);
        char arg[32];
        snprintf(arg, sizeof(arg), "%lld", (long long)json_integer_value(mn));
        invalid_detail(v, path, count, "%s in body should have at least %s properties", arg);
        json_decref(count);
    }
    const json_t *props = json_object_get(schema, "properties");
    const json_t *ap = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *child;
    json_object_foreach((json_t *)val, key, child)
    {
        if (root && (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0 ||
                     strcmp(key, "metadata") == 0))
            continue;
        path_child(p, sizeof(p), path, key);
        const json_t *sub = json_object_get(props, key);
        if (sub)
            check_node(v, sub, child, p, false, depth + 1);
        else if (json_is_object(ap))
            check_node(v, ap, child, p, false, depth + 1);
    }
}

static void check_node(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                       bool root, int depth)
{
    if (!json_is_object(schema) || !val || depth > MAX_DEPTH)
        return;
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (type && !*type)
        type = NULL;
    if (json_is_null(val)) {
        if (!flag(schema, "nullable") && type)
            type_error(v, path, type, "null");
        return;
    }
    if (flag(schema, "x-kubernetes-int-or-string")) {
        if (!type_ok("integer", val) && !json_is_string(val)) {
            type_error(v, path, "integer,string", json_type_name(val));
            return;
        }
    } else if (type && !type_ok(type, val)) {
        type_error(v, path, type, json_type_name(val));
        return;
    }
    /* The API server's validator order: string/format, number, array checks, then enum, then the
     * object's required and properties. */
    if (json_is_number(val))
        check_number(v, schema, val, path);
    else if (json_is_string(val))
        check_string(v, schema, val, path);
    else if (json_is_array(val))
        check_array(v, schema, val, path, depth);
    check_enum(v, schema, val, path);
    if (json_is_object(val))
        check_object(v, schema, val, path, root, depth);
}

/* ---- x-kubernetes-list-type -------------------------------------------------------------- */

/* Go's equality of two decoded JSON values as the list-type check compares them; NULL stands for
 * an unspecified map key, which equals only itself. */
static bool same(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return a == b;
    return json_equal((json_t *)a, (json_t *)b);
}

/* Reports elements that repeat an earlier one, at the first repetition only, as Duplicate value
 * errors rendering shown[i] (the element, or its key fields). */
static void report_duplicates(ks_verr *v, const char *path, const json_t *const *keys,
                              const json_t *const *shown, size_t n)
{
    char p[1024];
    for (size_t i = 1; i < n; i++) {
        size_t seen = 0;
        for (size_t j = 0; j < i; j++)
            seen += same(keys[i], keys[j]);
        if (seen != 1)
            continue;
        snprintf(p, sizeof(p), "%s[%zu]", path, i);
        char *gov = ks_go_value(shown[i]);
        if (!gov) {
            v->nomem = true;
            return;
        }
        ks_verr_duplicate(v, p, gov);
        free(gov);
    }
}

/* The key of a list-type map element: for one key field the field's value (NULL when absent or
 * the element is null), shown as {field: value}; for several, the object of the fields present.
 * New reference in *shown (and in *key for several fields). */
static json_t *map_key(const json_t *item, const json_t *fields, const json_t **key)
{
    json_t *shown = json_object();
    *key = NULL;
    if (!shown)
        return NULL;
    size_t nf = json_array_size(fields);
    for (size_t f = 0; f < nf; f++) {
        const char *name = json_string_value(json_array_get(fields, f));
        json_t *kv = name && json_is_object(item) ? json_object_get(item, name) : NULL;
        if (kv)
            json_object_set(shown, name, kv);
        if (nf == 1)
            *key = kv;
    }
    if (nf != 1)
        *key = shown;
    return shown;
}

static void list_node(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                      int depth);

static void list_array(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                       int depth)
{
    char p[1024];
    size_t n = json_array_size(val);
    const char *type = json_string_value(json_object_get(schema, "x-kubernetes-list-type"));
    bool set = type && strcmp(type, "set") == 0, map = type && strcmp(type, "map") == 0;
    if (map) {
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_array_get(val, i);
            if (!json_is_object(x) && !json_is_null(x)) {
                char *gov = ks_go_value(x);
                snprintf(p, sizeof(p), "%s[%zu]", path, i);
                ks_verr_invalid(v, p, gov, "must be an object for an array of list-type map");
                free(gov);
                map = false;
                break;
            }
        }
    }
    if ((set || map) && n > 1) {
        const json_t **keys = calloc(n, sizeof(*keys));
        json_t **shown = calloc(n, sizeof(*shown));
        const json_t *fields = json_object_get(schema, "x-kubernetes-list-map-keys");
        bool ok = keys && shown;
        for (size_t i = 0; ok && i < n; i++) {
            if (set) {
                keys[i] = json_array_get(val, i);
                shown[i] = json_incref(json_array_get(val, i));
            } else {
                shown[i] = map_key(json_array_get(val, i), fields, &keys[i]);
                ok = shown[i] != NULL;
            }
        }
        if (ok)
            report_duplicates(v, path, keys, (const json_t *const *)shown, n);
        else
            v->nomem = true;
        for (size_t i = 0; shown && i < n; i++)
            json_decref(shown[i]);
        free(shown);
        free(keys);
    }
    const json_t *items = json_object_get(schema, "items");
    for (size_t i = 0; json_is_object(items) && i < n; i++) {
        snprintf(p, sizeof(p), "%s[%zu]", path, i);
        list_node(v, items, json_array_get(val, i), p, depth + 1);
    }
}

static void list_node(ks_verr *v, const json_t *schema, const json_t *val, const char *path,
                      int depth)
{
    char p[1024];
    if (!json_is_object(schema) || depth > MAX_DEPTH)
        return;
    if (json_is_array(val)) {
        list_array(v, schema, val, path, depth);
        return;
    }
    if (!json_is_object(val))
        return;
    const json_t *props = json_object_get(schema, "properties");
    const json_t *ap = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *child;
    json_object_foreach((json_t *)val, key, child)
    {
        const json_t *sub = json_object_get(props, key);
        if (!sub && json_is_object(ap))
            sub = ap;
        if (!sub)
            continue;
        path_child(p, sizeof(p), path, key);
        list_node(v, sub, child, p, depth + 1);
    }
}

void ks_crd_schema_check(ks_verr *v, const json_t *schema, const json_t *obj)
{
    check_node(v, schema, obj, "", true, 0);
    list_node(v, schema, obj, "", 0);
}

void ks_crd_schema_check_status(ks_verr *v, const json_t *schema, const json_t *obj)
{
    const json_t *sub = json_object_get(json_object_get(schema, "properties"), "status");
    const json_t *st = json_object_get(obj, "status");
    if (!sub || !st)
        return;
    size_t skip = v->body_skip;
    v->body_skip = strlen("status.");
    check_node(v, sub, st, "status", false, 1);
    list_node(v, sub, st, "status", 1);
    v->body_skip = skip;
}

kc_code ks_crd_validate(const json_t *schema, const json_t *obj, kc_err *err)
{
    ks_verr v = {0};
    if (!json_is_object(obj))
        return kc_err_set(err, KC_EARG, "ks_crd_validate: the object must be a JSON object");
    if (schema)
        ks_crd_schema_check(&v, schema, obj);
    /* The group is the apiVersion's part before the '/'. */
    const char *api = ks_str(obj, "apiVersion");
    const char *slash = strchr(api, '/');
    char group[256] = "";
    if (slash)
        snprintf(group, sizeof(group), "%.*s", (int)(slash - api), api);
    return ks_verr_finish(&v, group, ks_str(obj, "kind"),
                          ks_str(json_object_get(obj, "metadata"), "name"), err);
}
