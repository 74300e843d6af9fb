/* kc_pack: compact binary records of JSON values with a shared string dictionary (kc_pack.h). */
#include "kc_pack.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Record layout: one tag byte per value, then its payload.
 *   NULL TRUE FALSE    nothing
 *   INT                zigzag varint of the json_int_t
 *   REAL               8 bytes, the double's bits, little-endian
 *   STR                varint length, bytes
 *   REF                varint dictionary id
 *   UUID               16 bytes (canonical lowercase 8-4-4-4-12 text)
 *   TIME               varint seconds since 1970 ("YYYY-MM-DDTHH:MM:SSZ")
 *   DEC                varint value (digits, no leading zero, at most 19)
 *   OBJECT             varint count, then count × (key as STR or REF, value)
 *   ARRAY              varint count, then count values */
enum {
    T_NULL,
    T_TRUE,
    T_FALSE,
    T_INT,
    T_REAL,
    T_STR,
    T_REF,
    T_UUID,
    T_TIME,
    T_DEC,
    T_OBJECT,
    T_ARRAY,
    T_END
};

#define CHUNK        1024u /* dictionary entries per chunk */
#define MAX_INTERNED 48u   /* longer values stay inline (keys: MAX_KEY) */
#define MAX_KEY      128u  /* longer keys stay inline */
#define CAND_SLOTS   4096u /* strings seen once, by hash; cleared when 3/4 full */
#define CAND_PROBE   8u

typedef struct entry {
    uint32_t len;
    char s[]; /* NUL-terminated */
} entry;

struct kc_pack_dict {
    pthread_mutex_t mu; /* encoders */
    size_t max;
    /* Entries live in chunks that never move: a decoder reads count (acquire) once and may then
     * read any entry below it without a lock. */
    entry **chunks[KC_PACK_DICT_MAX / CHUNK];
    _Atomic size_t count;
    size_t bytes; /* entry memory */
    /* id + 1 by hash (0: empty); writers only. */
    uint32_t *index;
    size_t index_cap;
    /* strings seen once, by hash, with the hash of the object they were seen in */
    uint64_t *cand, *cand_owner;
    size_t cand_used;
};

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1; /* 0 marks an empty candidate slot */
}

kc_pack_dict *kc_pack_dict_new(size_t max_entries)
{
    kc_pack_dict *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->max = max_entries < 1 ? 1 : max_entries > KC_PACK_DICT_MAX ? KC_PACK_DICT_MAX : max_entries;
    pthread_mutex_init(&d->mu, NULL);
    atomic_init(&d->count, 0);
    return d;
}

void kc_pack_dict_free(kc_pack_dict *d)
{
    if (!d)
        return;
    size_t n = atomic_load(&d->count);
    for (size_t i = 0; i < n; i++)
        free(d->chunks[i / CHUNK][i % CHUNK]);
    for (size_t c = 0; c < KC_PACK_DICT_MAX / CHUNK; c++)
        free(d->chunks[c]);
    free(d->index);
    free(d->cand);
    free(d->cand_owner);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

size_t kc_pack_dict_entries(const kc_pack_dict *d)
{
    return d ? atomic_load(&((kc_pack_dict *)d)->count) : 0;
}

size_t kc_pack_dict_bytes(const kc_pack_dict *d)
{
    if (!d)
        return 0;
    kc_pack_dict *m = (kc_pack_dict *)d;
    pthread_mutex_lock(&m->mu);
    size_t n = atomic_load(&m->count);
    size_t b = sizeof(*m) + m->bytes + m->index_cap * sizeof(uint32_t) +
               (m->cand ? 2 * CAND_SLOTS * sizeof(uint64_t) : 0) +
               (n + CHUNK - 1) / CHUNK * CHUNK * sizeof(entry *);
    pthread_mutex_unlock(&m->mu);
    return b;
}

static const entry *entry_at(const kc_pack_dict *d, size_t id)
{
    return d->chunks[id / CHUNK][id % CHUNK];
}

/* The id of s in the dictionary, or -1. Writers only. */
static long dict_find(const kc_pack_dict *d, const char *s, size_t n, uint64_t h)
{
    if (!d->index_cap)
        return -1;
    size_t mask = d->index_cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t v = d->index[i];
        if (!v)
            return -1;
        const entry *e = entry_at(d, v - 1);
        if (e->len == n && !memcmp(e->s, s, n))
            return (long)(v - 1);
    }
}

