/* kc_map: a string-keyed hash table (open addressing) for informer caches and work queues. */
#ifndef KC_MAP_H
#define KC_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

/* Keys are copied into the map and owned by it; values are opaque non-NULL pointers owned by the
 * caller (kc_map_free can release them through a callback). Not thread-safe: callers lock. */
typedef struct kc_map kc_map;

/* Returns an empty map, or NULL when out of memory. */
kc_map *kc_map_new(void);
/* Frees the map and its keys; calls free_val on every value when non-NULL. Accepts NULL. */
void kc_map_free(kc_map *m, void (*free_val)(void *val));

size_t kc_map_size(const kc_map *m);
/* The value stored under key, or NULL when absent. */
void *kc_map_get(const kc_map *m, const char *key);
/* Stores val (must be non-NULL) under key. When the key was present its previous value is
 * replaced and handed back through *old (NULL otherwise); when old is NULL the caller must know
 * the value needs no release. Returns KC_ENOMEM (map unchanged) or KC_EARG for a NULL val. */
kc_code kc_map_put(kc_map *m, const char *key, void *val, void **old);
/* Removes key; returns its value (now owned by the caller) or NULL when absent. */
void *kc_map_remove(kc_map *m, const char *key);

/* Iteration in unspecified order: start with *pos = 0 and call until it returns false. The map
 * must not be modified during an iteration. key and val may be NULL. */
bool kc_map_next(const kc_map *m, size_t *pos, const char **key, void **val);

#endif
