/* Fuzz target: label selector parsing (string and JSON forms), canonical round trip, matching. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_selector.h"

static json_t *label_sets[4];

static void init_labels(void)
{
    if (label_sets[0])
        return;
    label_sets[0] = json_object();
    label_sets[1] = json_pack("{s:s, s:s, s:s}", "a", "b", "k", "", "x.io/y", "1");
    label_sets[2] = json_pack("{s:s, s:s, s:i}", "a", "c", "env", "prod", "n", 1);
    label_sets[3] = json_pack("{s:s, s:s}", "in", "notin", "k", "v");
}

/* The canonical string must read back to the same selector, matching the same label sets. */
static void check_round_trip(const kc_label_selector *sel)
{
    char *s = kc_label_selector_string(sel);
    if (!s)
        return;
    kc_label_selector *again = NULL;
    kc_err err = {0};
    if (kc_label_selector_parse(s, &again, &err) != KC_OK)
        abort();
    char *s2 = kc_label_selector_string(again);
    if (s2 && strcmp(s, s2) != 0)
        abort();
    for (size_t i = 0; i < sizeof(label_sets) / sizeof(label_sets[0]); i++)
        if (kc_label_selector_matches(sel, label_sets[i]) !=
            kc_label_selector_matches(again, label_sets[i]))
            abort();
    if (kc_label_selector_empty(sel) != (s[0] == '\0'))
        abort();
    free(s2);
    free(s);
    kc_label_selector_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_labels();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    kc_label_selector *sel = NULL;
    kc_err err = {0};
    if (kc_label_selector_parse(text, &sel, &err) == KC_OK) {
        check_round_trip(sel);
        kc_label_selector_free(sel);
    } else if (err.code != KC_EPARSE && err.code != KC_ENOMEM) {
        abort();
    }
    /* The same bytes as a JSON LabelSelector. */
    json_t *js = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (js) {
        sel = NULL;
        if (kc_label_selector_from_json(js, &sel, &err) == KC_OK) {
            check_round_trip(sel);
            kc_label_selector_free(sel);
        }
        json_decref(js);
    }
    free(text);
    return 0;
}
