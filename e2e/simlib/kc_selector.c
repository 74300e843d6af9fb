/* kc_selector: Kubernetes label selectors (string and JSON forms), their matching and printing. */
#include "kc_selector.h"
#include "kc_selector_int.h"
#include "kc_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- key and value validation ------------------------------------------------------------- */

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static void set_why(char *why, size_t size, const char *msg)
{
    if (why && size)
        snprintf(why, size, "%s", msg);
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? of at most 63 characters; empty allowed when
 * allow_empty. Shared by the name part of keys and by values. */
static bool name_valid(const char *s, size_t n, bool allow_empty, const char *what, char *why,
                       size_t why_size)
{
    char buf[160];
    if (n == 0) {
        if (allow_empty)
            return true;
        snprintf(buf, sizeof(buf), "%s must not be empty", what);
        set_why(why, why_size, buf);
        return false;
    }
    if (n > 63) {
        snprintf(buf, sizeof(buf), "%s must be no more than 63 characters", what);
        set_why(why, why_size, buf);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!is_alnum(c) && c != '-' && c != '_' && c != '.') {
            snprintf(buf, sizeof(buf),
                     "%s may only contain alphanumerics, '-', '_' and '.' (found '%c')", what, c);
            if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
                snprintf(buf, sizeof(buf),
                         "%s may only contain alphanumerics, '-', '_' and '.' (found byte 0x%02x)",
                         what, (unsigned char)c);
            set_why(why, why_size, buf);
            return false;
        }
    }
    if (!is_alnum(s[0]) || !is_alnum(s[n - 1])) {
        snprintf(buf, sizeof(buf), "%s must start and end with an alphanumeric character", what);
        set_why(why, why_size, buf);
        return false;
    }
    return true;
}

/* A DNS-1123 subdomain: dot-separated labels of [a-z0-9-], each starting and ending with [a-z0-9],
 * at most 253 characters in all. */
static bool prefix_valid(const char *s, size_t n, char *why, size_t why_size)
{
    if (n == 0) {
        set_why(why, why_size, "prefix part must not be empty");
        return false;
    }
    if (n > 253) {
        set_why(why, why_size, "prefix part must be no more than 253 characters");
        return false;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            char c = s[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
                set_why(why, why_size,
                        "prefix part must be a lowercase DNS subdomain ([a-z0-9-.])");
                return false;
            }
            continue;
        }
        if (i == start || s[start] == '-' || s[i - 1] == '-') {
            set_why(why, why_size,
                    "prefix part must be a DNS subdomain whose dot-separated labels start and end "
                    "with an alphanumeric character");
            return false;
        }
        start = i + 1;
    }
    return true;
}

bool kc_label_key_valid(const char *key, char *why, size_t why_size)
{
    if (!key) {
        set_why(why, why_size, "key must not be empty");
        return false;
    }
    const char *slash = strchr(key, '/');
    if (!slash)
        return name_valid(key, strlen(key), false, "name part", why, why_size);
    if (strchr(slash + 1, '/')) {
        set_why(why, why_size, "key must be [prefix/]name with at most one '/'");
        return false;
    }
    if (!prefix_valid(key, (size_t)(slash - key), why, why_size))
        return false;
    return name_valid(slash + 1, strlen(slash + 1), false, "name part", why, why_size);
}

bool kc_label_value_valid(const char *value, char *why, size_t why_size)
{
    if (!value)
        return true;
    return name_valid(value, strlen(value), true, "value", why, why_size);
}

/* ---- selector storage --------------------------------------------------------------------- */

struct kc_label_selector {
    kc_label_requirement *reqs;
    size_t n, cap;
};

static void req_clear(kc_label_requirement *r)
{
    free(r->key);
    for (size_t i = 0; i < r->nvalues; i++)
        free(r->values[i]);
    free(r->values);
    memset(r, 0, sizeof(*r));
}

