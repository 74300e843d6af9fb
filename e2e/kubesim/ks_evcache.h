/* ks_evcache: each watch event's object serialized once for every watcher (ks_evcache.c). */
#ifndef KS_EVCACHE_H
#define KS_EVCACHE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ks_evcache ks_evcache;

ks_evcache *ks_evcache_new(void);
void ks_evcache_free(ks_evcache *c);
/* The text stored for (src, key) as a new NUL-terminated string (*len its length), or NULL. src is
 * a store object (ks_event.src) the caller holds a reference to; key says how it was presented. */
char *ks_evcache_get(ks_evcache *c, const json_t *src, const char *key, size_t *len);
/* Stores text for (src, key), replacing whatever shared its slot; takes its own reference to src.
 * Failing to store (out of memory) only costs the next watcher a serialization. */
void ks_evcache_put(ks_evcache *c, json_t *src, const char *key, const char *text, size_t len);
/* Lookups that found their text, and those that did not (tests, diagnostics). */
void ks_evcache_stats(ks_evcache *c, uint64_t *hits, uint64_t *misses);

#endif
