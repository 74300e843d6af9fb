/* fuzz_httpd_request: arbitrary bytes as what a client sends the metrics and health endpoint
 * (kc_httpd): the request head is found, parsed in place, and its path routed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_httpd_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The server holds at most 8 KiB of request head. */
    if (size > 8192)
        return 0;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    size_t head_len = 0, path_len = 0;
    const char *method = NULL, *path = NULL;
    bool close = false;
    int rc = kc__httpd_parse_request(buf, size, &head_len, &method, &path, &path_len, &close);
    if (head_len > size)
        __builtin_trap();
    if (rc == 0) {
        /* A routed path starts with '/' and lies inside the head, or is the "/" of an
         * absolute-form target that names no path ("http://host"). */
        bool inside = path >= buf && path + path_len <= buf + head_len;
        if (!method || !*method || !path || !path_len || path[0] != '/' ||
            (!inside && path_len != 1))
            __builtin_trap();
    } else if (rc != -1 && rc != 400 && rc != 505) {
        __builtin_trap();
    } else if (rc == -1 && head_len) {
        __builtin_trap();
    }
    free(buf);
    return 0;
}
