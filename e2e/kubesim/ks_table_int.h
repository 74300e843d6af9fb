/* ks_table_int: helpers shared by ks_table.c and ks_table_cells.c (Table cells). */
#ifndef KS_TABLE_INT_H
#define KS_TABLE_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* The API machinery's HumanDuration of secs ("2m5s", "3h", "5d4h"), into buf. */
const char *ks_human_duration(char *buf, size_t size, long long secs);
/* Parses "2024-01-02T03:04:05Z" (fractions and numeric offsets accepted). */
bool ks_parse_rfc3339(const char *s, time_t *out);
/* The first result of a JSONPath, borrowed from *holder (which the caller json_decref's), or
 * NULL. */
const json_t *ks_jsonpath_first(const json_t *obj, const char *path, json_t **holder);
/* One cell of a row: the printer column col (see ks_types.h) evaluated on obj. New reference
 * (json null when empty). */
json_t *ks_table_cell(const json_t *col, const json_t *obj, time_t now);
/* A computed column ("pod.status", "map:.spec.selector", ... without the '@'): a new reference,
 * or NULL for an unknown name (the cell is then null or the column's default). */
json_t *ks_table_computed(const char *name, const json_t *obj, time_t now);

#endif
