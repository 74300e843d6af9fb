/* ks_proto_enc: the Kubernetes protobuf encoding of the built-in kinds, response side: JSON
 * objects, lists, Status errors and watch events into the bytes the API server's generated Go
 * code writes (ks_proto_tables.c describes the messages), Accept negotiation between protobuf
 * and JSON. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kc_base64.h"
#include "ks_proto_int.h"
#include "ks_sim.h"

typedef struct buf {
    uint8_t *b;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *p, const void *d, size_t n)
{
    if (p->oom || !n)
        return;
    if (p->n + n > p->cap) {
        size_t c = p->cap ? p->cap * 2 : 256;
        while (c < p->n + n)
            c *= 2;
        uint8_t *nb = realloc(p->b, c);
        if (!nb) {
            p->oom = true;
            return;
        }
        p->b = nb;
        p->cap = c;
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void put_varint(buf *p, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(p, t, n);
}

static void put_tag(buf *p, uint32_t num, int wire)
{
    put_varint(p, (uint64_t)num << 3 | (uint64_t)wire);
}

static void put_bytes(buf *p, uint32_t num, const void *d, size_t n)
{
    put_tag(p, num, 2);
    put_varint(p, n);
    put(p, d, n);
}

static void put_sub(buf *p, uint32_t num, buf *sub)
{
    if (sub->oom)
        p->oom = true;
    put_bytes(p, num, sub->b, sub->n);
    free(sub->b);
    *sub = (buf){0};
}

/* The JSON path of the value being encoded, for error messages. */
typedef struct path {
    char s[512];
} path;

static kc_code type_err(kc_err *err, const path *at, const char *field, const char *want)
{
    return kc_err_set(err, KC_EINVALID, "protobuf encoding: %s%s%s: expected %s", at->s,
                      at->s[0] ? "." : "", field, want);
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* RFC 3339 ("2006-01-02T15:04:05Z", fraction and offset optional) → seconds and nanos. */
static bool parse_time(const char *s, int64_t *secs, int32_t *nanos)
{
    int Y, M, D, h, m, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || n != 19)
        return false;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return false;
    const char *p = s + 19;
    int32_t ns = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; isdigit((unsigned char)*p); p++, digits++)
            if (digits < 9)
                ns = ns * 10 + (*p - '0');
        if (!digits)
            return false;
        for (; digits < 9; digits++)
            ns *= 10;
    }
    int off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || strlen(p) != 6)
            return false;
        off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p)
        return false;
    *secs = days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400 + h * 3600 + m * 60 + sec - off;
    *nanos = ns;
    return true;
}

static kc_code enc_msg(buf *p, const pmsg *m, const json_t *o, path *at, kc_err *err);

