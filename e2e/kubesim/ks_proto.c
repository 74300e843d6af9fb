/* ks_proto: the Kubernetes protobuf encoding of the built-in kinds, request side: the "k8s\0"
 * envelope and runtime.Unknown, and every message of the kinds in ks_proto_tables.c (core/v1,
 * apps/v1, rbac/v1, node/v1, coordination/v1, scheduling/v1, events/v1, apiextensions/v1,
 * DeleteOptions, ...) decoded into the JSON the API server's Go types would marshal: fields on the
 * wire, zero values dropped where the JSON tag says omitempty (and kept for pointers, which Go
 * writes only when set). Unknown fields are skipped, as the API server's generated code does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_base64.h"
#include "ks_proto_int.h"
#include "ks_sim.h"

const pmsg *ks_proto_msg(const char *api_version, const char *kind)
{
    if (!kind)
        return NULL;
    for (size_t i = 0; i < KS_PROTO_NKINDS; i++)
        if (strcmp(kind, KS_PROTO_KINDS[i].kind) == 0 &&
            (!KS_PROTO_KINDS[i].api_version[0] ||
             (api_version && strcmp(api_version, KS_PROTO_KINDS[i].api_version) == 0)))
            return KS_PROTO_KINDS[i].msg;
    return NULL;
}

/* ---- the wire format ---------------------------------------------------------------------- */

/* A bounded view of the body: [pos, end) with offsets counted from the body's first byte. */
typedef struct rd {
    const uint8_t *base;
    size_t pos, end;
} rd;

static kc_code perr(kc_err *err, size_t off, const char *what)
{
    return kc_err_set(err, KC_EPARSE, "protobuf body: %s at offset %zu", what, off);
}

static kc_code read_varint(rd *r, uint64_t *out, kc_err *err)
{
    size_t start = r->pos;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->pos >= r->end)
            return perr(err, start, "truncated varint");
        uint8_t b = r->base[r->pos++];
        if (i == 9 && b > 1)
            return perr(err, start, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return KC_OK;
        }
    }
    return perr(err, start, "varint longer than 10 bytes");
}

static kc_code read_tag(rd *r, uint32_t *num, int *wire, kc_err *err)
{
    size_t start = r->pos;
    uint64_t tag = 0;
    kc_code rc = read_varint(r, &tag, err);
    if (rc != KC_OK)
        return rc;
    *wire = (int)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
        return perr(err, start, "invalid field number");
    *num = (uint32_t)(tag >> 3);
    if (*wire == 3 || *wire == 4)
        return perr(err, start, "unsupported group (wire type 3/4)");
    if (*wire > 5)
        return perr(err, start, "invalid wire type");
    return KC_OK;
}

/* Reads a length-delimited payload: *sub covers it and r moves past it. */
static kc_code read_bytes(rd *r, rd *sub, kc_err *err)
{
    size_t start = r->pos;
    uint64_t len = 0;
    kc_code rc = read_varint(r, &len, err);
    if (rc != KC_OK)
        return rc;
    if (len > r->end - r->pos)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: length %llu at offset %zu runs past the end of the "
                          "enclosing message (offset %zu)",
                          (unsigned long long)len, start, r->end);
    sub->base = r->base;
    sub->pos = r->pos;
    sub->end = r->pos + (size_t)len;
    r->pos = sub->end;
    return KC_OK;
}

static kc_code skip_field(rd *r, int wire, kc_err *err)
{
    size_t start = r->pos;
    uint64_t v;
    rd sub;
    switch (wire) {
    case 0:
        return read_varint(r, &v, err);
    case 1:
    case 5: {
        size_t n = wire == 1 ? 8 : 4;
        if (r->end - r->pos < n)
            return perr(err, start, "truncated fixed-width field");
        r->pos += n;
        return KC_OK;
    }
    case 2:
        return read_bytes(r, &sub, err);
    default:
        return perr(err, start, "invalid wire type");
    }
}

/* ---- values ------------------------------------------------------------------------------- */

static json_t *string_value(const rd *s, const char *msg, const char *field, kc_err *err)
{
    json_t *j = json_stringn((const char *)s->base + s->pos, s->end - s->pos);
    if (!j)
        kc_err_set(err, KC_EPARSE, "protobuf body: %s.%s at offset %zu is not valid UTF-8", msg,
                   field, s->pos);
    return j;
}