void kc_label_selector_free(kc_label_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++)
        req_clear(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts and de-duplicates r->values so sets compare and print canonically. */
static void req_normalize(kc_label_requirement *r)
{
    if (r->nvalues < 2)
        return;
    qsort(r->values, r->nvalues, sizeof(char *), cmp_str);
    size_t w = 1;
    for (size_t i = 1; i < r->nvalues; i++) {
        if (strcmp(r->values[i], r->values[w - 1]) == 0)
            free(r->values[i]);
        else
            r->values[w++] = r->values[i];
    }
    r->nvalues = w;
}

static int cmp_req(const void *a, const void *b)
{
    const kc_label_requirement *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (x->op != y->op)
        return (int)x->op - (int)y->op;
    for (size_t i = 0; i < x->nvalues && i < y->nvalues; i++) {
        c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return (x->nvalues > y->nvalues) - (x->nvalues < y->nvalues);
}

/* Appends a requirement taking ownership of the strings in r (freed on failure too). */
static kc_code sel_add(kc_label_selector *sel, kc_label_requirement *r, kc_err *err)
{
    if (sel->n == sel->cap) {
        size_t cap = sel->cap ? sel->cap * 2 : 4;
        kc_label_requirement *p = realloc(sel->reqs, cap * sizeof(*p));
        if (!p) {
            req_clear(r);
            return kc_err_set(err, KC_ENOMEM, "label selector: out of memory");
        }
        sel->reqs = p;
        sel->cap = cap;
    }
    req_normalize(r);
    sel->reqs[sel->n++] = *r;
    memset(r, 0, sizeof(*r));
    return KC_OK;
}

/* Adds a copy of value (n bytes) to r's values. */
static bool req_push_value(kc_label_requirement *r, const char *value, size_t n)
{
    char *v = strndup(value, n);
    if (!v)
        return false;
    char **p = realloc(r->values, (r->nvalues + 1) * sizeof(char *));
    if (!p) {
        free(v);
        return false;
    }
    r->values = p;
    r->values[r->nvalues++] = v;
    return true;
}

static void sel_finish(kc_label_selector *sel)
{
    if (sel->n > 1)
        qsort(sel->reqs, sel->n, sizeof(*sel->reqs), cmp_req);
}

/* ---- string form: lexer ------------------------------------------------------------------- */

typedef enum tok_kind {
    T_EOF,
    T_IDENT,
    T_EQ,  /* = */
    T_DEQ, /* == */
    T_NEQ, /* != */
    T_NOT, /* ! */
    T_LPAREN,
    T_RPAREN,
    T_COMMA,
    T_GT,
    T_LT,
} tok_kind;

typedef struct token {
    tok_kind kind;
    size_t pos; /* 0-based offset into the selector */
    size_t len;
} token;

typedef struct lexer {
    const char *s;
    size_t i;
    kc_err *err;
} lexer;

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_special(char c)
{
    return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '<' || c == '>';
}

static token lex_next(lexer *lx)
{
    const char *s = lx->s;
    while (s[lx->i] && is_space(s[lx->i]))
        lx->i++;
    token t = {.kind = T_EOF, .pos = lx->i, .len = 0};
    char c = s[lx->i];
    if (!c)
        return t;
    t.len = 1;
    switch (c) {
    case '=':
        t.kind = T_EQ;
        if (s[lx->i + 1] == '=') {
            t.kind = T_DEQ;
            t.len = 2;
        }
        break;
    case '!':
        t.kind = T_NOT;
        if (s[lx->i + 1] == '=') {
            t.kind = T_NEQ;
            t.len = 2;
        }
        break;
    case '(':
        t.kind = T_LPAREN;
        break;
    case ')':
        t.kind = T_RPAREN;
        break;
    case ',':
        t.kind = T_COMMA;
        break;
    case '<':
        t.kind = T_LT;
        break;
    case '>':
        t.kind = T_GT;
        break;
    default:
        t.kind = T_IDENT;
        while (s[lx->i + t.len] && !is_space(s[lx->i + t.len]) && !is_special(s[lx->i + t.len]))
            t.len++;
        break;
    }
    lx->i += t.len;
    return t;
}

static token lex_peek(lexer *lx)
{
    size_t save = lx->i;
    token t = lex_next(lx);
    lx->i = save;
    return t;
}

static bool tok_is(const lexer *lx, token t, const char *word)
{
    return t.kind == T_IDENT && t.len == strlen(word) && memcmp(lx->s + t.pos, word, t.len) == 0;
}

__attribute__((format(printf, 3, 4))) static kc_code lex_error(lexer *lx, token t, const char *fmt,
                                                               ...)
{
    char what[256], q[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    kc_sel_quote(q, sizeof(q), "label selector", lx->s);
    return kc_err_set(lx->err, KC_EPARSE, "%s: %s at position %zu", q, what, t.pos + 1);
}

/* "expected X" with what was found instead, unless the selector simply ended. */
static kc_code lex_expected(lexer *lx, token t, const char *expected)
{
    if (t.kind == T_EOF)
        return lex_error(lx, t, "expected %s", expected);
    return lex_error(lx, t, "expected %s, found \"%.*s\"", expected, (int)(t.len > 40 ? 40 : t.len),
                     lx->s + t.pos);
}

/* ---- string form: parser ------------------------------------------------------------------ */

static kc_code check_value(lexer *lx, token t, const char *key, const char *v, size_t n)
{
    char why[160], val[80];
    snprintf(val, sizeof(val), "%.*s", (int)n, v);
    if (name_valid(v, n, true, "value", why, sizeof(why)))
        return KC_OK;
    return lex_error(lx, t, "invalid value \"%s\" for key \"%s\": %s", val, key, why);
}

/* Reads the "(a, b, ...)" of in/notin; elements may be empty ("(a,)"), and "()" is the set
 * holding only the empty value, as in Kubernetes' own parser. */
static kc_code parse_set(lexer *lx, kc_label_requirement *r)
{
    token t = lex_next(lx);
    if (t.kind != T_LPAREN)
        return lex_expected(lx, t, "'(' after 'in' or 'notin'");
    for (;;) {
        t = lex_peek(lx);
        const char *v = "";
        size_t n = 0;
        if (t.kind == T_IDENT) {
            lex_next(lx);
            v = lx->s + t.pos;
            n = t.len;
        } else if (t.kind != T_COMMA && t.kind != T_RPAREN) {
            return lex_expected(lx, t, "a value, ',' or ')'");
        }
        kc_code rc = check_value(lx, t, r->key, v, n);
        if (rc)
            return rc;
        if (!req_push_value(r, v, n))
            return kc_err_set(lx->err, KC_ENOMEM, "label selector: out of memory");
        t = lex_next(lx);
        if (t.kind == T_RPAREN)
            return KC_OK;
        if (t.kind != T_COMMA)
            return lex_expected(lx, t, "',' or ')'");
    }
}

/* One requirement; on success r holds it (r is cleared by the caller either way). */
static kc_code parse_requirement(lexer *lx, kc_label_requirement *r)
{
    token t = lex_next(lx);
    bool negated = false;
    if (t.kind == T_NOT) {
        negated = true;
        t = lex_next(lx);
    }
    if (t.kind != T_IDENT)
        return lex_expected(lx, t, negated ? "a label key after '!'" : "a label key");
    r->key = strndup(lx->s + t.pos, t.len);
    if (!r->key)
        return kc_err_set(lx->err, KC_ENOMEM, "label selector: out of memory");
    char why[160];
    if (!kc_label_key_valid(r->key, why, sizeof(why)))
        return lex_error(lx, t, "invalid key \"%.80s\": %s", r->key, why);

    t = lex_peek(lx);
    if (t.kind == T_EOF || t.kind == T_COMMA) {
        r->op = negated ? KC_LABEL_NOTEXISTS : KC_LABEL_EXISTS;
        return KC_OK;
    }
    if (negated)
        return lex_expected(lx, t, "',' or end of selector after a '!key' requirement");
    lex_next(lx);
    switch (t.kind) {
    case T_EQ:
    case T_DEQ:
    case T_NEQ: {
        r->op = t.kind == T_NEQ ? KC_LABEL_NEQ : KC_LABEL_EQ;
        token v = lex_peek(lx);
        const char *val = "";
        size_t n = 0;
        if (v.kind == T_IDENT) {
            lex_next(lx);
            val = lx->s + v.pos;
            n = v.len;
        } else if (v.kind != T_EOF && v.kind != T_COMMA) {
            return lex_expected(lx, v, "a value");
        }
        kc_code rc = check_value(lx, v, r->key, val, n);
        if (rc)
            return rc;
        if (!req_push_value(r, val, n))
            return kc_err_set(lx->err, KC_ENOMEM, "label selector: out of memory");
        return KC_OK;
    }
    case T_GT:
    case T_LT:
        return lex_error(lx, t, "operator '%c' is not supported in label selectors", lx->s[t.pos]);
    default:
        break;
    }
    if (tok_is(lx, t, "in") || tok_is(lx, t, "notin")) {
        r->op = tok_is(lx, t, "in") ? KC_LABEL_IN : KC_LABEL_NOTIN;
        return parse_set(lx, r);
    }
    return lex_expected(lx, t, "'=', '==', '!=', 'in', 'notin', ',' or end of selector");
}

kc_code kc_label_selector_parse(const char *s, kc_label_selector **out, kc_err *err)
{
    if (!s || !out)
        return kc_err_set(err, KC_EARG, "kc_label_selector_parse: NULL argument");
    *out = NULL;
    kc_label_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        return kc_err_set(err, KC_ENOMEM, "label selector: out of memory");
    lexer lx = {.s = s, .i = 0, .err = err};
    kc_code rc = KC_OK;
    kc_label_requirement r = {0};
    if (lex_peek(&lx).kind == T_EOF)
        goto done;
    for (;;) {
        rc = parse_requirement(&lx, &r);
        if (rc)
            goto fail_req;
        rc = sel_add(sel, &r, err);
        if (rc)
            goto fail_sel;
        token t = lex_next(&lx);
        if (t.kind == T_EOF)
            break;
        if (t.kind != T_COMMA) {
            rc = lex_expected(&lx, t, "',' or end of selector");
            goto fail_sel;
        }
    }
done:
    sel_finish(sel);
    *out = sel;
    return KC_OK;
fail_req:
    req_clear(&r);
fail_sel:
    kc_label_selector_free(sel);
    return rc;
}

/* ---- JSON form ---------------------------------------------------------------------------- */

static kc_code from_match_labels(kc_label_selector *sel, const json_t *ml, kc_err *err)
{
    if (!ml || json_is_null(ml))
        return KC_OK;
    if (!json_is_object(ml))
        return kc_err_set(err, KC_EPARSE, "label selector: matchLabels: expected an object, got %s",
                          kc_json_kind(ml, false));
    const char *k;
    json_t *v;
    char why[160];
    json_object_foreach((json_t *)ml, k, v)
    {
        if (!kc_label_key_valid(k, why, sizeof(why)))
            return kc_err_set(err, KC_EPARSE,
                              "label selector: matchLabels: invalid key \"%.80s\": %s", k, why);
        if (!json_is_string(v))
            return kc_err_set(err, KC_EPARSE,
                              "label selector: matchLabels.%.80s: expected a string, got %s", k,
                              kc_json_kind(v, false));
        const char *s = json_string_value(v);
        if (!kc_label_value_valid(s, why, sizeof(why)))
            return kc_err_set(err, KC_EPARSE,
                              "label selector: matchLabels.%.80s: invalid value \"%.80s\": %s", k,
                              s, why);
        kc_label_requirement r = {.op = KC_LABEL_EQ};
        r.key = strdup(k);
        if (!r.key || !req_push_value(&r, s, strlen(s))) {
            req_clear(&r);
            return kc_err_set(err, KC_ENOMEM, "label selector: out of memory");
        }
        kc_code rc = sel_add(sel, &r, err);
        if (rc)
            return rc;
    }
    return KC_OK;
}

static kc_code from_expression(kc_label_selector *sel, size_t idx, const json_t *e, kc_err *err)
{
    static const struct {
        const char *name;
        kc_label_op op;
    } ops[] = {{"In", KC_LABEL_IN},
               {"NotIn", KC_LABEL_NOTIN},
               {"Exists", KC_LABEL_EXISTS},
               {"DoesNotExist", KC_LABEL_NOTEXISTS}};
    char why[160];
    kc_label_requirement r = {0};
    kc_code rc = KC_EPARSE;
    if (!json_is_object(e)) {
        kc_err_set(err, rc, "label selector: matchExpressions[%zu]: expected an object, got %s",
                   idx, kc_json_kind(e, false));
        goto fail;
    }
    const json_t *key = json_object_get(e, "key"), *op = json_object_get(e, "operator");
    const json_t *vals = json_object_get(e, "values");
    if (!json_is_string(key) || !kc_label_key_valid(json_string_value(key), why, sizeof(why))) {
        if (!json_is_string(key))
            snprintf(why, sizeof(why), "expected a string, got %s",
                     key ? kc_json_kind(key, false) : "none");
        kc_err_set(err, rc, "label selector: matchExpressions[%zu].key: %s", idx, why);
        goto fail;
    }
    const char *k = json_string_value(key);
    size_t i = 0;
    for (; json_is_string(op) && i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(json_string_value(op), ops[i].name) == 0)
            break;
    if (!json_is_string(op) || i == sizeof(ops) / sizeof(ops[0])) {
        char got[80];
        if (json_is_string(op))
            snprintf(got, sizeof(got), "\"%.40s\"", json_string_value(op));
        else
            snprintf(got, sizeof(got), "%s", op ? kc_json_kind(op, false) : "a missing operator");
        kc_err_set(err, rc,
                   "label selector: matchExpressions[%zu].operator: %s is not one of In, NotIn, "
                   "Exists, DoesNotExist",
                   idx, got);
        goto fail;
    }
    r.op = ops[i].op;
    if (vals && !json_is_null(vals) && !json_is_array(vals)) {
        kc_err_set(err, rc,
                   "label selector: matchExpressions[%zu].values: expected an array, got %s", idx,
                   kc_json_kind(vals, false));
        goto fail;
    }
    size_t nv = json_is_array(vals) ? json_array_size(vals) : 0;
    bool is_set = r.op == KC_LABEL_IN || r.op == KC_LABEL_NOTIN;
    if (is_set && nv == 0) {
        kc_err_set(
            err, rc,
            "label selector: matchExpressions[%zu] (key \"%.80s\"): values must be non-empty "
            "for %s",
            idx, k, ops[i].name);
        goto fail;
    }
    if (!is_set && nv > 0) {
        kc_err_set(
            err, rc,
            "label selector: matchExpressions[%zu] (key \"%.80s\"): values must be empty for "
            "%s",
            idx, k, ops[i].name);
        goto fail;
    }
    r.key = strdup(k);
    if (!r.key)
        goto oom;
    for (size_t j = 0; j < nv; j++) {
        const json_t *v = json_array_get(vals, j);
        if (!json_is_string(v) || !kc_label_value_valid(json_string_value(v), why, sizeof(why))) {
            if (!json_is_string(v))
                snprintf(why, sizeof(why), "expected a string, got %s", kc_json_kind(v, false));
            kc_err_set(err, rc, "label selector: matchExpressions[%zu].values[%zu]: %s", idx, j,
                       why);
            goto fail;
        }
        if (!req_push_value(&r, json_string_value(v), strlen(json_string_value(v))))
            goto oom;
    }
    return sel_add(sel, &r, err);
oom:
    rc = kc_err_set(err, KC_ENOMEM, "label selector: out of memory");
fail:
    req_clear(&r);
    return rc;
}

kc_code kc_label_selector_from_json(const json_t *js, kc_label_selector **out, kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_label_selector_from_json: NULL out");
    *out = NULL;
    kc_code rc = KC_OK;
    kc_label_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        return kc_err_set(err, KC_ENOMEM, "label selector: out of memory");
    if (!js || json_is_null(js))
        goto done;
    if (!json_is_object(js)) {
        rc = kc_err_set(err, KC_EPARSE, "label selector: expected an object, got %s",
                        kc_json_kind(js, false));
        goto fail;
    }
    rc = from_match_labels(sel, json_object_get(js, "matchLabels"), err);
    if (rc)
        goto fail;
    const json_t *me = json_object_get(js, "matchExpressions");
    if (me && !json_is_null(me) && !json_is_array(me)) {
        rc = kc_err_set(err, KC_EPARSE,
                        "label selector: matchExpressions: expected an array, got %s",
                        kc_json_kind(me, false));
        goto fail;
    }
    for (size_t i = 0; json_is_array(me) && i < json_array_size(me); i++) {
        rc = from_expression(sel, i, json_array_get(me, i), err);
        if (rc)
            goto fail;
    }
done:
    sel_finish(sel);
    *out = sel;
    return KC_OK;
fail:
    kc_label_selector_free(sel);
    return rc;
}

/* ---- matching and printing ---------------------------------------------------------------- */

static bool in_values(const kc_label_requirement *r, const char *v)
{
    return bsearch(&v, r->values, r->nvalues, sizeof(char *), cmp_str) != NULL;
}

static bool req_matches(const kc_label_requirement *r, const json_t *labels)
{
    const json_t *v = json_is_object(labels) ? json_object_get(labels, r->key) : NULL;
    if (json_is_null(v))
        v = NULL;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    switch (r->op) {
    case KC_LABEL_EQ:
        return s && strcmp(s, r->values[0]) == 0;
    case KC_LABEL_NEQ:
        return !s || strcmp(s, r->values[0]) != 0;
    case KC_LABEL_IN:
        return s && in_values(r, s);
    case KC_LABEL_NOTIN:
        return !s || !in_values(r, s);
    case KC_LABEL_EXISTS:
        return v != NULL;
    case KC_LABEL_NOTEXISTS:
        return v == NULL;
    }
    return false;
}

bool kc_label_selector_matches(const kc_label_selector *sel, const json_t *labels)
{
    if (!sel)
        return true;
    for (size_t i = 0; i < sel->n; i++)
        if (!req_matches(&sel->reqs[i], labels))
            return false;
    return true;
}

bool kc_label_selector_matches_object(const kc_label_selector *sel, const json_t *obj)
{
    const json_t *md = json_is_object(obj) ? json_object_get(obj, "metadata") : NULL;
    return kc_label_selector_matches(sel,
                                     json_is_object(md) ? json_object_get(md, "labels") : NULL);
}

bool kc_label_selector_empty(const kc_label_selector *sel)
{
    return !sel || sel->n == 0;
}

size_t kc_label_selector_count(const kc_label_selector *sel)
{
    return sel ? sel->n : 0;
}

const kc_label_requirement *kc_label_selector_at(const kc_label_selector *sel, size_t i)
{
    return sel && i < sel->n ? &sel->reqs[i] : NULL;
}

char *kc_label_selector_string(const kc_label_selector *sel)
{
    kc_sbuf b = {0};
    for (size_t i = 0; sel && i < sel->n; i++) {
        const kc_label_requirement *r = &sel->reqs[i];
        if (i)
            kc_sb_putc(&b, ',');
        if (r->op == KC_LABEL_NOTEXISTS)
            kc_sb_putc(&b, '!');
        kc_sb_puts(&b, r->key);
        switch (r->op) {
        case KC_LABEL_EQ:
        case KC_LABEL_NEQ:
            kc_sb_puts(&b, r->op == KC_LABEL_EQ ? "=" : "!=");
            kc_sb_puts(&b, r->values[0]);
            break;
        case KC_LABEL_IN:
        case KC_LABEL_NOTIN:
            kc_sb_puts(&b, r->op == KC_LABEL_IN ? " in (" : " notin (");
            for (size_t j = 0; j < r->nvalues; j++) {
                if (j)
                    kc_sb_putc(&b, ',');
                kc_sb_puts(&b, r->values[j]);
            }
            /* A set holding only "" would print as "()", which reads back as an error. */
            if (r->nvalues == 1 && r->values[0][0] == '\0')
                kc_sb_putc(&b, ',');
            kc_sb_putc(&b, ')');
            break;
        default:
            break;
        }
    }
    return kc_sb_finish(&b);
}
