/* kc_yaml: YAML (multi-document) to JSON with the Kubernetes (go-yaml v2) reading of scalars. */
#include "kc_yaml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Aliases are expanded by copying, so a few anchors can describe an exponential tree ("billion
 * laughs"); cap the nodes a stream may expand to. */
#define KC_YAML_MAX_NODES 1000000
/* Conversion, jansson's deep copy and json_decref recurse; keep nesting well inside the stack. */
#define KC_YAML_MAX_DEPTH 1000
/* A manifest or kubeconfig larger than this is certainly a mistake. */
#define KC_YAML_MAX_FILE (64u * 1024u * 1024u)

#define TAG_PREFIX "tag:yaml.org,2002:"

typedef struct yframe {
    json_t *value;    /* array or object under construction (owned) */
    json_t *keylines; /* maps: key -> line of its explicit definition (owned) */
    json_t *merges;   /* maps: objects named by "<<", applied at the end (owned, may be NULL) */
    char *anchor;     /* anchor of this node or NULL (owned) */
    size_t nodes_at_start;
    yaml_mark_t start; /* where the collection began, for messages */
    int is_map;
    int have_key;  /* maps: a key was read and waits for its value */
    int key_merge; /* the pending key is the merge key "<<" */
    char *key;     /* pending key text (owned) */
    size_t key_len;
    yaml_mark_t key_mark;
} yframe;

typedef struct yanchor {
    json_t *value; /* the anchored node, copied on every alias (owned) */
    char *text;    /* original text when the node is a scalar, for use as a key (owned) */
    size_t text_len;
    size_t nodes;
} yanchor;

typedef struct yctx {
    const char *name;
    kc_err *err;
    yframe *stack;
    size_t depth, stack_cap;
    yanchor *anchors;
    size_t nanchors, anchors_cap;
    json_t *anchor_index; /* anchor name -> index into anchors (latest definition wins) */
    size_t nodes;
    json_t *root; /* the finished root node of the current document */
    json_t *docs;
} yctx;

/* The resolved kind of a scalar, before it becomes JSON. */
typedef enum ykind { Y_STR, Y_NULL, Y_BOOL, Y_INT, Y_FLOAT, Y_NONFINITE } ykind;

typedef struct yscalar {
    ykind kind;
    int b;
    json_int_t i;
    double d;
} yscalar;

static kc_code yerr(yctx *c, const yaml_mark_t *m, kc_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static kc_code yerr(yctx *c, const yaml_mark_t *m, kc_code code, const char *fmt, ...)
{
    char msg[KC_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->name)
        return kc_err_set(c->err, code, "%s: line %zu column %zu: %s", c->name, m->line + 1,
                          m->column + 1, msg);
    return kc_err_set(c->err, code, "line %zu column %zu: %s", m->line + 1, m->column + 1, msg);
}

static kc_code oom(yctx *c)
{
    return kc_err_set(c->err, KC_ENOMEM, "%s%sout of memory converting YAML",
                      c->name ? c->name : "", c->name ? ": " : "");
}

/* ---- scalar resolution (go-yaml v2 resolve.go semantics) ---- */

static int str_in(const char *s, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == n && memcmp(*list, s, n) == 0)
            return 1;
    return 0;
}

static int digit_val(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return 99;
}

/* Go's strconv.ParseInt(s, 0, 64): sign, then 0x/0o/0b prefix or a leading 0 for octal.
 * Returns 1 and *out on success, 0 when s is not an integer, -1 when it is one but overflows. */
