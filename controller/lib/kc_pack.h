/* kc_pack: a compact binary form of JSON values, for caches holding many objects of one shape.
 *
 * A record is a tagged tree in which object keys and strings that recur are replaced by small
 * numbers into a dictionary shared by every record of the cache, and the strings Kubernetes
 * fills objects with are stored in binary: UIDs in 16 bytes, RFC 3339 UTC timestamps with
 * second precision and decimal strings (resourceVersions) as variable-length integers. A pod
 * trimmed for the operator, ~700 bytes of compact JSON text, packs into about a quarter of that.
 * Decoding gives back a value json_equal to the one encoded, with object members in the same
 * order and every string byte for byte.
 *
 * The dictionary only grows: a string enters it when a second object holds it (an object is
 * told by metadata.uid, else its namespace and name; keys enter at once), up to the size given
 * at creation; after that new strings stay inline in their records, so
 * churn costs memory only up to that bound. Encoding is serialized by a lock; decoding takes
 * none and may run on any thread alongside an encode. */
#ifndef KC_PACK_H
#define KC_PACK_H

#include <jansson.h>
#include <stddef.h>

#include "kc_informer.h"

/* The largest dictionary (string ids then fit in three bytes) and the deepest value (jansson's
 * own parser limit, so anything it parsed can be packed). */
#define KC_PACK_DICT_MAX  65536
#define KC_PACK_MAX_DEPTH 2048

typedef struct kc_pack_dict kc_pack_dict;

/* A dictionary of at most max_entries strings (clamped to 1..KC_PACK_DICT_MAX); NULL when out of
 * memory. */
kc_pack_dict *kc_pack_dict_new(size_t max_entries);
/* Accepts NULL. Records encoded with the dictionary cannot be decoded afterwards. */
void kc_pack_dict_free(kc_pack_dict *d);
/* Strings in the dictionary, and the heap they take (entries, index and candidate table). */
size_t kc_pack_dict_entries(const kc_pack_dict *d);
size_t kc_pack_dict_bytes(const kc_pack_dict *d);

/* Packs v into a new buffer (release with free) of *len bytes. NULL when out of memory or when v
 * nests deeper than KC_PACK_MAX_DEPTH. */
unsigned char *kc_pack_encode(kc_pack_dict *d, const json_t *v, size_t *len);

/* Unpacks a record made by kc_pack_encode with the same dictionary. A malformed record
 * (truncated, trailing bytes, an unknown tag, a dictionary id out of range, a string that is
 * not UTF-8, too deep) gives NULL with the reason and its byte offset in why (which may be
 * NULL); so does running out of memory. */
json_t *kc_pack_decode(const kc_pack_dict *d, const unsigned char *rec, size_t len, char *why,
                       size_t whylen);

/* An informer codec over d: each record is its length followed by the packed object. d must
 * outlive the informers using the codec. */
kc_informer_codec kc_pack_codec(kc_pack_dict *d);

#endif