static void index_put(uint32_t *index, size_t cap, const kc_pack_dict *d, uint32_t id)
{
    const entry *e = entry_at(d, id);
    size_t mask = cap - 1;
    size_t i = hash(e->s, e->len) & mask;
    while (index[i])
        i = (i + 1) & mask;
    index[i] = id + 1;
}

/* Adds s; its id, or -1 when full or out of memory. Writers only. */
static long dict_add(kc_pack_dict *d, const char *s, size_t n)
{
    size_t id = atomic_load_explicit(&d->count, memory_order_relaxed);
    if (id >= d->max)
        return -1;
    if ((id + 1) * 2 > d->index_cap) {
        size_t cap = d->index_cap ? d->index_cap * 2 : 256;
        uint32_t *ni = calloc(cap, sizeof(*ni));
        if (!ni)
            return -1;
        for (size_t i = 0; i < id; i++)
            index_put(ni, cap, d, (uint32_t)i);
        free(d->index);
        d->index = ni;
        d->index_cap = cap;
    }
    entry **chunk = d->chunks[id / CHUNK];
    if (!chunk) {
        chunk = calloc(CHUNK, sizeof(*chunk));
        if (!chunk)
            return -1;
        d->chunks[id / CHUNK] = chunk;
    }
    entry *e = malloc(sizeof(*e) + n + 1);
    if (!e)
        return -1;
    e->len = (uint32_t)n;
    memcpy(e->s, s, n);
    e->s[n] = '\0';
    chunk[id % CHUNK] = e;
    d->bytes += sizeof(*e) + n + 1;
    atomic_store_explicit(&d->count, id + 1, memory_order_release);
    index_put(d->index, d->index_cap, d, (uint32_t)id);
    return (long)id;
}

/* True when the string was seen before in another object (and is now forgotten as a
 * candidate); else remembers it. owner 0: the object is unknown, any earlier sighting counts. A
 * cache encodes the same object again on every change: its own name recurs there, but only
 * strings that recur across objects are worth a dictionary entry. */
static bool seen_before(kc_pack_dict *d, uint64_t h, uint64_t owner)
{
    if (!d->cand) {
        d->cand = calloc(CAND_SLOTS, sizeof(*d->cand));
        d->cand_owner = calloc(CAND_SLOTS, sizeof(*d->cand_owner));
        if (!d->cand || !d->cand_owner) {
            free(d->cand);
            free(d->cand_owner);
            d->cand = d->cand_owner = NULL;
            return false;
        }
    }
    size_t mask = CAND_SLOTS - 1, free_slot = SIZE_MAX;
    for (size_t k = 0, i = h & mask; k < CAND_PROBE; k++, i = (i + 1) & mask) {
        if (d->cand[i] == h) {
            if (owner && d->cand_owner[i] == owner)
                return false;
            d->cand[i] = 0;
            d->cand_used--;
            return true;
        }
        if (!d->cand[i] && free_slot == SIZE_MAX)
            free_slot = i;
    }
    if (d->cand_used >= CAND_SLOTS / 4 * 3 || free_slot == SIZE_MAX) {
        memset(d->cand, 0, CAND_SLOTS * sizeof(*d->cand));
        d->cand_used = 0;
        free_slot = h & mask;
    }
    d->cand[free_slot] = h;
    d->cand_owner[free_slot] = owner;
    d->cand_used++;
    return false;
}

/* ---- encoding ---- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
    bool bad;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->bad || !n)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 512;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np) {
            b->bad = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_byte(buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static size_t varint(unsigned char out[10], uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

static void put_varint(buf *b, uint64_t v)
{
    unsigned char tmp[10];
    put(b, tmp, varint(tmp, v));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool as_uuid(const char *s, size_t n, unsigned char out[16])
{
    if (n != 36)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i++] != '-')
                return false;
            continue;
        }
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[k++] = (unsigned char)(hi << 4 | lo);
        i += 2;
    }
    return true;
}

static bool leap(long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), and back. */
static long days_from_civil(long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long)doe - 719468;
}

static void civil_from_days(long z, long *y, unsigned *m, unsigned *d)
{
    z += 719468;
    long era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (long)yoe + era * 400 + (*m <= 2);
}

static bool digits(const char *s, size_t n, long *v)
{
    long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
}

