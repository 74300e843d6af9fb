/* kc_yaml: YAML (multi-document) to JSON with the Kubernetes reading of scalars. */
#ifndef KC_YAML_H
#define KC_YAML_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

/* Parses every document of a YAML stream into a new JSON array (one element per non-empty
 * document; empty documents and documents holding only a null are skipped, as kubectl does).
 * Scalars follow the YAML 1.1 rules Kubernetes tooling uses: true/false/yes/no/on/off (any of
 * their usual cases) and y/n are booleans, 0755 is octal, 0x1F hex, 1_000 an integer, ~/null/empty
 * are null, quoted scalars always stay strings; anchors, aliases and merge keys (<<) are expanded;
 * non-string keys become strings. Duplicate keys, .inf/.nan and syntax errors are errors whose
 * message gives line and column. `name` (may be NULL) labels the input in messages.
 * On success *docs_out is a new reference the caller must json_decref. */
kc_code kc_yaml_parse(const char *buf, size_t len, const char *name, json_t **docs_out,
                      kc_err *err);

/* As kc_yaml_parse, reading a file; the file name appears in every message. */
kc_code kc_yaml_parse_file(const char *path, json_t **docs_out, kc_err *err);

/* Parses a stream that must hold exactly one document (an empty stream gives an empty object). */
kc_code kc_yaml_parse_one(const char *buf, size_t len, const char *name, json_t **doc_out,
                          kc_err *err);

/* For messages about a parsed document: what a value is ("a string", "a number", "a boolean",
 * "null"; a mapping and a list in YAML's words, else "an object" and "an array"). */
const char *kc_json_kind(const json_t *v, bool yaml_words);

/* The keys of a mapping as "a, b, c" in buf (truncated to whole keys that fit); returns buf. */
const char *kc_yaml_key_list(const json_t *obj, char *buf, size_t size);

/* Sets a KC_EINVALID error "path: message" about a value of a parsed document. */
kc_code kc_yaml_fail(kc_err *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