static int parse_int(const char *s, size_t n, json_int_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    unsigned base = 10;
    if (n - i >= 2 && s[i] == '0') {
        char p = s[i + 1];
        if (p == 'x' || p == 'X')
            base = 16, i += 2;
        else if (p == 'o' || p == 'O')
            base = 8, i += 2;
        else if (p == 'b' || p == 'B')
            base = 2, i += 2;
        else
            base = 8, i += 1;
    }
    if (i >= n)
        return 0;
    uint64_t v = 0;
    int over = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)digit_val(s[i]);
        if (d >= base)
            return 0;
        if (v > (UINT64_MAX - d) / base)
            over = 1;
        else
            v = v * base + d;
    }
    if (over || (!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
        return -1;
    *out = neg ? (json_int_t)(0 - v) : (json_int_t)v;
    return 1;
}

/* go-yaml's yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static int is_yaml_float(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return 0;
    } else {
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return 0;
        if (i < n && s[i] == '.')
            for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                ;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        digits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return 0;
    }
    return i == n;
}

static int parse_float(const char *s, size_t n, double *out)
{
    if (!is_yaml_float(s, n))
        return 0;
    char buf[128];
    if (n >= sizeof(buf)) {
        char *tmp = strndup(s, n);
        if (!tmp)
            return -2;
        *out = strtod(tmp, NULL);
        free(tmp);
    } else {
        memcpy(buf, s, n);
        buf[n] = 0;
        *out = strtod(buf, NULL);
    }
    /* Go's ParseFloat fails on overflow, and go-yaml then keeps the text as a string. */
    return isinf(*out) ? 0 : 1;
}

/* Resolves a plain scalar the way go-yaml v2 does. Returns KC_ENOMEM or KC_OK. */
static kc_code resolve_plain(const char *s, size_t n, yscalar *r)
{
    static const char *const yes[] = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                      "True", "TRUE", "on",  "On",  "ON",  NULL};
    static const char *const no[] = {"n",     "N",     "no",  "No",  "NO",  "false",
                                     "False", "FALSE", "off", "Off", "OFF", NULL};
    static const char *const nul[] = {"~", "null", "Null", "NULL", NULL};
    static const char *const nonfinite[] = {".nan",  ".NaN",  ".NAN",  ".inf",  ".Inf",
                                            ".INF",  "+.inf", "+.Inf", "+.INF", "-.inf",
                                            "-.Inf", "-.INF", NULL};
    memset(r, 0, sizeof(*r));
    r->kind = Y_STR;
    if (n == 0 || str_in(s, n, nul)) {
        r->kind = Y_NULL;
        return KC_OK;
    }
    if (str_in(s, n, yes) || str_in(s, n, no)) {
        r->kind = Y_BOOL;
        r->b = str_in(s, n, yes);
        return KC_OK;
    }
    if (str_in(s, n, nonfinite)) {
        r->kind = Y_NONFINITE;
        return KC_OK;
    }
    char c0 = s[0];
    if (c0 == '.') {
        int rc = parse_float(s, n, &r->d);
        if (rc == -2)
            return KC_ENOMEM;
        if (rc == 1)
            r->kind = Y_FLOAT;
        return KC_OK;
    }
    if (!(c0 == '+' || c0 == '-' || (c0 >= '0' && c0 <= '9')))
        return KC_OK;
    /* Underscores are digit separators for every numeric form. */
    char *plain = malloc(n + 1);
    if (!plain)
        return KC_ENOMEM;
    size_t pn = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_')
            plain[pn++] = s[i];
    plain[pn] = 0;
    int irc = parse_int(plain, pn, &r->i);
    if (irc == 1) {
        r->kind = Y_INT;
    } else {
        int frc = parse_float(plain, pn, &r->d);
        if (frc == -2) {
            free(plain);
            return KC_ENOMEM;
        }
        if (frc == 1)
            r->kind = Y_FLOAT;
    }
    free(plain);
    return KC_OK;
}

/* sigs.k8s.io/yaml marshals a float64 with Go's encoding/json, which writes integral values
 * without a fraction ("-2000"), and the API server then reads them as integers; do the same. */
static json_t *json_from_double(double d)
{
    if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return json_integer((json_int_t)d);
    return json_real(d);
}

static json_t *scalar_json(const yscalar *r)
{
    switch (r->kind) {
    case Y_NULL:
        return json_null();
    case Y_BOOL:
        return json_boolean(r->b);
    case Y_INT:
        return json_integer(r->i);
    case Y_FLOAT:
        return json_from_double(r->d);
    default:
        return NULL;
    }
}