/* "YYYY-MM-DDTHH:MM:SSZ" from 1970 on, every field in range: seconds since 1970. */
static bool as_time(const char *s, size_t n, uint64_t *out)
{
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    long y, mo, d, h, mi, se;
    if (n != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
        s[19] != 'Z' || !digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) ||
        !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &se))
        return false;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59)
        return false;
    if (d > (long)mdays[mo - 1] + (mo == 2 && leap(y)))
        return false;
    *out = (uint64_t)days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400u +
           (uint64_t)(h * 3600 + mi * 60 + se);
    return true;
}

/* Decimal digits without a leading zero (or "0"), at most 19 of them. */
static bool as_dec(const char *s, size_t n, uint64_t *out)
{
    if (n < 1 || n > 19 || (n > 1 && s[0] == '0'))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static void put_string(kc_pack_dict *d, buf *b, const char *s, size_t n, bool key, uint64_t owner)
{
    unsigned char u[16];
    uint64_t v;
    if (!key) {
        if (as_uuid(s, n, u)) {
            put_byte(b, T_UUID);
            put(b, u, sizeof(u));
            return;
        }
        if (as_time(s, n, &v)) {
            put_byte(b, T_TIME);
            put_varint(b, v);
            return;
        }
        if (as_dec(s, n, &v)) {
            put_byte(b, T_DEC);
            put_varint(b, v);
            return;
        }
    }
    if (n >= 1 && n <= (key ? MAX_KEY : MAX_INTERNED)) {
        uint64_t h = hash(s, n);
        long id = dict_find(d, s, n, h);
        if (id < 0 && (key || seen_before(d, h, owner)))
            id = dict_add(d, s, n);
        if (id >= 0) {
            put_byte(b, T_REF);
            put_varint(b, (uint64_t)id);
            return;
        }
    }
    put_byte(b, T_STR);
    put_varint(b, n);
    put(b, s, n);
}

static bool put_value(kc_pack_dict *d, buf *b, const json_t *v, int depth, uint64_t owner)
{
    if (depth > KC_PACK_MAX_DEPTH)
        return false;
    switch (json_typeof(v)) {
    case JSON_NULL:
        put_byte(b, T_NULL);
        break;
    case JSON_TRUE:
        put_byte(b, T_TRUE);
        break;
    case JSON_FALSE:
        put_byte(b, T_FALSE);
        break;
    case JSON_INTEGER: {
        uint64_t x = (uint64_t)json_integer_value(v);
        put_byte(b, T_INT);
        put_varint(b, (x << 1) ^ (uint64_t)((int64_t)x >> 63));
        break;
    }
    case JSON_REAL: {
        double r = json_real_value(v);
        uint64_t bits;
        unsigned char le[8];
        memcpy(&bits, &r, sizeof(bits));
        for (int i = 0; i < 8; i++)
            le[i] = (unsigned char)(bits >> (8 * i));
        put_byte(b, T_REAL);
        put(b, le, sizeof(le));
        break;
    }
    case JSON_STRING:
        put_string(d, b, json_string_value(v), json_string_length(v), false, owner);
        break;
    case JSON_OBJECT: {
        put_byte(b, T_OBJECT);
        put_varint(b, json_object_size(v));
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            put_string(d, b, json_object_iter_key(it), json_object_iter_key_len(it), true, owner);
            if (!put_value(d, b, json_object_iter_value(it), depth + 1, owner))
                return false;
        }
        break;
    }
    case JSON_ARRAY: {
        put_byte(b, T_ARRAY);
        put_varint(b, json_array_size(v));
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!put_value(d, b, json_array_get(v, i), depth + 1, owner))
                return false;
        break;
    }
    }
    return !b->bad;
}