/* One value of field f (v NULL: the zero value) with its tag. */
static kc_code enc_value(buf *p, const pfield *f, const json_t *v, path *at, kc_err *err)
{
    kc_code rc = KC_OK;
    buf sub = {0};
    switch (f->type) {
    case F_STRING:
        if (v && !json_is_string(v))
            return type_err(err, at, f->json, "a string");
        put_bytes(p, f->num, v ? json_string_value(v) : "", v ? json_string_length(v) : 0);
        return KC_OK;
    case F_INT: {
        if (v && !json_is_integer(v))
            return type_err(err, at, f->json, "an integer");
        json_int_t i = v ? json_integer_value(v) : 0;
        put_tag(p, f->num, 0);
        put_varint(p, f->int32 ? (uint64_t)(int64_t)(int32_t)i : (uint64_t)i);
        return KC_OK;
    }
    case F_BOOL:
        if (v && !json_is_boolean(v))
            return type_err(err, at, f->json, "a boolean");
        put_tag(p, f->num, 0);
        put_varint(p, json_is_true(v) ? 1 : 0);
        return KC_OK;
    case F_DOUBLE: {
        if (v && !json_is_number(v))
            return type_err(err, at, f->json, "a number");
        double d = v ? json_number_value(v) : 0;
        uint64_t bits;
        uint8_t le[8];
        memcpy(&bits, &d, sizeof(bits));
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(bits >> (8 * i));
        put_tag(p, f->num, 1);
        put(p, le, 8);
        return KC_OK;
    }
    case F_BYTES: {
        if (v && !json_is_string(v))
            return type_err(err, at, f->json, "a base64 string");
        unsigned char *b = NULL;
        size_t n = 0;
        if (v &&
            kc_base64_decode(json_string_value(v), json_string_length(v), &b, &n, err) != KC_OK)
            return type_err(err, at, f->json, "base64");
        put_bytes(p, f->num, b, n);
        free(b);
        return KC_OK;
    }
    case F_TIME:
    case F_MICROTIME: {
        /* The zero time is an empty message; any other, seconds and nanos. */
        if (v && !json_is_string(v))
            return type_err(err, at, f->json, "an RFC 3339 time");
        if (v) {
            int64_t secs;
            int32_t ns;
            if (!parse_time(json_string_value(v), &secs, &ns))
                return type_err(err, at, f->json, "an RFC 3339 time");
            if (f->type == F_TIME)
                ns = 0; /* Time keeps seconds only, as its JSON */
            put_tag(&sub, 1, 0);
            put_varint(&sub, (uint64_t)secs);
            put_tag(&sub, 2, 0);
            put_varint(&sub, (uint64_t)(int64_t)ns);
        }
        put_sub(p, f->num, &sub);
        return KC_OK;
    }
    case F_QTY: {
        if (v && !json_is_string(v) && !json_is_number(v))
            return type_err(err, at, f->json, "a quantity");
        char num[64];
        const char *s = "0";
        if (json_is_string(v))
            s = json_string_value(v);
        else if (json_is_integer(v))
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v)), s = num;
        else if (v)
            snprintf(num, sizeof(num), "%g", json_real_value(v)), s = num;
        put_bytes(&sub, 1, s, strlen(s));
        put_sub(p, f->num, &sub);
        return KC_OK;
    }
    case F_INTSTR: {
        /* {type=1, intVal=2, strVal=3}, all three always */
        if (v && !json_is_string(v) && !json_is_integer(v))
            return type_err(err, at, f->json, "an integer or a string");
        bool str = json_is_string(v);
        put_tag(&sub, 1, 0);
        put_varint(&sub, str ? 1 : 0);
        put_tag(&sub, 2, 0);
        put_varint(&sub, str || !v ? 0 : (uint64_t)(int64_t)(int32_t)json_integer_value(v));
        put_bytes(&sub, 3, str ? json_string_value(v) : "", str ? json_string_length(v) : 0);
        put_sub(p, f->num, &sub);
        return KC_OK;
    }
    case F_RAW:
        /* {raw=1}: the JSON text, when there is a value */
        if (v) {
            char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!s)
                return kc_err_set(err, KC_ENOMEM, "protobuf encoding: out of memory");
            put_bytes(&sub, 1, s, strlen(s));
            free(s);
        }
        put_sub(p, f->num, &sub);
        return KC_OK;
    case F_MSG: {
        size_t mark = strlen(at->s);
        if (!f->embed)
            snprintf(at->s + mark, sizeof(at->s) - mark, "%s%s", mark ? "." : "", f->json);
        rc = enc_msg(&sub, f->msg, v, at, err);
        at->s[mark] = '\0';
        if (rc == KC_OK)
            put_sub(p, f->num, &sub);
        free(sub.b);
        return rc;
    }
    default:
        return kc_err_set(err, KC_EUNSUPPORTED, "protobuf encoding: %s.%s is not supported", at->s,
                          f->json);
    }
}

/* A key's length (keys may hold NUL bytes). */
static size_t key_len(const char *k)
{
    return json_object_iter_key_len(json_object_key_to_iter(k));
}

/* Go's sort.Strings: byte order, a prefix first. */
static int cmp_key(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t xn = key_len(x), yn = key_len(y);
    int c = memcmp(x, y, xn < yn ? xn : yn);
    return c ? c : (xn > yn) - (xn < yn);
}

