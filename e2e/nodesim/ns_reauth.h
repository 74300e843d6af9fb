/* ns_reauth: nodesim's bearer token kept in step with its kubeconfig. A kubeconfig with a static
 * token is turned into a private token file (the client library reads a token file again when it
 * changes); a thread watches the kubeconfig and, when kubesim wrote it again with another token
 * (its state directory was reset), writes the new token there, so the clients authenticate again
 * on their next retry instead of staying Unauthorized. */
#ifndef NS_REAUTH_H
#define NS_REAUTH_H

#include "kc_config.h"
#include "kc_error.h"

typedef struct ns_reauth ns_reauth;

/* Changes cfg (its static token becomes a token file) and starts watching cfg->source every
 * period_ms. *out is NULL (and cfg unchanged) when cfg has no static token or no kubeconfig file:
 * nothing to keep in step. */
kc_code ns_reauth_start(kc_config *cfg, long period_ms, ns_reauth **out, kc_err *err);
/* Checks the kubeconfig once (the thread's step; tests call it). True when the token changed. */
bool ns_reauth_check(ns_reauth *r);
/* Stops the thread and removes the token file. NULL is a no-op. */
void ns_reauth_stop(ns_reauth *r);

#endif