static kc_code convert_scalar(yctx *c, const yaml_event_t *ev, json_t **out)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    const yaml_mark_t *m = &ev->start_mark;
    yscalar r;
    *out = NULL;

    const char *want = NULL; /* the core-schema tag asked for, NULL for none */
    if (tag && strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) == 0)
        want = tag + strlen(TAG_PREFIX);
    int plain = !tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    int resolve = plain || (want && (strcmp(want, "int") == 0 || strcmp(want, "float") == 0 ||
                                     strcmp(want, "bool") == 0 || strcmp(want, "null") == 0));
    if (want && (strcmp(want, "map") == 0 || strcmp(want, "seq") == 0))
        return yerr(c, m, KC_EPARSE, "scalar tagged !!%s", want);
    if (!resolve) {
        /* Quoted and block scalars, !!str, !!binary, !!timestamp and unknown tags: strings. */
        *out = json_stringn(s, n);
        return *out ? KC_OK : oom(c);
    }
    if (resolve_plain(s, n, &r) != KC_OK)
        return oom(c);
    if (r.kind == Y_NONFINITE)
        return yerr(c, m, KC_EPARSE, "value %.*s is not representable in JSON",
                    (int)(n > 40 ? 40 : n), s);
    if (want) {
        int ok = (strcmp(want, "int") == 0 && r.kind == Y_INT) ||
                 (strcmp(want, "float") == 0 && (r.kind == Y_INT || r.kind == Y_FLOAT)) ||
                 (strcmp(want, "bool") == 0 && r.kind == Y_BOOL) ||
                 (strcmp(want, "null") == 0 && r.kind == Y_NULL);
        if (!ok)
            return yerr(c, m, KC_EPARSE, "cannot read \"%.*s\" as !!%s", (int)(n > 60 ? 60 : n), s,
                        want);
        if (strcmp(want, "float") == 0 && r.kind == Y_INT) {
            r.kind = Y_FLOAT;
            r.d = (double)r.i;
        }
    }
    *out = r.kind == Y_STR ? json_stringn(s, n) : scalar_json(&r);
    return *out ? KC_OK : oom(c);
}

/* ---- the tree under construction ---- */

static void frame_free(yframe *f)
{
    json_decref(f->value);
    json_decref(f->keylines);
    json_decref(f->merges);
    free(f->anchor);
    free(f->key);
    memset(f, 0, sizeof(*f));
}

static void anchors_reset(yctx *c)
{
    for (size_t i = 0; i < c->nanchors; i++) {
        json_decref(c->anchors[i].value);
        free(c->anchors[i].text);
    }
    c->nanchors = 0;
    json_object_clear(c->anchor_index);
}

static kc_code count_nodes(yctx *c, const yaml_mark_t *m, size_t more)
{
    if (more > KC_YAML_MAX_NODES || c->nodes > KC_YAML_MAX_NODES - more)
        return yerr(c, m, KC_EPARSE,
                    "document expands to more than %d nodes (aliases nested too deeply?)",
                    KC_YAML_MAX_NODES);
    c->nodes += more;
    return KC_OK;
}

static kc_code register_anchor(yctx *c, const char *name, json_t *v, const char *text,
                               size_t text_len, size_t nodes)
{
    if (c->nanchors == c->anchors_cap) {
        size_t cap = c->anchors_cap ? c->anchors_cap * 2 : 8;
        yanchor *a = realloc(c->anchors, cap * sizeof(*a));
        if (!a)
            return oom(c);
        c->anchors = a;
        c->anchors_cap = cap;
    }
    yanchor *a = &c->anchors[c->nanchors];
    memset(a, 0, sizeof(*a));
    if (text) {
        a->text = malloc(text_len + 1);
        if (!a->text)
            return oom(c);
        memcpy(a->text, text, text_len);
        a->text[text_len] = 0;
        a->text_len = text_len;
    }
    if (json_object_set_new(c->anchor_index, name, json_integer((json_int_t)c->nanchors)) != 0) {
        free(a->text);
        return oom(c);
    }
    a->value = json_incref(v);
    a->nodes = nodes;
    c->nanchors++;
    return KC_OK;
}

static kc_code add_merge_source(yctx *c, yframe *f, json_t *v, const yaml_mark_t *m)
{
    if (!f->merges && !(f->merges = json_array()))
        return oom(c);
    if (json_is_object(v))
        return json_array_append(f->merges, v) == 0 ? KC_OK : oom(c);
    if (json_is_array(v)) {
        size_t i;
        json_t *el;
        json_array_foreach(v, i, el)
        {
            if (!json_is_object(el))
                return yerr(c, m, KC_EPARSE,
                            "merge key << needs a mapping or a sequence of mappings, element %zu "
                            "is not a mapping",
                            i);
            if (json_array_append(f->merges, el) != 0)
                return oom(c);
        }
        return KC_OK;
    }
    return yerr(c, m, KC_EPARSE, "merge key << needs a mapping or a sequence of mappings");
}