static json_t *bytes_value(const rd *s, kc_err *err)
{
    char *b64 = kc_base64_encode(s->base + s->pos, s->end - s->pos);
    json_t *j = b64 ? json_string(b64) : NULL;
    free(b64);
    if (!j)
        kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
    return j;
}

/* The fields 1..3 of a small message (Time, Quantity, IntOrString, a map entry): want[n] is the
 * wire type field n must have (0 varint, 2 bytes; -1: skipped like any unknown field). Varints
 * land in iv[n], bytes in bv[n] (an empty view when the field is absent); seen[n] says whether it
 * came. */
typedef struct small_msg {
    uint64_t iv[4];
    rd bv[4];
    bool seen[4];
} small_msg;

static kc_code read_small(rd *s, const char *name, const int want[4], small_msg *m, kc_err *err)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < 4; i++)
        m->bv[i] = (rd){s->base, s->pos, s->pos};
    while (s->pos < s->end) {
        uint32_t num = 0;
        int wire;
        size_t at = s->pos;
        kc_code rc = read_tag(s, &num, &wire, err);
        if (rc != KC_OK)
            return rc;
        int w = num < 4 ? want[num] : -1;
        if (w >= 0 && wire != w)
            return kc_err_set(err, KC_EPARSE,
                              "protobuf body: %s field %u with a wire type other than %s at "
                              "offset %zu",
                              name, num, w ? "bytes" : "varint", at);
        if (w == 0)
            rc = read_varint(s, &m->iv[num], err);
        else if (w == 2)
            rc = read_bytes(s, &m->bv[num], err);
        else
            rc = skip_field(s, wire, err);
        if (rc != KC_OK)
            return rc;
        if (w >= 0)
            m->seen[num] = true;
    }
    return KC_OK;
}

/* meta.v1.Time / MicroTime {seconds=1, nanos=2} → "2006-01-02T15:04:05Z" (micro:
 * "2006-01-02T15:04:05.000000Z"); NULL without error for the zero time, which Go marshals as
 * null. */
