/* kc_selector_field: Kubernetes field selectors (f=v,f!=v with \-escapes) and their matching. */
#include "kc_selector.h"
#include "kc_selector_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct field_term {
    char *field;
    kc_field_op op;
    char *value;
} field_term;

struct kc_field_selector {
    field_term *terms;
    size_t n, cap;
};

void kc_field_selector_free(kc_field_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++) {
        free(sel->terms[i].field);
        free(sel->terms[i].value);
    }
    free(sel->terms);
    free(sel);
}

__attribute__((format(printf, 4, 5))) static kc_code ferr(kc_err *err, const char *s, size_t pos,
                                                          const char *fmt, ...)
{
    char what[256], q[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    kc_sel_quote(q, sizeof(q), "field selector", s);
    return kc_err_set(err, KC_EPARSE, "%s: %s at position %zu", q, what, pos + 1);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Unescapes s[from, to) into a new string; an unescaped '=' or an unknown escape is an error. */
static kc_code unescape_value(const char *s, size_t from, size_t to, char **out, kc_err *err)
{
    char *v = malloc(to - from + 1);
    if (!v)
        return kc_err_set(err, KC_ENOMEM, "field selector: out of memory");
    size_t w = 0;
    for (size_t i = from; i < to; i++) {
        char c = s[i];
        if (c == '=') {
            free(v);
            return ferr(err, s, i, "unescaped '=' in a value (write '\\=')");
        }
        if (c == '\\') {
            if (i + 1 == to) {
                free(v);
                return ferr(err, s, i, "unterminated escape '\\' at the end of a value");
            }
            c = s[++i];
            if (c != '\\' && c != ',' && c != '=') {
                free(v);
                if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
                    return ferr(
                        err, s, i - 1,
                        "invalid escape sequence ('\\' followed by byte 0x%02x); only \\\\, "
                        "\\, and \\= are allowed",
                        (unsigned char)c);
                return ferr(err, s, i - 1,
                            "invalid escape sequence '\\%c'; only \\\\, \\, and \\= are allowed",
                            c);
            }
        }
        v[w++] = c;
    }
    v[w] = '\0';
    *out = v;
    return KC_OK;
}

/* Parses the term s[from, to) (no unescaped ',' inside) and appends it to sel. */
static kc_code parse_term(kc_field_selector *sel, const char *s, size_t from, size_t to,
                          kc_err *err)
{
    size_t op_at = to, op_len = 0;
    kc_field_op op = KC_FIELD_EQ;
    /* The first unescaped "!=", "==" or "=" splits field from value, as the API server does. */
    for (size_t i = from; i < to; i++) {
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (s[i] == '!' && i + 1 < to && s[i + 1] == '=') {
            op = KC_FIELD_NEQ;
            op_len = 2;
        } else if (s[i] == '=') {
            op_len = i + 1 < to && s[i + 1] == '=' ? 2 : 1;
        } else {
            continue;
        }
        op_at = i;
        break;
    }
    if (op_len == 0)
        return ferr(err, s, from,
                    "term \"%.*s\" has no operator (expected field=value, "
                    "field==value or field!=value)",
                    (int)(to - from > 60 ? 60 : to - from), s + from);
    size_t fb = from, fe = op_at;
    while (fb < fe && is_space(s[fb]))
        fb++;
    while (fe > fb && is_space(s[fe - 1]))
        fe--;
    if (fb == fe)
        return ferr(err, s, op_at, "missing field name before the operator");
    for (size_t i = fb; i < fe; i++) {
        /* '!' is refused so that "f! =v" cannot print back as the different "f!=v". */
        if (is_space(s[i]) || s[i] == '\\' || s[i] == '!' || (unsigned char)s[i] < 0x20)
            return ferr(err, s, i, "invalid character in field name \"%.*s\"",
                        (int)(fe - fb > 60 ? 60 : fe - fb), s + fb);
    }
    field_term t = {.op = op};
    kc_code rc = unescape_value(s, op_at + op_len, to, &t.value, err);
    if (rc)
        return rc;
    t.field = strndup(s + fb, fe - fb);
    if (!t.field)
        goto oom;
    if (sel->n == sel->cap) {
        size_t cap = sel->cap ? sel->cap * 2 : 4;
        field_term *p = realloc(sel->terms, cap * sizeof(*p));
        if (!p)
            goto oom;
        sel->terms = p;
        sel->cap = cap;
    }
    sel->terms[sel->n++] = t;
    return KC_OK;
oom:
    free(t.field);
    free(t.value);
    return kc_err_set(err, KC_ENOMEM, "field selector: out of memory");
}

static int cmp_term(const void *a, const void *b)
{
    const field_term *x = a, *y = b;
    int c = strcmp(x->field, y->field);
    if (c)
        return c;
    if (x->op != y->op)
        return (int)x->op - (int)y->op;
    return strcmp(x->value, y->value);
}

kc_code kc_field_selector_parse(const char *s, kc_field_selector **out, kc_err *err)
{
    if (!s || !out)
        return kc_err_set(err, KC_EARG, "kc_field_selector_parse: NULL argument");
    *out = NULL;
    kc_field_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        return kc_err_set(err, KC_ENOMEM, "field selector: out of memory");
    size_t start = 0, i = 0;
    for (;; i++) {
        if (s[i] == '\\' && s[i + 1]) {
            i++;
            continue;
        }
        if (s[i] != ',' && s[i] != '\0')
            continue;
        if (i > start) {
            kc_code rc = parse_term(sel, s, start, i, err);
            if (rc) {
                kc_field_selector_free(sel);
                return rc;
            }
        }
        if (s[i] == '\0')
            break;
        start = i + 1;
    }
    if (sel->n > 1)
        qsort(sel->terms, sel->n, sizeof(*sel->terms), cmp_term);
    *out = sel;
    return KC_OK;
}

/* Follows the dotted path through nested objects; NULL when any step is missing. */
static const json_t *lookup_path(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    char key[256];
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!json_is_object(cur) || n == 0 || n >= sizeof(key))
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        if (!cur || !dot)
            return cur;
        p = dot + 1;
    }
}

