/* ks_proto_int.h: the message descriptions shared by kubesim's protobuf decoder (ks_proto.c),
 * encoder (ks_proto_enc.c) and the generated tables (ks_proto_tables.c, written by
 * e2e/protoclient/gen from the k8s.io/api Go types). */
#ifndef KS_PROTO_INT_H
#define KS_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ftype {
    F_STRING,    /* string */
    F_BYTES,     /* bytes ↔ base64 */
    F_INT,       /* int32/int64 varint (pfield.int32: sign-extended 32-bit) */
    F_BOOL,      /* bool varint */
    F_DOUBLE,    /* double, fixed 64 bits */
    F_MSG,       /* embedded message ↔ object */
    F_MAP_STR,   /* map<string,string> */
    F_MAP_BYTES, /* map<string,bytes> ↔ base64 values */
    F_MAP_QTY,   /* map<string, resource.Quantity{string=1}> ↔ string values */
    F_MAP_STRS,  /* map<string, {repeated string items=1}> ↔ arrays of strings */
    F_MAP_MSG,   /* map<string, message> */
    F_TIME,      /* meta.v1.Time {seconds=1, nanos=2} ↔ RFC 3339 */
    F_MICROTIME, /* meta.v1.MicroTime ↔ RFC 3339 with microseconds */
    F_DURATION,  /* meta.v1.Duration {duration=1}: not used by the tables */
    F_QTY,       /* resource.Quantity {string=1} ↔ string */
    F_INTSTR,    /* util.intstr.IntOrString {type=1, intVal=2, strVal=3} ↔ number or string */
    F_RAW,       /* RawExtension / FieldsV1 / JSON {raw=1}: raw JSON text ↔ any JSON value */
} ftype;

/* The JSON form of a message: an object, or one of apiextensions' either-or types. */
typedef enum pshape {
    SHAPE_OBJECT,
    SHAPE_OR_ARRAY, /* JSONSchemaPropsOrArray: {schema=1} ↔ object, {jSONSchemas=2} ↔ array */
    SHAPE_OR_BOOL,  /* JSONSchemaPropsOrBool: {allows=1, schema=2} ↔ bool or object */
    SHAPE_OR_STRINGS, /* JSONSchemaPropsOrStringArray: {schema=1} ↔ object, {property=2} ↔ array */
} pshape;

struct pmsg;

typedef struct pfield {
    uint32_t num;
    const char *json;
    ftype type;
    bool repeated;
    bool ptr;       /* a pointer in Go: on the wire only when set, and set even when zero */
    bool omitempty; /* JSON omits the zero value */
    bool int32;
    bool embed; /* Go's embedded struct, json ",inline": its fields are the parent's in JSON */
    const struct pmsg *msg;
} pfield;

typedef struct pmsg {
    const char *name;
    const pfield *fields; /* by ascending field number */
    size_t n;
    pshape shape;
} pmsg;

typedef struct ks_proto_kind {
    const char *api_version; /* "" for DeleteOptions and WatchEvent: any group */
    const char *kind;
    const struct pmsg *msg;
} ks_proto_kind;

extern const ks_proto_kind KS_PROTO_KINDS[];
extern const size_t KS_PROTO_NKINDS;

/* The message of apiVersion/kind; NULL when kubesim has none. */
const pmsg *ks_proto_msg(const char *api_version, const char *kind);

#endif