static kc_code time_value(rd *s, bool micro, json_t **out, kc_err *err)
{
    static const int want[4] = {-1, 0, 0, -1};
    small_msg m;
    *out = NULL;
    kc_code rc = read_small(s, micro ? "MicroTime" : "Time", want, &m, err);
    if (rc != KC_OK || (!m.seen[1] && !m.seen[2]))
        return rc;
    int64_t secs = (int64_t)m.iv[1];
    int32_t nanos = (int32_t)m.iv[2];
    /* Years 0..9999 only, as Go's JSON encoding of a time. */
    if (secs < -62167219200LL || secs > 253402300799LL)
        return perr(err, s->end, "timestamp outside years 0-9999");
    if (nanos < 0 || nanos > 999999999)
        return perr(err, s->end, "timestamp nanos outside 0-999999999");
    time_t t = (time_t)secs;
    struct tm tm;
    char buf[48];
    if (!gmtime_r(&t, &tm) || strftime(buf, 24, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return perr(err, s->end, "timestamp cannot be represented");
    size_t n = strlen(buf);
    if (micro)
        snprintf(buf + n, sizeof(buf) - n, ".%06dZ", (int)(nanos / 1000));
    else
        snprintf(buf + n, sizeof(buf) - n, "Z");
    *out = json_string(buf);
    return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
}

/* util.intstr.IntOrString {type=1 (0 int, 1 string), intVal=2, strVal=3}. */
static kc_code intstr_value(rd *s, json_t **out, kc_err *err)
{
    static const int want[4] = {-1, 0, 0, 2};
    small_msg m;
    *out = NULL;
    kc_code rc = read_small(s, "IntOrString", want, &m, err);
    if (rc != KC_OK)
        return rc;
    if (m.iv[1] > 1)
        return perr(err, s->end, "IntOrString.type is neither 0 (int) nor 1 (string)");
    if (m.iv[1] == 1)
        *out = string_value(&m.bv[3], "IntOrString", "strVal", err);
    else
        *out = json_integer((json_int_t)(int32_t)m.iv[2]);
    return *out ? KC_OK : (err && err->code ? err->code : KC_ENOMEM);
}

static kc_code oom(kc_err *err)
{
    return kc_err_set(err, KC_ENOMEM, "protobuf body: out of memory");
}

/* Messages nest at most this deep (JSONSchemaProps is recursive). */
#define MAX_DEPTH 64
static _Thread_local int depth;

static kc_code decode_msg(rd *r, const pmsg *m, json_t *out, kc_err *err);
static kc_code decode_shaped(rd *r, const pmsg *m, json_t **out, kc_err *err);

/* resource.Quantity {string=1}: its text (other fields are Go-internal); "0" when empty. */
static json_t *quantity_value(rd *s, kc_err *err)
{
    static const int want[4] = {-1, 2, -1, -1};
    small_msg q;
    if (read_small(s, "Quantity", want, &q, err) != KC_OK)
        return NULL;
    if (q.bv[1].pos == q.bv[1].end) {
        json_t *z = json_string("0");
        if (!z)
            oom(err);
        return z;
    }
    return string_value(&q.bv[1], "Quantity", "string", err);
}

/* RawExtension / FieldsV1 / apiextensions JSON {raw=1}: the JSON text it holds (NULL without
 * error when there is none: Go marshals null). */
static kc_code raw_value(rd *s, const char *msg, const char *field, json_t **out, kc_err *err)
{
    static const int want[4] = {-1, 2, -1, -1};
    small_msg m;
    *out = NULL;
    kc_code rc = read_small(s, "RawExtension", want, &m, err);
    if (rc != KC_OK || !m.seen[1])
        return rc;
    /* A protobuf object inside (a protobuf watch event's object): decoded in turn. */
    if (m.bv[1].end - m.bv[1].pos >= 4 && !memcmp(m.bv[1].base + m.bv[1].pos, "k8s", 4)) {
        if (depth >= MAX_DEPTH)
            return perr(err, m.bv[1].pos, "messages nested too deep");
        depth++;
        rc = ks_proto_decode((const char *)m.bv[1].base + m.bv[1].pos, m.bv[1].end - m.bv[1].pos,
                             out, err);
        depth--;
        return rc;
    }
    json_error_t je;
    *out = json_loadb((const char *)m.bv[1].base + m.bv[1].pos, m.bv[1].end - m.bv[1].pos,
                      JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!*out)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: %s.%s at offset %zu does not hold JSON: %s", msg, field,
                          m.bv[1].pos, je.text);
    return KC_OK;
}

/* One map entry {key=1, value=2} into map. */
static kc_code map_entry(rd *s, json_t *map, const pfield *f, const char *msg, kc_err *err)
{
    const int want[4] = {-1, 2, 2, -1};
    small_msg e;
    kc_code rc = read_small(s, "map entry", want, &e, err);
    if (rc != KC_OK)
        return rc;
    json_t *k = string_value(&e.bv[1], msg, f->json, err);
    if (!k)
        return err ? err->code : KC_EPARSE;
    json_t *v = NULL;
    switch (f->type) {
    case F_MAP_BYTES:
        if (!(v = bytes_value(&e.bv[2], err)))
            rc = KC_ENOMEM;
        break;
    case F_MAP_QTY:
        if (!(v = quantity_value(&e.bv[2], err)))
            rc = err ? err->code : KC_EPARSE;
        break;
    case F_MAP_STRS: {
        /* {repeated string items=1} */
        rd sv = e.bv[2];
        if (!(v = json_array())) {
            rc = oom(err);
            break;
        }
        while (rc == KC_OK && sv.pos < sv.end) {
            uint32_t num = 0;
            int wire;
            size_t at = sv.pos;
            rd item;
            if ((rc = read_tag(&sv, &num, &wire, err)) != KC_OK)
                break;
            if (num != 1) {
                rc = skip_field(&sv, wire, err);
                continue;
            }
            if (wire != 2) {
                rc = perr(err, at, "map value item with a wire type other than bytes");
                break;
            }
            if ((rc = read_bytes(&sv, &item, err)) != KC_OK)
                break;
            json_t *it = string_value(&item, msg, f->json, err);
            if (!it || json_array_append_new(v, it) != 0)
                rc = it ? oom(err) : (err ? err->code : KC_EPARSE);
        }
        break;
    }
    case F_MAP_MSG:
        rc = decode_shaped(&e.bv[2], f->msg, &v, err);
        break;
    default:
        if (!(v = string_value(&e.bv[2], msg, f->json, err)))
            rc = err ? err->code : KC_EPARSE;
        break;
    }
    if (rc == KC_OK &&
        json_object_setn_new(map, json_string_value(k), json_string_length(k), v) != 0)
        rc = oom(err);
    else if (rc != KC_OK)
        json_decref(v);
    json_decref(k);
    return rc;
}

static json_t *child(json_t *out, const char *key, bool array)
{
    json_t *c = json_object_get(out, key);
    if (array ? json_is_array(c) : json_is_object(c))
        return c;
    c = array ? json_array() : json_object();
    if (c && json_object_set_new(out, key, c) != 0)
        return NULL;
    return c;
}

static kc_code set_value(json_t *out, const pfield *f, json_t *v, kc_err *err)
{
    if (!v)
        return oom(err);
    int rc;
    if (f->repeated) {
        json_t *arr = child(out, f->json, true);
        rc = arr ? json_array_append_new(arr, v) : (json_decref(v), -1);
    } else {
        rc = json_object_set_new(out, f->json, v);
    }
    return rc ? oom(err) : KC_OK;
}

/* A message whose JSON form is not an object (apiextensions' either-or types), or an object. */
static kc_code decode_shaped(rd *r, const pmsg *m, json_t **out, kc_err *err)
{
    json_t *o = json_object();
    *out = NULL;
    if (!o)
        return oom(err);
    kc_code rc = decode_msg(r, m, o, err);
    if (rc != KC_OK || m->shape == SHAPE_OBJECT) {
        if (rc != KC_OK)
            json_decref(o);
        else
            *out = o;
        return rc;
    }
    json_t *schema = json_object_get(o, "schema"), *v = NULL;
    switch (m->shape) {
    case SHAPE_OR_ARRAY:
        v = json_array_size(json_object_get(o, "jSONSchemas")) ? json_object_get(o, "jSONSchemas")
                                                               : schema;
        v = v ? json_incref(v) : json_null();
        break;
    case SHAPE_OR_BOOL:
        v = schema ? json_incref(schema) : json_boolean(json_is_true(json_object_get(o, "allows")));
        break;
    default:
        v = json_array_size(json_object_get(o, "property")) ? json_object_get(o, "property")
                                                            : schema;
        v = v ? json_incref(v) : json_null();
        break;
    }
    json_decref(o);
    *out = v;
    return v ? KC_OK : oom(err);
}

/* Go writes every value field, zeros included; JSON leaves out the zero of an omitempty one. */
static bool drop_zero(const pfield *f, bool zero)
{
    return zero && !f->repeated && !f->ptr && f->omitempty;
}

static kc_code decode_varint_field(rd *r, const pfield *f, json_t *out, kc_err *err)
{
    uint64_t v;
    kc_code rc = read_varint(r, &v, err);
    if (rc != KC_OK || drop_zero(f, v == 0))
        return rc;
    json_t *j;
    if (f->type == F_BOOL)
        j = json_boolean(v != 0);
    else if (f->int32)
        j = json_integer((json_int_t)(int32_t)v);
    else
        j = json_integer((json_int_t)v);
    return set_value(out, f, j, err);
}

static kc_code decode_field(rd *r, const pmsg *m, const pfield *f, int wire, size_t at, json_t *out,
                            kc_err *err)
{
    int want = f->type == F_INT || f->type == F_BOOL ? 0 : f->type == F_DOUBLE ? 1 : 2;
    kc_code rc;
    rd sub;
    /* A repeated number may come packed. */
    if (want == 0 && wire == 2 && f->repeated) {
        if ((rc = read_bytes(r, &sub, err)) != KC_OK)
            return rc;
        while (rc == KC_OK && sub.pos < sub.end)
            rc = decode_varint_field(&sub, f, out, err);
        return rc;
    }
    if (wire != want)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: %s.%s (field %u) has wire type %d, expected %d at "
                          "offset %zu",
                          m->name, f->json, f->num, wire, want, at);
    if (want == 0)
        return decode_varint_field(r, f, out, err);
    if (want == 1) {
        if (r->end - r->pos < 8)
            return perr(err, at, "truncated fixed-width field");
        uint64_t bits = 0;
        for (int i = 7; i >= 0; i--)
            bits = bits << 8 | r->base[r->pos + (size_t)i];
        r->pos += 8;
        double d;
        memcpy(&d, &bits, sizeof(d));
        if (d != d || d - d != 0)
            return perr(err, at, "a number that JSON cannot hold (NaN or infinity)");
        if (drop_zero(f, d == 0))
            return KC_OK;
        /* Go marshals 5.0 as 5 */
        bool whole = d == (double)(long long)d && d < 9e15 && d > -9e15;
        return set_value(out, f, whole ? json_integer((json_int_t)d) : json_real(d), err);
    }
    if ((rc = read_bytes(r, &sub, err)) != KC_OK)
        return rc;
    json_t *v = NULL;
    switch (f->type) {
    case F_STRING:
        if (drop_zero(f, sub.pos == sub.end))
            return KC_OK;
        if (!(v = string_value(&sub, m->name, f->json, err)))
            return err ? err->code : KC_EPARSE;
        return set_value(out, f, v, err);
    case F_BYTES:
        if (drop_zero(f, sub.pos == sub.end))
            return KC_OK;
        if (!(v = bytes_value(&sub, err)))
            return KC_ENOMEM;
        return set_value(out, f, v, err);
    case F_TIME:
    case F_MICROTIME:
        if ((rc = time_value(&sub, f->type == F_MICROTIME, &v, err)) != KC_OK || !v)
            return rc;
        return set_value(out, f, v, err);
    case F_QTY:
        if (!(v = quantity_value(&sub, err)))
            return err ? err->code : KC_EPARSE;
        return set_value(out, f, v, err);
    case F_RAW:
        if ((rc = raw_value(&sub, m->name, f->json, &v, err)) != KC_OK || !v)
            return rc;
        return set_value(out, f, v, err);
    case F_MAP_STR:
    case F_MAP_BYTES:
    case F_MAP_QTY:
    case F_MAP_STRS:
    case F_MAP_MSG: {
        json_t *map = child(out, f->json, false);
        if (!map)
            return oom(err);
        return map_entry(&sub, map, f, m->name, err);
    }
    case F_INTSTR:
        if ((rc = intstr_value(&sub, &v, err)) != KC_OK)
            return rc;
        return set_value(out, f, v, err);
    case F_MSG:
        if (f->repeated || f->msg->shape != SHAPE_OBJECT) {
            if ((rc = decode_shaped(&sub, f->msg, &v, err)) != KC_OK)
                return rc;
            return set_value(out, f, v, err);
        }
        if (f->embed)
            return decode_msg(&sub, f->msg, out, err);
        /* A message field seen twice merges, as protobuf does. */
        if (!(v = child(out, f->json, false)))
            return oom(err);
        return decode_msg(&sub, f->msg, v, err);
    default:
        return kc_err_set(err, KC_EUNSUPPORTED, "protobuf body: %s.%s (field %u) is not supported",
                          m->name, f->json, f->num);
    }
}

