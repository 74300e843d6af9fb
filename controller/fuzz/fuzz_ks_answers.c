/* Fuzz target: what kubesim's kubelet takes from nodesim: the body of an answers PUT
 * (ks_answers_parse) and an init container's answer (ks_answer_init_parse). A body is accepted
 * with every answer a string under a known key, or refused with a message naming the field; an
 * answer is ok, an exit code in 1..255 with its text, or still waiting. Input: arbitrary bytes,
 * tried as both. Needs kubesim_core linked in. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ks_kubelet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    json_t *doc = NULL;
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = ks_answers_parse((const char *)data, size, &doc, &err);
    if (rc == KC_OK) {
        const char *key = json_string_value(json_object_get(doc, "key"));
        const json_t *ans = json_object_get(doc, "answers");
        if (!key || (strcmp(key, "nodesim.io/init") && strcmp(key, "nodesim.io/probes")) ||
            !json_is_object(ans) || !json_string_value(json_object_get(doc, "uid")))
            abort();
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)ans, k, v) if (!json_is_string(v)) abort();
    } else if (doc || rc != KC_EBADREQUEST || strncmp(err.msg, "answers: ", 9) != 0) {
        abort();
    }
    json_decref(doc);
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int code = 0;
    char msg[64];
    int r = ks_answer_init_parse(text, &code, msg, sizeof(msg));
    if (r == 1 && strcmp(text, "ok") != 0)
        abort();
    if (r == -1 && (code < 1 || code > 255 || strncmp(text, "exit ", 5) != 0))
        abort();
    if (r < -1 || r > 1)
        abort();
    free(text);
    return 0;
}