/* Places a finished node (v, stolen) into its parent. `key_text` is the node's original text when
 * it is a scalar (NULL for collections); `merge_key` marks a plain, untagged "<<". */
static kc_code add_node(yctx *c, json_t *v, const yaml_mark_t *m, const char *key_text,
                        size_t key_len, int merge_key)
{
    kc_code rc = KC_OK;
    if (c->depth == 0) {
        json_decref(c->root);
        c->root = v;
        return KC_OK;
    }
    yframe *f = &c->stack[c->depth - 1];
    if (!f->is_map) {
        if (json_array_append_new(f->value, v) != 0)
            return oom(c);
        return KC_OK;
    }
    if (!f->have_key) {
        json_decref(v);
        if (!key_text)
            return yerr(c, m, KC_EPARSE, "mapping keys must be scalars, not collections");
        f->key = malloc(key_len + 1);
        if (!f->key)
            return oom(c);
        memcpy(f->key, key_text, key_len);
        f->key[key_len] = 0;
        f->key_len = key_len;
        f->key_merge = merge_key;
        f->key_mark = *m;
        f->have_key = 1;
        return KC_OK;
    }
    if (f->key_merge) {
        rc = add_merge_source(c, f, v, &f->key_mark);
        json_decref(v);
    } else {
        json_t *line = json_object_getn(f->keylines, f->key, f->key_len);
        if (line) {
            json_decref(v);
            rc = yerr(c, &f->key_mark, KC_EPARSE, "mapping key \"%s\" already defined at line %d",
                      f->key, (int)json_integer_value(line));
        } else if (json_object_setn_new(f->value, f->key, f->key_len, v) != 0 ||
                   json_object_setn_new(f->keylines, f->key, f->key_len,
                                        json_integer((json_int_t)f->key_mark.line + 1)) != 0) {
            rc = oom(c);
        }
    }
    free(f->key);
    f->key = NULL;
    f->have_key = 0;
    return rc;
}

static kc_code push(yctx *c, const yaml_event_t *ev, int is_map)
{
    const yaml_char_t *anchor =
        is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    if (c->depth >= KC_YAML_MAX_DEPTH)
        return yerr(c, &ev->start_mark, KC_EPARSE, "nesting deeper than %d levels",
                    KC_YAML_MAX_DEPTH);
    size_t before = c->nodes;
    kc_code rc = count_nodes(c, &ev->start_mark, 1);
    if (rc != KC_OK)
        return rc;
    if (c->depth == c->stack_cap) {
        size_t cap = c->stack_cap ? c->stack_cap * 2 : 16;
        yframe *s = realloc(c->stack, cap * sizeof(*s));
        if (!s)
            return oom(c);
        c->stack = s;
        c->stack_cap = cap;
    }
    yframe *f = &c->stack[c->depth];
    memset(f, 0, sizeof(*f));
    f->is_map = is_map;
    f->nodes_at_start = before;
    f->start = ev->start_mark;
    f->value = is_map ? json_object() : json_array();
    if (is_map)
        f->keylines = json_object();
    if (anchor)
        f->anchor = strdup((const char *)anchor);
    c->depth++;
    if (!f->value || (is_map && !f->keylines) || (anchor && !f->anchor))
        return oom(c);
    return KC_OK;
}

/* Finishes the innermost collection: applies merge keys (explicit keys win, then earlier merge
 * sources over later ones) and hands the value to its parent. */
static kc_code pop(yctx *c)
{
    yframe f = c->stack[--c->depth];
    kc_code rc = KC_OK;
    if (f.merges) {
        size_t i;
        json_t *src;
        json_array_foreach(f.merges, i, src)
        {
            const char *k;
            size_t klen;
            json_t *val;
            json_object_keylen_foreach(src, k, klen, val)
            {
                if (!json_object_getn(f.value, k, klen) &&
                    json_object_setn(f.value, k, klen, val) != 0) {
                    rc = oom(c);
                    goto out_frame;
                }
            }
        }
    }
    if (f.anchor) {
        rc = register_anchor(c, f.anchor, f.value, NULL, 0, c->nodes - f.nodes_at_start);
        if (rc != KC_OK)
            goto out_frame;
    }
    rc = add_node(c, f.value, &f.start, NULL, 0, 0);
    f.value = NULL;
out_frame:
    frame_free(&f);
    return rc;
}

