/* ks_evcache: the JSON of one watch event's object, serialized once for all the watchers it goes
 * to. Every watcher of an event gets a copy of the same store object (ks_event.src); the text a
 * watcher sends depends only on that object and on how its route presents it (apiVersion,
 * kind), so the first watcher's serialization serves the others. A slot holds a reference to
 * its object, so no other object can take that address while the slot can still match it. */
#include "ks_evcache.h"

#include "kc_map.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events in flight to lagging watchers at once; the oldest entry goes first. */
#define ENTRIES 512

typedef struct entry {
    json_t *src;
    char *id; /* "<src address>\x1f<key>": the map's key */
    char *text;
    size_t len;
} entry;

struct ks_evcache {
    pthread_mutex_t mu;
    kc_map *idx; /* id → entry in ring */
    entry ring[ENTRIES];
    size_t next; /* the ring slot the next new entry takes */
    uint64_t hits, misses;
};

ks_evcache *ks_evcache_new(void)
{
    ks_evcache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->idx = kc_map_new();
    if (!c->idx) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void entry_clear(entry *e)
{
    json_decref(e->src);
    free(e->id);
    free(e->text);
    memset(e, 0, sizeof(*e));
}

void ks_evcache_free(ks_evcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < ENTRIES; i++)
        entry_clear(&c->ring[i]);
    kc_map_free(c->idx, NULL);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The map key of (src, key), a new string. The address is unique while an entry holds src. */
static char *id_of(const json_t *src, const char *key)
{
    char *id = NULL;
    return asprintf(&id, "%p\x1f%s", (const void *)src, key) < 0 ? NULL : id;
}

char *ks_evcache_get(ks_evcache *c, const json_t *src, const char *key, size_t *len)
{
    char *id = c && src && key ? id_of(src, key) : NULL;
    if (!id)
        return NULL;
    char *out = NULL;
    pthread_mutex_lock(&c->mu);
    const entry *e = kc_map_get(c->idx, id);
    if (e && (out = malloc(e->len + 1)) != NULL) {
        memcpy(out, e->text, e->len + 1);
        *len = e->len;
    }
    if (out)
        c->hits++;
    else
        c->misses++;
    pthread_mutex_unlock(&c->mu);
    free(id);
    return out;
}

void ks_evcache_put(ks_evcache *c, json_t *src, const char *key, const char *text, size_t len)
{
    if (!c || !src || !key || !text)
        return;
    entry n = {.src = src, .id = id_of(src, key), .text = malloc(len + 1), .len = len};
    if (!n.id || !n.text) {
        free(n.id);
        free(n.text);
        return; /* the next watcher serializes again: only time is lost */
    }
    memcpy(n.text, text, len);
    n.text[len] = '\0';
    json_incref(src);
    entry old = {0};
    pthread_mutex_lock(&c->mu);
    if (kc_map_get(c->idx, n.id)) {
        /* Another watcher stored it meanwhile: keep that one. */
        old = n;
    } else {
        entry *e = &c->ring[c->next];
        if (e->id)
            kc_map_remove(c->idx, e->id);
        old = *e;
        *e = n;
        if (kc_map_put(c->idx, e->id, e, NULL) != KC_OK) {
            *e = (entry){0};
            entry_clear(&old);
            old = n;
        } else {
            c->next = (c->next + 1) % ENTRIES;
        }
    }
    pthread_mutex_unlock(&c->mu);
    entry_clear(&old); /* its object may be freed here: outside the lock */
}

void ks_evcache_stats(ks_evcache *c, uint64_t *hits, uint64_t *misses)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}
