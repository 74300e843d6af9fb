/* Fuzz target: field selector parsing, escaping round trip and matching by dotted path. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_selector.h"

static json_t *objects[2];

static void init_objects(void)
{
    if (objects[0])
        return;
    objects[0] = json_loads("{\"metadata\":{\"name\":\"p,1\",\"namespace\":\"n=s\"},"
                            "\"spec\":{\"nodeName\":\"a\\\\b\",\"replicas\":3,\"on\":true},"
                            "\"status\":{\"phase\":\"Running\",\"x\":null,\"l\":[1]}}",
                            0, NULL);
    objects[1] = json_object();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_objects();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    kc_field_selector *sel = NULL;
    kc_err err = {0};
    if (kc_field_selector_parse(text, &sel, &err) != KC_OK) {
        if (err.code != KC_EPARSE && err.code != KC_ENOMEM)
            abort();
        free(text);
        return 0;
    }
    /* Every term is reachable and the canonical string reads back to the same selector. */
    for (size_t i = 0; i < kc_field_selector_count(sel); i++) {
        const char *f, *v;
        kc_field_op op;
        if (!kc_field_selector_term(sel, i, &f, &op, &v) || !f[0])
            abort();
    }
    static const char *const supported[] = {"metadata.name", "spec.nodeName", NULL};
    const char *bad = kc_field_selector_unsupported(sel, supported);
    if (bad && strcmp(bad, "metadata.name") == 0)
        abort();
    char *s = kc_field_selector_string(sel);
    if (s) {
        kc_field_selector *again = NULL;
        if (kc_field_selector_parse(s, &again, &err) != KC_OK)
            abort();
        char *s2 = kc_field_selector_string(again);
        if (s2 && strcmp(s, s2) != 0)
            abort();
        for (size_t i = 0; i < 2; i++)
            if (kc_field_selector_matches(sel, objects[i]) !=
                kc_field_selector_matches(again, objects[i]))
                abort();
        free(s2);
        kc_field_selector_free(again);
        free(s);
    }
    kc_field_selector_free(sel);
    free(text);
    return 0;
}
