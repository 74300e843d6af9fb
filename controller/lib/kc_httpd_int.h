/* kc_httpd_int: the request-head parsing of kc_httpd, exposed for its fuzz target. */
#ifndef KC_HTTPD_INT_H
#define KC_HTTPD_INT_H

#include <stdbool.h>
#include <stddef.h>

/* Parses buf[0..len) as the server does with bytes received on a connection: finds the end of
 * the first request head (0 in *head_len while incomplete), then parses it in place. Returns 0
 * with the method, the routed path (query removed, not NUL-terminated: *path_len bytes) and
 * whether the connection closes afterwards; or the status the server rejects it with (400, 505);
 * or -1 when the head is incomplete. */
int kc__httpd_parse_request(char *buf, size_t len, size_t *head_len, const char **method,
                            const char **path, size_t *path_len, bool *close);

#endif
