/* kc_map: string-keyed open-addressing hash table (linear probing, backward-shift deletion). */
#include "kc_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 16 bytes a slot: at 5,000 nodes the pod cache alone has 131,072 slots. The key's full hash is
 * not kept (it is computed again when the table grows or a removal shifts entries); one byte of
 * it per slot, in a separate array, spares most probes a string comparison. */
typedef struct slot {
    char *key; /* NULL: empty */
    void *val;
} slot;

struct kc_map {
    slot *slots;
    unsigned char *tags; /* a byte of each slot's key hash */
    size_t cap;          /* power of two, 0 before the first put */
    size_t size;
};

#define MIN_CAP 16

/* FNV-1a followed by a 64-bit finalizer, so keys that differ only in their tail (pod-1, pod-2)
 * still spread over the low bits the table indexes with. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static unsigned char tag_of(uint64_t h)
{
    return (unsigned char)(h >> 56);
}

kc_map *kc_map_new(void)
{
    return calloc(1, sizeof(kc_map));
}

void kc_map_free(kc_map *m, void (*free_val)(void *val))
{
    if (!m)
        return;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        free(m->slots[i].key);
        if (free_val)
            free_val(m->slots[i].val);
    }
    free(m->slots);
    free(m->tags);
    free(m);
}

size_t kc_map_size(const kc_map *m)
{
    return m ? m->size : 0;
}

/* Index of key's slot, or of the empty slot where it would go. */
static size_t find(const kc_map *m, const char *key, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    unsigned char tag = tag_of(h);
    while (m->slots[i].key) {
        if (m->tags[i] == tag && strcmp(m->slots[i].key, key) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

static kc_code grow(kc_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : MIN_CAP;
    slot *ns = calloc(ncap, sizeof(slot));
    unsigned char *nt = malloc(ncap);
    if (!ns || !nt) {
        free(ns);
        free(nt);
        return KC_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        uint64_t h = hash_str(m->slots[i].key);
        size_t j = (size_t)h & (ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
        nt[j] = tag_of(h);
    }
    free(m->slots);
    free(m->tags);
    m->slots = ns;
    m->tags = nt;
    m->cap = ncap;
    return KC_OK;
}

void *kc_map_get(const kc_map *m, const char *key)
{
    if (!m || !m->size || !key)
        return NULL;
    size_t i = find(m, key, hash_str(key));
    return m->slots[i].key ? m->slots[i].val : NULL;
}

kc_code kc_map_put(kc_map *m, const char *key, void *val, void **old)
{
    if (old)
        *old = NULL;
    if (!m || !key || !val)
        return KC_EARG;
    /* Keep the load under 70% so probe sequences stay short. */
    if ((m->size + 1) * 10 > m->cap * 7 && grow(m) != KC_OK)
        return KC_ENOMEM;
    uint64_t h = hash_str(key);
    size_t i = find(m, key, h);
    if (m->slots[i].key) {
        if (old)
            *old = m->slots[i].val;
        m->slots[i].val = val;
        return KC_OK;
    }
    char *k = strdup(key);
    if (!k)
        return KC_ENOMEM;
    m->slots[i] = (slot){.key = k, .val = val};
    m->tags[i] = tag_of(h);
    m->size++;
    return KC_OK;
}

void *kc_map_remove(kc_map *m, const char *key)
{
    if (!m || !m->size || !key)
        return NULL;
    size_t mask = m->cap - 1;
    size_t i = find(m, key, hash_str(key));
    if (!m->slots[i].key)
        return NULL;
    void *val = m->slots[i].val;
    free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->size--;
    /* Backward-shift: pull later members of the probe run into the hole so lookups never need
     * tombstones. An entry at j may move to the hole i only if its home slot is not inside the
     * cyclic range (i, j]. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key)
            break;
        size_t home = (size_t)hash_str(m->slots[j].key) & mask;
        bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (in_range)
            continue;
        m->slots[i] = m->slots[j];
        m->tags[i] = m->tags[j];
        m->slots[j].key = NULL;
        i = j;
    }
    return val;
}

bool kc_map_next(const kc_map *m, size_t *pos, const char **key, void **val)
{
    if (!m || !pos)
        return false;
    while (*pos < m->cap) {
        size_t i = (*pos)++;
        if (m->slots[i].key) {
            if (key)
                *key = m->slots[i].key;
            if (val)
                *val = m->slots[i].val;
            return true;
        }
    }
    return false;
}