/* Packs v after `reserve` bytes left for the caller; the buffer is sized exactly. */
static unsigned char *encode(kc_pack_dict *d, const json_t *v, size_t reserve, size_t *len)
{
    if (!d || !v)
        return NULL;
    buf b = {0};
    unsigned char zero[10] = {0};
    put(&b, zero, reserve);
    /* The object's identity: its UID, else its namespace and name. */
    const json_t *md = json_object_get(v, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    uint64_t owner = uid ? hash(uid, strlen(uid)) : 0;
    if (!owner && name)
        owner = hash(name, strlen(name)) ^ (ns ? hash(ns, strlen(ns)) * 31 : 0);
    pthread_mutex_lock(&d->mu);
    bool ok = put_value(d, &b, v, 1, owner);
    pthread_mutex_unlock(&d->mu);
    /* The growth buffer's slack would stay with the record for its life. */
    unsigned char *out = ok && !b.bad ? realloc(b.p, b.n ? b.n : 1) : NULL;
    if (!out) {
        free(b.p);
        return NULL;
    }
    *len = b.n - reserve;
    return out;
}

unsigned char *kc_pack_encode(kc_pack_dict *d, const json_t *v, size_t *len)
{
    return encode(d, v, 0, len);
}

/* ---- decoding ---- */

typedef struct rd {
    const kc_pack_dict *d;
    size_t n_dict; /* entries visible to this decode */
    const unsigned char *p;
    size_t n, at;
    char *why;
    size_t whylen;
} rd;

__attribute__((format(printf, 2, 3))) static json_t *fail(rd *r, const char *fmt, ...)
{
    if (r->why && r->whylen) {
        int k = snprintf(r->why, r->whylen, "packed record, byte %zu: ", r->at);
        if (k >= 0 && (size_t)k < r->whylen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->why + k, r->whylen - (size_t)k, fmt, ap);
            va_end(ap);
        }
        r->why = NULL; /* the innermost reason wins */
    }
    return NULL;
}

static bool get_varint(rd *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->at >= r->n)
            return false;
        unsigned char c = r->p[r->at++];
        if (shift == 63 && c > 1)
            return false;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* A string value (or key) at the cursor: its tag already read. Writes into tmp for the
 * binary forms. */
static bool get_string(rd *r, int tag, const char **s, size_t *n, char tmp[40])
{
    uint64_t v;
    switch (tag) {
    case T_STR:
        if (!get_varint(r, &v) || v > r->n - r->at) {
            fail(r, "string length runs past the end");
            return false;
        }
        *s = (const char *)r->p + r->at;
        *n = (size_t)v;
        r->at += (size_t)v;
        return true;
    case T_REF: {
        if (!get_varint(r, &v) || v >= r->n_dict) {
            fail(r, "dictionary id out of range (%zu entries)", r->n_dict);
            return false;
        }
        const entry *e = entry_at(r->d, (size_t)v);
        *s = e->s;
        *n = e->len;
        return true;
    }
    case T_UUID: {
        static const char hx[] = "0123456789abcdef";
        if (r->n - r->at < 16) {
            fail(r, "UID truncated");
            return false;
        }
        size_t k = 0;
        for (size_t i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                tmp[k++] = '-';
            tmp[k++] = hx[r->p[r->at + i] >> 4];
            tmp[k++] = hx[r->p[r->at + i] & 15];
        }
        r->at += 16;
        *s = tmp;
        *n = 36;
        return true;
    }
    case T_TIME: {
        /* Up to the last second of year 9999, the format's limit. */
        if (!get_varint(r, &v) || v > 253402300799ull) {
            fail(r, "timestamp out of range");
            return false;
        }
        long y;
        unsigned mo, d;
        long days = (long)(v / 86400u), secs = (long)(v % 86400u);
        civil_from_days(days, &y, &mo, &d);
        snprintf(tmp, 40, "%04ld-%02u-%02uT%02ld:%02ld:%02ldZ", y, mo, d, secs / 3600,
                 secs / 60 % 60, secs % 60);
        *s = tmp;
        *n = 20;
        return true;
    }
    case T_DEC:
        if (!get_varint(r, &v) || v > 9999999999999999999ull) {
            fail(r, "decimal string out of range");
            return false;
        }
        *n = (size_t)snprintf(tmp, 40, "%llu", (unsigned long long)v);
        *s = tmp;
        return true;
    default:
        fail(r, "tag %d is not a string", tag);
        return false;
    }
}