static kc_code decode_msg(rd *r, const pmsg *m, json_t *out, kc_err *err)
{
    if (depth >= MAX_DEPTH)
        return perr(err, r->pos, "messages nested too deep");
    depth++;
    kc_code rc = KC_OK;
    while (rc == KC_OK && r->pos < r->end) {
        uint32_t num = 0;
        int wire;
        size_t at = r->pos;
        if ((rc = read_tag(r, &num, &wire, err)) != KC_OK)
            break;
        const pfield *f = NULL;
        for (size_t i = 0; i < m->n && !f; i++)
            if (m->fields[i].num == num)
                f = &m->fields[i];
        /* Unknown fields (from newer API versions) are skipped, as the API server does. */
        rc = f ? decode_field(r, m, f, wire, at, out, err) : skip_field(r, wire, err);
    }
    depth--;
    return rc;
}

/* ---- the envelope ------------------------------------------------------------------------- */

kc_code ks_proto_unwrap(const char *body, size_t len, ks_proto_unknown *u, kc_err *err)
{
    static const uint8_t magic[4] = {'k', '8', 's', 0};
    memset(u, 0, sizeof(*u));
    if (!body || len < 4 || memcmp(body, magic, 4) != 0)
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: does not start with the \"k8s\\x00\" magic of a "
                          "Kubernetes protobuf envelope (%zu bytes)",
                          len);
    rd r = {(const uint8_t *)body, 4, len};
    rd tm = {r.base, 0, 0};
    while (r.pos < r.end) {
        uint32_t num = 0;
        int wire;
        size_t at = r.pos;
        kc_code rc = read_tag(&r, &num, &wire, err);
        if (rc != KC_OK)
            return rc;
        if (num >= 1 && num <= 4 && wire != 2)
            return kc_err_set(err, KC_EPARSE,
                              "protobuf body: runtime.Unknown field %u has wire type %d, expected "
                              "2 at offset %zu",
                              num, wire, at);
        rd sub;
        if (num < 1 || num > 4) {
            if ((rc = skip_field(&r, wire, err)) != KC_OK)
                return rc;
            continue;
        }
        if ((rc = read_bytes(&r, &sub, err)) != KC_OK)
            return rc;
        const char *p = (const char *)sub.base + sub.pos;
        size_t n = sub.end - sub.pos;
        if (num == 1) {
            tm = sub;
        } else if (num == 2) {
            u->raw = p;
            u->raw_len = n;
            u->have_raw = true;
        } else if (num == 3) {
            u->encoding = p;
            u->encoding_len = n;
        }
    }
    /* TypeMeta {apiVersion=1, kind=2} */
    static const int want[4] = {-1, 2, 2, -1};
    small_msg t;
    kc_code rc = read_small(&tm, "TypeMeta", want, &t, err);
    if (rc != KC_OK)
        return rc;
    size_t an = t.bv[1].end - t.bv[1].pos, kn = t.bv[2].end - t.bv[2].pos;
    if (an >= sizeof(u->api_version) || kn >= sizeof(u->kind))
        return perr(err, tm.pos, "TypeMeta apiVersion or kind longer than 255 bytes");
    memcpy(u->api_version, t.bv[1].base + t.bv[1].pos, an);
    memcpy(u->kind, t.bv[2].base + t.bv[2].pos, kn);
    u->api_version[an] = u->kind[kn] = '\0';
    if (strlen(u->api_version) != an || strlen(u->kind) != kn)
        return perr(err, tm.pos, "TypeMeta apiVersion or kind with a NUL byte");
    return KC_OK;
}

