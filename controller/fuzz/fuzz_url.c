/* Fuzz target: the check of server URLs from kubeconfigs (kc_url_parse, kc_url_authority). A
 * parsed URL must have a host, a port in range and an authority that fits its buffer; a refusal
 * must say why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    kc_url u;
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = kc_url_parse(s, &u, &err);
    if (rc == KC_OK) {
        char auth[KC_URL_HOST_MAX + 16];
        if (!u.host[0] || u.port < 1 || u.port > 65535 ||
            !kc_url_authority(&u, auth, sizeof(auth)) || !strstr(auth, u.host) ||
            strchr(u.path, '?') || strchr(u.path, '#'))
            abort();
        size_t n = strlen(u.path);
        if (n && u.path[n - 1] == '/')
            abort(); /* the prefix is kept without its trailing '/' */
    } else if (rc != KC_EARG || !err.msg[0]) {
        abort();
    }
    free(s);
    return 0;
}