/* A map: entries {key=1, value=2} in key order, as Go's generated code sorts them. */
static kc_code enc_map(buf *p, const pfield *f, const json_t *map, path *at, kc_err *err)
{
    if (!json_is_object(map))
        return type_err(err, at, f->json, "an object");
    size_t n = json_object_size(map), i = 0;
    const char **keys = n ? malloc(n * sizeof(*keys)) : NULL;
    if (n && !keys)
        return kc_err_set(err, KC_ENOMEM, "protobuf encoding: out of memory");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)map, k, v) keys[i++] = k;
    if (n > 1) /* qsort takes no null array, even of no entries */
        qsort(keys, n, sizeof(*keys), cmp_key);
    kc_code rc = KC_OK;
    for (i = 0; i < n && rc == KC_OK; i++) {
        buf e = {0};
        size_t kn = key_len(keys[i]);
        v = json_object_getn(map, keys[i], kn);
        put_bytes(&e, 1, keys[i], kn);
        pfield vf = {2, keys[i], F_STRING, false, false, false, false, false, f->msg};
        switch (f->type) {
        case F_MAP_BYTES:
            vf.type = F_BYTES;
            break;
        case F_MAP_QTY:
            vf.type = F_QTY;
            break;
        case F_MAP_MSG:
            vf.type = F_MSG;
            break;
        case F_MAP_STRS: {
            if (!json_is_array(v)) {
                rc = type_err(err, at, f->json, "arrays of strings");
                break;
            }
            buf items = {0};
            size_t j;
            json_t *s;
            json_array_foreach(v, j, s)
            {
                if (!json_is_string(s)) {
                    rc = type_err(err, at, f->json, "arrays of strings");
                    break;
                }
                put_bytes(&items, 1, json_string_value(s), json_string_length(s));
            }
            put_sub(&e, 2, &items);
            break;
        }
        default:
            break;
        }
        if (rc == KC_OK && f->type != F_MAP_STRS) {
            if (json_is_null(v))
                v = NULL;
            /* A nil []byte value is not written. */
            if (!(f->type == F_MAP_BYTES && !v))
                rc = enc_value(&e, &vf, v, at, err);
        }
        if (rc == KC_OK)
            put_sub(p, f->num, &e);
        free(e.b);
    }
    free(keys);
    return rc;
}

static kc_code enc_shaped(buf *p, const pmsg *m, const json_t *o, path *at, kc_err *err)
{
    const pfield *schema = NULL, *other = NULL;
    for (size_t i = 0; i < m->n; i++) {
        if (!strcmp(m->fields[i].json, "schema"))
            schema = &m->fields[i];
        else
            other = &m->fields[i];
    }
    if (!schema || !other)
        return kc_err_set(err, KC_EUNSUPPORTED, "protobuf encoding: %s is not supported", m->name);
    kc_code rc = KC_OK;
    if (m->shape == SHAPE_OR_BOOL) {
        /* {allows=1, schema=2}: true, false, or a schema (allows true) */
        if (o && !json_is_boolean(o) && !json_is_object(o))
            return type_err(err, at, m->name, "a boolean or an object");
        put_tag(p, other->num, 0);
        put_varint(p, json_is_false(o) || !o ? 0 : 1);
        return json_is_object(o) ? enc_value(p, schema, o, at, err) : KC_OK;
    }
    if (json_is_object(o))
        return enc_value(p, schema, o, at, err);
    if (json_is_array(o)) {
        size_t i;
        json_t *e;
        json_array_foreach(o, i, e)
        {
            if ((rc = enc_value(p, other, e, at, err)) != KC_OK)
                return rc;
        }
        return KC_OK;
    }
    if (o && !json_is_null(o))
        return type_err(err, at, m->name, "an object or an array");
    return KC_OK;
}

static kc_code enc_msg(buf *p, const pmsg *m, const json_t *o, path *at, kc_err *err)
{
    if (m->shape != SHAPE_OBJECT)
        return enc_shaped(p, m, o, at, err);
    if (o && !json_is_object(o) && !json_is_null(o))
        return type_err(err, at, m->name, "an object");
    kc_code rc = KC_OK;
    for (size_t i = 0; i < m->n && rc == KC_OK; i++) {
        const pfield *f = &m->fields[i];
        const json_t *v = f->embed ? o : o ? json_object_get(o, f->json) : NULL;
        if (json_is_null(v))
            v = NULL;
        if (f->type >= F_MAP_STR && f->type <= F_MAP_MSG) {
            if (v)
                rc = enc_map(p, f, v, at, err);
            continue;
        }
        if (f->repeated) {
            if (!v)
                continue;
            if (!json_is_array(v))
                return type_err(err, at, f->json, "an array");
            size_t j;
            json_t *e;
            json_array_foreach(v, j, e)
            {
                if ((rc = enc_value(p, f, json_is_null(e) ? NULL : e, at, err)) != KC_OK)
                    break;
            }
            continue;
        }
        /* Pointers and []byte are written when set; value fields always. */
        if (!v && (f->ptr || f->type == F_BYTES))
            continue;
        rc = enc_value(p, f, v, at, err);
    }
    if (rc == KC_OK && p->oom)
        rc = kc_err_set(err, KC_ENOMEM, "protobuf encoding: out of memory");
    return rc;
}

bool ks_proto_can_encode(const json_t *obj)
{
    const char *api = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    return api && api[0] && ks_proto_msg(api, kind) != NULL;
}

