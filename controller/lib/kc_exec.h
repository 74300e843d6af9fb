/* kc_exec: exec credential plugins (a kubeconfig user's `exec`), run as client-go runs them. */
#ifndef KC_EXEC_H
#define KC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "kc_error.h"

#define KC_EXEC_API_V1      "client.authentication.k8s.io/v1"
#define KC_EXEC_API_V1BETA1 "client.authentication.k8s.io/v1beta1"

/* A plugin's stdout larger than this is refused (a credential is a few KiB at most). */
#define KC_EXEC_MAX_OUTPUT (1u << 20)
/* How long a plugin may run when kc_exec_config.timeout_ms is 0. */
#define KC_EXEC_DEFAULT_TIMEOUT_MS 60000u

/* interactiveMode. The operator has no terminal, so the plugin is always told interactive: false;
 * the loader refuses Always (such a plugin cannot work without one). */
typedef enum kc_exec_interactive {
    KC_EXEC_INTERACTIVE_NEVER,
    KC_EXEC_INTERACTIVE_IF_AVAILABLE,
    KC_EXEC_INTERACTIVE_ALWAYS,
} kc_exec_interactive;

typedef struct kc_exec_env {
    char *name; /* non-empty, no '=' */
    char *value;
} kc_exec_env;

/* The cluster fields client-go sends with provideClusterInfo besides the server and the CA, which
 * kc_exec_run takes as arguments. The loader copies them from the context's cluster. */
typedef struct kc_exec_cluster {
    char *tls_server_name; /* or NULL */
    bool insecure_skip_tls_verify;
    char *proxy_url; /* or NULL */
    bool disable_compression;
    /* JSON text of the cluster's extension named "client.authentication.k8s.io/exec" (sent as
     * spec.cluster.config), or NULL. */
    char *config_json;
} kc_exec_cluster;

typedef struct kc_exec_config {
    char *api_version; /* KC_EXEC_API_V1 or KC_EXEC_API_V1BETA1 */
    /* What is run: a path (the loader makes a relative one containing '/' absolute against the
     * kubeconfig's directory, as kubectl does) or a bare name looked up in $PATH. */
    char *command;
    char **args; /* n_args arguments after the command */
    size_t n_args;
    kc_exec_env *env; /* set for the plugin on top of our own environment */
    size_t n_env;
    kc_exec_interactive interactive_mode;
    bool provide_cluster_info;
    char *install_hint; /* shown when the command is not found, or NULL */
    kc_exec_cluster cluster;
    /* Not from the kubeconfig: how long the plugin may run before it is killed, in ms (0: the
     * default above). Tests set it short. */
    unsigned timeout_ms;
} kc_exec_config;

/* A credential a plugin returned. At least one of token and the certificate/key pair is set. */
typedef struct kc_exec_result {
    char *token; /* bearer token, or NULL; never logged */
    char *client_cert_pem;
    size_t client_cert_pem_len;
    char *client_key_pem; /* set exactly when client_cert_pem is */
    size_t client_key_pem_len;
    /* When the credential expires (status.expirationTimestamp), or 0 when the plugin gave none:
     * then it is valid until the server answers 401. A time already past is kept as it is (never
     * 0), so the caller runs the plugin again before the next request. */
    time_t expires;
} kc_exec_result;

/* Runs the plugin and returns its credential in *out (zeroed first; free with
 * kc_exec_result_free). As client-go: the command gets cfg->args, our environment with cfg->env
 * set on top of it and KUBERNETES_EXEC_INFO holding an ExecCredential (apiVersion, kind, spec:
 * interactive false, and spec.cluster {server, certificate-authority-data = base64 of ca_pem
 * (NULL: none), the fields of cfg->cluster} only with provide_cluster_info); stdin is /dev/null,
 * its stderr is ours (plugins print their prompts and diagnostics there), its stdout is read (at
 * most KC_EXEC_MAX_OUTPUT bytes) and parsed as kc_exec_parse_credential does. A plugin that
 * outlives cfg->timeout_ms is killed with SIGKILL; the child is always reaped before returning.
 * Errors name the command (never the arguments, the environment or the output, which may hold
 * secrets): KC_ECONFIG not found or not executable (with the install hint), interactiveMode
 * Always, or an unsupported apiVersion; KC_EIO could not start it, exited with a non-zero status
 * or was killed by a signal (says which); KC_ETIMEDOUT killed after the timeout; KC_EPARSE output
 * too large or not a valid ExecCredential (says where and what); KC_EARG bad arguments.
 *
 * Blocks until the plugin exits (up to the timeout): call it where blocking is allowed. It keeps
 * no state and may run in several threads at once, but must not race with setenv (it copies
 * environ). The contract for the client: run it when a request needs a credential and none is
 * cached; cache the result until `expires` minus a margin (expires 0: no expiry) and reuse it for
 * every request meanwhile, serializing runs so that concurrent requests share one; after a 401
 * answered to a request that used the cached credential, drop it, run the plugin again and retry
 * once. A certificate/key pair that changes needs new TLS connections. */
kc_code kc_exec_run(const kc_exec_config *cfg, const char *server, const char *ca_pem,
                    kc_exec_result *out, kc_err *err);

/* Parses len bytes of a plugin's stdout as an ExecCredential: a JSON object with kind
 * "ExecCredential", apiVersion equal to api_version, and status holding token and/or
 * clientCertificateData plus clientKeyData (PEM; both or neither) and optionally
 * expirationTimestamp (RFC 3339: 2026-11-26T18:00:00Z, with or without fractional seconds, Z or
 * a +hh:mm/-hh:mm offset). Other fields are ignored, as client-go ignores them. On success fills
 * *out (zeroed first); else KC_EPARSE (KC_ENOMEM) with a message saying what is wrong, where (JSON
 * line:column, the field path) and never quoting a credential. */
kc_code kc_exec_parse_credential(const char *buf, size_t len, const char *api_version,
                                 kc_exec_result *out, kc_err *err);

/* Frees what *r holds (the token and key zeroed first) and zeroes *r; accepts NULL. */
void kc_exec_result_free(kc_exec_result *r);

/* Deep copy (NULL on allocation failure or for NULL) and free (accepts NULL). */
kc_exec_config *kc_exec_config_dup(const kc_exec_config *cfg);
void kc_exec_config_free(kc_exec_config *cfg);

/* RFC 3339 date-time to seconds since the epoch; false when s is not one. Exposed for tests. */
bool kc_exec_parse_time(const char *s, time_t *out);

#endif
