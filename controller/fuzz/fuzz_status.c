/* Fuzz target: decoding of arbitrary API error bodies (kc_status_decode) and escaping of arbitrary
 * path segments and query values (kc_rest_path, kc_rest_list_query). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_client.h"
#include "kc_rest.h"

static size_t count(const char *s, char c)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int statuses[] = {0, 200, 404, 409, 410, 429, 500, 503, 999};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        kc_err err;
        kc_code rc = kc_status_decode(statuses[i], (const char *)data, size, &err);
        /* Status 0 (no HTTP status) takes the code from the body, which may say 2xx. */
        if (rc != err.code || (statuses[i] && (statuses[i] == 200) != (rc == KC_OK)) ||
            (rc != KC_OK && (!err.msg[0] || !err.reason[0])))
            abort();
    }
    /* Segments and query values can never add structure to a path. */
    char *seg = malloc(size + 1);
    if (!seg)
        return 0;
    memcpy(seg, data, size);
    seg[size] = '\0';
    char *p = kc_rest_path(&KC_RES_LEASES, seg, seg, seg);
    if (p) {
        size_t want =
            seg[0] ? 8 : 4; /* /apis/G/V/namespaces/NS/leases/NAME/SUB or /apis/G/V/leases */
        if (count(p, '/') != want || strchr(p, '?') || strchr(p, '&'))
            abort();
        kc_list_opts o = {.label_selector = seg, .field_selector = seg, .continue_token = seg};
        char *q = kc_rest_list_query(p, &o, true, true, 5);
        if (q && (count(q, '?') != 1 || count(q, '&') != (seg[0] ? 5 : 2) || count(q, '/') != want))
            abort();
        free(q);
    }
    free(p);
    free(seg);
    return 0;
}
