/* tproxy: an HTTP CONNECT proxy on 127.0.0.1 for client tests: tunnels each connection to the
 * host:port its CONNECT names and counts the tunnels. */
#ifndef TPROXY_H
#define TPROXY_H

typedef struct tproxy tproxy;

/* Starts the proxy on an ephemeral port; NULL on failure. */
tproxy *tproxy_start(void);
/* "http://127.0.0.1:PORT". */
const char *tproxy_url(const tproxy *p);
/* Tunnels opened so far, and the target of the last one ("host:port"; "" when none). */
int tproxy_tunnels(tproxy *p, char *last, unsigned long size);
/* Stops accepting, ends the tunnels, frees. */
void tproxy_stop(tproxy *p);

#endif
