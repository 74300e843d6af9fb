/* Fuzz target: kubesim's structural-schema handling of custom objects: validation, pruning and
 * defaults (ks_crd_validate, ks_crd_prune, ks_crd_default) on an arbitrary schema and object.
 * Input: "<schema JSON>\n---\n<object JSON>", or just an object checked against a fixed schema.
 * Needs kubesim_core linked in (see the kubesim fuzz build). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"
#include "ks_crd.h"
#include "ks_sim.h"

static const char FIXED_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"required\":[\"a\"],"
    "\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\",\"y\"],\"default\":\"x\"},"
    "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},\"p\":{\"type\":\"string\","
    "\"pattern\":\"^[a-z]+\\\\d*$\",\"maxLength\":8},\"l\":{\"type\":\"array\",\"maxItems\":3,"
    "\"items\":{\"type\":\"object\",\"properties\":{\"k\":{\"x-kubernetes-int-or-string\":true}}}"
    "},\"m\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}},\"free\":{"
    "\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true},\"o\":{\"type\":"
    "\"object\",\"nullable\":true,\"properties\":{\"d\":{\"type\":\"boolean\",\"default\":"
    "false}}}}}}}";

static json_t *fixed_schema;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    if (!fixed_schema && !(fixed_schema = json_loads(FIXED_SCHEMA, 0, NULL)))
        abort();
    const char *text = (const char *)data;
    const char *sep = NULL;
    for (size_t i = 0; i + 5 <= size && !sep; i++)
        if (memcmp(text + i, "\n---\n", 5) == 0)
            sep = text + i;
    json_t *schema = NULL, *obj = NULL;
    if (sep) {
        schema = json_loadb(text, (size_t)(sep - text), 0, NULL);
        obj = json_loadb(sep + 5, size - (size_t)(sep + 5 - text), 0, NULL);
    } else {
        schema = json_incref(fixed_schema);
        obj = json_loadb(text, size, 0, NULL);
    }
    if (!json_is_object(schema) || !json_is_object(obj))
        goto out;

    /* Validation reports 422s with causes, and the full message extends kc_err's. */
    kc_err err = {0};
    kc_code rc = ks_crd_validate(schema, obj, &err);
    if (rc == KC_EINVALID) {
        json_t *causes = ks_admit_causes(&err);
        const char *full = ks_admit_message(&err);
        if (!json_array_size(causes) || strncmp(full, err.msg, strlen(err.msg)) != 0)
            abort();
        json_decref(causes);
    } else if (rc != KC_OK && rc != KC_ENOMEM) {
        abort();
    }

    /* Pruning is idempotent; defaulting is idempotent. */
    json_t *pruned = json_deep_copy(obj);
    json_t *paths = json_array();
    size_t n = ks_crd_prune(schema, pruned, paths);
    if (n != json_array_size(paths) || ks_crd_prune(schema, pruned, NULL) != 0)
        abort();
    ks_crd_default(schema, pruned);
    json_t *again = json_deep_copy(pruned);
    ks_crd_default(schema, again);
    if (!json_equal(pruned, again))
        abort();
    kc_err e2 = {0};
    rc = ks_crd_validate(schema, again, &e2);
    if (rc != KC_OK && rc != KC_EINVALID && rc != KC_ENOMEM)
        abort();
    json_decref(again);
    json_decref(paths);
    json_decref(pruned);
out:
    json_decref(schema);
    json_decref(obj);
    return 0;
}