static kc_code envelope(const json_t *obj, buf *out, kc_err *err)
{
    const char *api = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const pmsg *m = api && api[0] ? ks_proto_msg(api, kind) : NULL;
    if (!m)
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "protobuf encoding: %s (apiVersion \"%s\") has no protobuf message",
                          kind ? kind : "an object without a kind", api ? api : "");
    path at = {{0}};
    buf raw = {0}, tm = {0};
    kc_code rc = enc_msg(&raw, m, obj, &at, err);
    if (rc != KC_OK) {
        free(raw.b);
        return rc;
    }
    put(out, "k8s\0", 4);
    put_bytes(&tm, 1, api, json_string_length(json_object_get(obj, "apiVersion")));
    put_bytes(&tm, 2, kind, json_string_length(json_object_get(obj, "kind")));
    put_sub(out, 1, &tm);
    put_sub(out, 2, &raw);
    put_bytes(out, 3, "", 0); /* contentEncoding */
    put_bytes(out, 4, "", 0); /* contentType */
    if (out->oom)
        return kc_err_set(err, KC_ENOMEM, "protobuf encoding: out of memory");
    return KC_OK;
}

kc_code ks_proto_encode(const json_t *obj, char **out, size_t *len, kc_err *err)
{
    buf b = {0};
    *out = NULL;
    *len = 0;
    kc_code rc = envelope(obj, &b, err);
    if (rc != KC_OK) {
        free(b.b);
        return rc;
    }
    *out = (char *)b.b;
    *len = b.n;
    return KC_OK;
}

kc_code ks_proto_watch_frame(const char *type, const json_t *obj, char **out, size_t *len,
                             kc_err *err)
{
    buf env = {0}, raw = {0}, ev = {0}, fr = {0};
    *out = NULL;
    *len = 0;
    kc_code rc = envelope(obj, &env, err);
    if (rc != KC_OK) {
        free(env.b);
        return rc;
    }
    put_bytes(&ev, 1, type, strlen(type));
    put_sub(&raw, 1, &env);
    put_sub(&ev, 2, &raw);
    uint8_t be[4] = {(uint8_t)(ev.n >> 24), (uint8_t)(ev.n >> 16), (uint8_t)(ev.n >> 8),
                     (uint8_t)ev.n};
    put(&fr, be, 4);
    put(&fr, ev.b, ev.n);
    bool failed = ev.oom || fr.oom;
    free(ev.b);
    if (failed) {
        free(fr.b);
        return kc_err_set(err, KC_ENOMEM, "protobuf encoding: out of memory");
    }
    *out = (char *)fr.b;
    *len = fr.n;
    return KC_OK;
}

/* ---- Accept negotiation ------------------------------------------------------------------- */

ks_media ks_media_negotiate(const char *accept, bool proto_ok)
{
    if (!accept || !accept[0])
        return KS_MEDIA_JSON;
    /* The best range wins: highest q, then the earliest. */
    double best_q = -1;
    ks_media best = KS_MEDIA_NONE;
    bool any_proto = false;
    const char *p = accept;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char range[256];
        if (n >= sizeof(range))
            n = sizeof(range) - 1;
        memcpy(range, p, n);
        range[n] = '\0';
        p = comma ? comma + 1 : p + strlen(p);
        char *save = NULL, *tok = strtok_r(range, ";", &save);
        if (!tok)
            continue;
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t tl = strlen(tok);
        while (tl && (tok[tl - 1] == ' ' || tok[tl - 1] == '\t'))
            tok[--tl] = '\0';
        double q = 1;
        bool as = false;
        while ((tok = strtok_r(NULL, ";", &save))) {
            while (*tok == ' ' || *tok == '\t')
                tok++;
            if (!strncasecmp(tok, "q=", 2))
                q = strtod(tok + 2, NULL);
            else if (!strncasecmp(tok, "as=", 3))
                as = true;
        }
        char *type = range;
        while (*type == ' ' || *type == '\t')
            type++;
        ks_media m;
        if (!strcasecmp(type, "application/vnd.kubernetes.protobuf")) {
            any_proto = true;
            if (as || !proto_ok)
                continue;
            m = KS_MEDIA_PROTOBUF;
        } else if (!strcasecmp(type, "application/json") || !strcasecmp(type, "application/yaml") ||
                   !strcasecmp(type, "*/*") || !strcasecmp(type, "application/*")) {
            m = KS_MEDIA_JSON;
        } else {
            continue;
        }
        if (q > 0 && q > best_q) {
            best_q = q;
            best = m;
        }
    }
    /* Only a request that asked for protobuf and nothing kubesim can send is refused. */
    if (best == KS_MEDIA_NONE && !any_proto)
        return KS_MEDIA_JSON;
    return best;
}