kc_code ks_proto_decode_msg(const char *api_version, const char *kind, const char *raw, size_t len,
                            json_t **out, kc_err *err)
{
    const pmsg *m = ks_proto_msg(api_version, kind);
    *out = NULL;
    if (!m)
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "the protobuf encoding of %s (apiVersion \"%s\") is not supported by "
                          "kubesim: it decodes the built-in kinds of core/v1, apps/v1, "
                          "rbac.authorization.k8s.io/v1, node.k8s.io/v1, coordination.k8s.io/v1, "
                          "scheduling.k8s.io/v1, events.k8s.io/v1, policy/v1 and "
                          "apiextensions.k8s.io/v1 it serves (custom resources are JSON only)",
                          kind, api_version ? api_version : "");
    json_t *obj = json_object();
    if (!obj)
        return oom(err);
    if (api_version && api_version[0])
        json_object_set_new(obj, "apiVersion", json_string(api_version));
    json_object_set_new(obj, "kind", json_string(kind));
    rd r = {(const uint8_t *)raw, 0, raw ? len : 0};
    kc_code rc = decode_msg(&r, m, obj, err);
    if (rc != KC_OK) {
        json_decref(obj);
        return rc;
    }
    *out = obj;
    return KC_OK;
}

kc_code ks_proto_decode(const char *body, size_t len, json_t **out, kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "ks_proto_decode: out is required");
    *out = NULL;
    ks_proto_unknown u;
    kc_code rc = ks_proto_unwrap(body, len, &u, err);
    if (rc != KC_OK)
        return rc;
    if (u.encoding_len)
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "protobuf body: contentEncoding \"%.*s\" is not supported",
                          (int)(u.encoding_len > 64 ? 64 : u.encoding_len), u.encoding);
    if (!u.kind[0])
        return kc_err_set(err, KC_EPARSE,
                          "protobuf body: the runtime.Unknown envelope names no kind "
                          "(typeMeta.kind is missing)");
    return ks_proto_decode_msg(u.api_version, u.kind, u.raw, u.raw_len, out, err);
}