static kc_code on_scalar(yctx *c, const yaml_event_t *ev)
{
    json_t *v = NULL;
    kc_code rc = count_nodes(c, &ev->start_mark, 1);
    if (rc != KC_OK)
        return rc;
    rc = convert_scalar(c, ev, &v);
    if (rc != KC_OK)
        return rc;
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (ev->data.scalar.anchor) {
        rc = register_anchor(c, (const char *)ev->data.scalar.anchor, v, text, len, 1);
        if (rc != KC_OK) {
            json_decref(v);
            return rc;
        }
    }
    int merge = !ev->data.scalar.tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                len == 2 && memcmp(text, "<<", 2) == 0;
    return add_node(c, v, &ev->start_mark, text, len, merge);
}

static kc_code on_alias(yctx *c, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    json_t *idx = json_object_get(c->anchor_index, name);
    if (!idx)
        return yerr(c, &ev->start_mark, KC_EPARSE, "unknown anchor \"%s\" referenced", name);
    yanchor *a = &c->anchors[json_integer_value(idx)];
    kc_code rc = count_nodes(c, &ev->start_mark, a->nodes);
    if (rc != KC_OK)
        return rc;
    json_t *copy = json_deep_copy(a->value);
    if (!copy)
        return oom(c);
    return add_node(c, copy, &ev->start_mark, a->text, a->text_len, 0);
}

static kc_code parser_error(yctx *c, const yaml_parser_t *p, const char *buf, size_t len)
{
    const char *problem = p->problem ? p->problem : "unknown error";
    char where[96];
    if (p->error == YAML_READER_ERROR) {
        /* The reader knows only the byte offset; count lines so the user can find the spot. */
        size_t line = 1, col = 1;
        for (size_t i = 0; i < p->problem_offset && i < len; i++, col++)
            if (buf[i] == '\n')
                line++, col = 0;
        if (p->problem_value >= 0)
            snprintf(where, sizeof(where), "line %zu column %zu (byte %zu, value 0x%X)", line, col,
                     p->problem_offset, (unsigned)p->problem_value);
        else
            snprintf(where, sizeof(where), "line %zu column %zu (byte %zu)", line, col,
                     p->problem_offset);
    } else
        snprintf(where, sizeof(where), "line %zu column %zu", p->problem_mark.line + 1,
                 p->problem_mark.column + 1);
    if (p->error == YAML_MEMORY_ERROR)
        return oom(c);
    if (p->context)
        return kc_err_set(c->err, KC_EPARSE, "%s%s%s: %s (%s at line %zu column %zu)",
                          c->name ? c->name : "", c->name ? ": " : "", where, problem, p->context,
                          p->context_mark.line + 1, p->context_mark.column + 1);
    return kc_err_set(c->err, KC_EPARSE, "%s%s%s: %s", c->name ? c->name : "", c->name ? ": " : "",
                      where, problem);
}

static kc_code on_event(yctx *c, const yaml_event_t *ev, int *done)
{
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        *done = 1;
        return KC_OK;
    case YAML_DOCUMENT_START_EVENT:
        /* Anchors are scoped to their document. */
        anchors_reset(c);
        json_decref(c->root);
        c->root = NULL;
        return KC_OK;
    case YAML_DOCUMENT_END_EVENT:
        if (c->root && !json_is_null(c->root) && json_array_append(c->docs, c->root) != 0)
            return oom(c);
        json_decref(c->root);
        c->root = NULL;
        return KC_OK;
    case YAML_SCALAR_EVENT:
        return on_scalar(c, ev);
    case YAML_ALIAS_EVENT:
        return on_alias(c, ev);
    case YAML_SEQUENCE_START_EVENT:
        return push(c, ev, 0);
    case YAML_MAPPING_START_EVENT:
        return push(c, ev, 1);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return pop(c);
    default:
        return KC_OK;
    }
}