static bool term_matches(const field_term *t, const json_t *obj)
{
    const json_t *v = lookup_path(obj, t->field);
    bool eq;
    if (!v || json_is_null(v)) {
        eq = t->value[0] == '\0';
    } else if (json_is_string(v)) {
        eq = strcmp(json_string_value(v), t->value) == 0;
    } else if (json_is_object(v) || json_is_array(v)) {
        eq = false; /* a structure has no string form a selector could name */
    } else {
        char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!txt)
            return false;
        eq = strcmp(txt, t->value) == 0;
        free(txt);
    }
    return t->op == KC_FIELD_EQ ? eq : !eq;
}

bool kc_field_selector_matches(const kc_field_selector *sel, const json_t *obj)
{
    for (size_t i = 0; sel && i < sel->n; i++)
        if (!term_matches(&sel->terms[i], obj))
            return false;
    return true;
}

bool kc_field_selector_empty(const kc_field_selector *sel)
{
    return !sel || sel->n == 0;
}

size_t kc_field_selector_count(const kc_field_selector *sel)
{
    return sel ? sel->n : 0;
}

bool kc_field_selector_term(const kc_field_selector *sel, size_t i, const char **field,
                            kc_field_op *op, const char **value)
{
    if (!sel || i >= sel->n)
        return false;
    if (field)
        *field = sel->terms[i].field;
    if (op)
        *op = sel->terms[i].op;
    if (value)
        *value = sel->terms[i].value;
    return true;
}

const char *kc_field_selector_unsupported(const kc_field_selector *sel,
                                          const char *const *supported)
{
    for (size_t i = 0; sel && i < sel->n; i++) {
        bool ok = false;
        for (size_t j = 0; supported && supported[j] && !ok; j++)
            ok = strcmp(supported[j], sel->terms[i].field) == 0;
        if (!ok)
            return sel->terms[i].field;
    }
    return NULL;
}

kc_code kc_field_selector_require(const kc_field_selector *sel, const char *const *supported,
                                  kc_err *err)
{
    const char *f = kc_field_selector_unsupported(sel, supported);
    if (!f)
        return KC_OK;
    return kc_err_set(err, KC_EBADREQUEST, "field label not supported: %s", f);
}

const char *kc_field_selector_equals_value(const kc_field_selector *sel, const char *field)
{
    for (size_t i = 0; sel && field && i < sel->n; i++)
        if (sel->terms[i].op == KC_FIELD_EQ && strcmp(sel->terms[i].field, field) == 0)
            return sel->terms[i].value;
    return NULL;
}

char *kc_field_selector_string(const kc_field_selector *sel)
{
    kc_sbuf b = {0};
    for (size_t i = 0; sel && i < sel->n; i++) {
        const field_term *t = &sel->terms[i];
        if (i)
            kc_sb_putc(&b, ',');
        kc_sb_puts(&b, t->field);
        kc_sb_puts(&b, t->op == KC_FIELD_EQ ? "=" : "!=");
        for (const char *p = t->value; *p; p++) {
            if (*p == '\\' || *p == ',' || *p == '=')
                kc_sb_putc(&b, '\\');
            kc_sb_putc(&b, *p);
        }
    }
    return kc_sb_finish(&b);
}