static json_t *get_value(rd *r, int depth)
{
    if (depth > KC_PACK_MAX_DEPTH)
        return fail(r, "nested deeper than %d", KC_PACK_MAX_DEPTH);
    if (r->at >= r->n)
        return fail(r, "truncated: a value was expected");
    int tag = r->p[r->at++];
    uint64_t v;
    char tmp[40];
    const char *s;
    size_t n;
    switch (tag) {
    case T_NULL:
        return json_null();
    case T_TRUE:
        return json_true();
    case T_FALSE:
        return json_false();
    case T_INT:
        if (!get_varint(r, &v))
            return fail(r, "integer truncated or too long");
        return json_integer((json_int_t)((v >> 1) ^ (0 - (v & 1))));
    case T_REAL: {
        if (r->n - r->at < 8)
            return fail(r, "number truncated");
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits |= (uint64_t)r->p[r->at + (size_t)i] << (8 * i);
        r->at += 8;
        double x;
        memcpy(&x, &bits, sizeof(x));
        json_t *j = json_real(x);
        return j ? j : fail(r, "not a finite number");
    }
    case T_STR:
    case T_REF:
    case T_UUID:
    case T_TIME:
    case T_DEC: {
        if (!get_string(r, tag, &s, &n, tmp))
            return NULL;
        json_t *j = json_stringn(s, n);
        return j ? j : fail(r, "string is not UTF-8 (or out of memory)");
    }
    case T_OBJECT: {
        /* Every member takes at least three bytes: a count larger than what is left is a lie
         * (and would make the loop below long). */
        if (!get_varint(r, &v) || v > (r->n - r->at) / 3)
            return fail(r, "member count exceeds the record");
        json_t *o = json_object();
        if (!o)
            return fail(r, "out of memory");
        for (uint64_t i = 0; i < v; i++) {
            if (r->at >= r->n) {
                json_decref(o);
                return fail(r, "truncated: a key was expected");
            }
            int kt = r->p[r->at++];
            if (kt != T_STR && kt != T_REF) {
                json_decref(o);
                return fail(r, "key tag %d is not a string", kt);
            }
            if (!get_string(r, kt, &s, &n, tmp)) {
                json_decref(o);
                return NULL;
            }
            json_t *m = get_value(r, depth + 1);
            if (!m || json_object_setn_new(o, s, n, m) != 0) {
                json_decref(o);
                return m ? fail(r, "key is not UTF-8 (or out of memory)") : NULL;
            }
        }
        return o;
    }
    case T_ARRAY: {
        if (!get_varint(r, &v) || v > r->n - r->at)
            return fail(r, "element count exceeds the record");
        json_t *a = json_array();
        if (!a)
            return fail(r, "out of memory");
        for (uint64_t i = 0; i < v; i++) {
            json_t *e = get_value(r, depth + 1);
            if (!e || json_array_append_new(a, e) != 0) {
                json_decref(a);
                return e ? fail(r, "out of memory") : NULL;
            }
        }
        return a;
    }
    default:
        r->at--;
        return fail(r, "unknown tag %d", tag);
    }
}

json_t *kc_pack_decode(const kc_pack_dict *d, const unsigned char *rec, size_t len, char *why,
                       size_t whylen)
{
    if (why && whylen)
        why[0] = '\0';
    if (!d || (!rec && len))
        return NULL;
    rd r = {d,     atomic_load_explicit(&((kc_pack_dict *)d)->count, memory_order_acquire),
            rec,   len,
            0,     why,
            whylen};
    json_t *v = get_value(&r, 1);
    if (v && r.at != r.n) {
        json_decref(v);
        return fail(&r, "%zu trailing bytes", r.n - r.at);
    }
    return v;
}

/* ---- the informer codec: varint length, then the record ---- */

static void *codec_encode(const json_t *obj, void *ud)
{
    /* The length goes in front: reserve the most it can take, then close the gap. */
    size_t n;
    unsigned char *out = encode(ud, obj, 10, &n);
    if (!out)
        return NULL;
    unsigned char pre[10];
    size_t k = varint(pre, n);
    memcpy(out + 10 - k, pre, k);
    memmove(out, out + 10 - k, k + n);
    return out;
}

static json_t *codec_decode(const void *rec, void *ud)
{
    rd r = {.p = rec, .n = 10}; /* the length takes at most 10 bytes */
    uint64_t n;
    if (!get_varint(&r, &n))
        return NULL;
    return kc_pack_decode(ud, r.p + r.at, (size_t)n, NULL, 0);
}

/* The length prefix and the record it announces. */
static size_t codec_rec_size(const void *rec, void *ud)
{
    (void)ud;
    rd r = {.p = rec, .n = 10};
    uint64_t n = 0;
    get_varint(&r, &n); /* codec_encode wrote it */
    return r.at + (size_t)n;
}

kc_informer_codec kc_pack_codec(kc_pack_dict *d)
{
    return (kc_informer_codec){codec_encode, codec_decode, free, d, codec_rec_size};
}