kc_code kc_yaml_parse(const char *buf, size_t len, const char *name, json_t **docs_out, kc_err *err)
{
    kc_code rc = KC_OK;
    yaml_parser_t parser;
    yctx c;

    if (!docs_out || (!buf && len))
        return kc_err_set(err, KC_EARG, "kc_yaml_parse: docs_out and buf are required");
    *docs_out = NULL;
    memset(&c, 0, sizeof(c));
    c.name = name;
    c.err = err;
    if (!yaml_parser_initialize(&parser))
        return oom(&c);
    c.docs = json_array();
    c.anchor_index = json_object();
    if (!c.docs || !c.anchor_index) {
        rc = oom(&c);
        goto out_ctx;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);
    for (int done = 0; !done && rc == KC_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = parser_error(&c, &parser, buf, len);
            break;
        }
        rc = on_event(&c, &ev, &done);
        yaml_event_delete(&ev);
    }
    if (rc == KC_OK) {
        *docs_out = c.docs;
        c.docs = NULL;
    }
out_ctx:
    while (c.depth > 0)
        frame_free(&c.stack[--c.depth]);
    free(c.stack);
    if (c.anchor_index)
        anchors_reset(&c);
    free(c.anchors);
    json_decref(c.anchor_index);
    json_decref(c.root);
    json_decref(c.docs);
    yaml_parser_delete(&parser);
    return rc;
}

kc_code kc_yaml_parse_file(const char *path, json_t **docs_out, kc_err *err)
{
    kc_code rc;
    char *data = NULL;
    size_t len = 0, cap = 0;

    if (!path || !docs_out)
        return kc_err_set(err, KC_EARG, "kc_yaml_parse_file: path and docs_out are required");
    *docs_out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kc_err_set(err, KC_EIO, "%s: cannot open: %s", path, strerror(errno));
    for (;;) {
        if (len == cap) {
            if (cap >= KC_YAML_MAX_FILE) {
                rc = kc_err_set(err, KC_EPARSE, "%s: larger than %u bytes", path, KC_YAML_MAX_FILE);
                goto out_data;
            }
            cap = cap ? cap * 2 : 8192;
            char *d = realloc(data, cap);
            if (!d) {
                rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory reading the file", path);
                goto out_data;
            }
            data = d;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                rc = kc_err_set(err, KC_EIO, "%s: read failed: %s", path, strerror(errno));
                goto out_data;
            }
            break;
        }
    }
    rc = kc_yaml_parse(data, len, path, docs_out, err);
out_data:
    free(data);
    fclose(f);
    return rc;
}

kc_code kc_yaml_parse_one(const char *buf, size_t len, const char *name, json_t **doc_out,
                          kc_err *err)
{
    json_t *docs = NULL;
    if (!doc_out)
        return kc_err_set(err, KC_EARG, "kc_yaml_parse_one: doc_out is required");
    *doc_out = NULL;
    kc_code rc = kc_yaml_parse(buf, len, name, &docs, err);
    if (rc != KC_OK)
        return rc;
    size_t n = json_array_size(docs);
    if (n > 1) {
        json_decref(docs);
        return kc_err_set(err, KC_EPARSE, "%s%sexpected one YAML document, found %zu",
                          name ? name : "", name ? ": " : "", n);
    }
    *doc_out = n == 1 ? json_incref(json_array_get(docs, 0)) : json_object();
    json_decref(docs);
    return *doc_out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
}

const char *kc_json_kind(const json_t *v, bool yaml_words)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return yaml_words ? "a mapping" : "an object";
    case JSON_ARRAY:
        return yaml_words ? "a list" : "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

const char *kc_yaml_key_list(const json_t *obj, char *buf, size_t size)
{
    size_t off = 0;
    const char *key;
    json_t *val;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    json_object_foreach((json_t *)obj, key, val)
    {
        int n = snprintf(buf + off, size - off, "%s%s", off ? ", " : "", key);
        if (n < 0 || (size_t)n >= size - off) {
            buf[off] = '\0';
            break;
        }
        off += (size_t)n;
    }
    return buf;
}

kc_code kc_yaml_fail(kc_err *err, const char *path, const char *fmt, ...)
{
    char msg[KC_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kc_err_set(err, KC_EINVALID, "%s: %s", path, msg);
}
