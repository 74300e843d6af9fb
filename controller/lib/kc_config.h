/* kc_config: where the API server is and how to authenticate (kubeconfig or in-cluster). */
#ifndef KC_CONFIG_H
#define KC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "kc_exec.h"

typedef struct kc_config {
    char *server; /* "https://host:port" (no trailing slash) */
    char *ca_pem; /* CA bundle in PEM (from certificate-authority or -data), or NULL */
    size_t ca_pem_len;
    bool insecure_skip_tls_verify;
    char *tls_server_name; /* optional SNI / verification name override */
    /* The cluster's proxy-url: "http://", "https://" or "socks5://" (any case) and a host, or NULL.
     * As in client-go, it replaces the proxy environment variables for this cluster; socks5
     * resolves the API server's name through the proxy (libcurl calls that scheme socks5h). */
    char *proxy_url;
    /* The cluster's disable-compression: the client then sends no Accept-Encoding (it asks for
     * gzip otherwise); also passed on to exec plugins. */
    bool disable_compression;
    char *token;           /* static bearer token, or NULL */
    char *token_file;      /* bearer token file, re-read when it changes, or NULL */
    char *client_cert_pem; /* client certificate PEM, or NULL */
    size_t client_cert_pem_len;
    char *client_key_pem; /* client key PEM, or NULL */
    size_t client_key_pem_len;
    /* The files ca_pem, client_cert_pem and client_key_pem were read from (absolute paths), or
     * NULL for inline -data fields: the client reads them again when they change on disk
     * (rotated certificates, a renewed service-account CA). */
    char *ca_file;
    char *client_cert_file;
    char *client_key_file;
    /* The user's exec credential plugin, or NULL; run with kc_exec_run (kc_exec.h says when). Its
     * cluster fields are filled from this config's cluster. Never set together with token,
     * token_file or the client certificate. */
    kc_exec_config *exec;
    char *namespace_; /* default namespace ("default" when unset) */
    char *context;    /* context used (NULL in-cluster) */
    char *source;     /* the file it came from, or "in-cluster" */
} kc_config;

/* Loads a kubeconfig. path: an explicit file (the --kubeconfig flag), or NULL for $KUBECONFIG
 * (a ':'-separated list merged first-wins, as kubectl does) or else ~/.kube/config. context:
 * NULL for current-context. Relative file paths resolve against the kubeconfig's directory; the
 * -data fields are base64. Errors name the file, the context and the field. On success *out is
 * a new config the caller frees with kc_config_free (true of every loader below).
 * Every field is read or refused by name, never ignored: auth-provider plugins, basic auth and
 * impersonation are refused as not supported, and so is any field the loader does not know, at
 * the top level and in the clusters, users and contexts entries it uses. Only `preferences` (of
 * kubectl's own display) and `extensions` (ignorable by definition) are skipped; the one
 * extension client-go reads, a cluster's "client.authentication.k8s.io/exec", goes to the exec
 * plugin. An exec command with a '/' that is relative resolves against the kubeconfig's
 * directory, as kubectl does; nothing is run while loading. */
kc_code kc_config_load_kubeconfig(const char *path, const char *context, kc_config **out,
                                  kc_err *err);

/* Loads the in-cluster config: KUBERNETES_SERVICE_HOST/PORT and the service-account token (as a
 * token_file, so rotations are picked up), ca.crt and namespace under root (NULL or "" → the
 * directory in $KC_INCLUSTER_ROOT when set and non-empty, as kubesim's local pods have it, else
 * "/var/run/secrets/kubernetes.io/serviceaccount"). */
kc_code kc_config_load_incluster(const char *root, kc_config **out, kc_err *err);

/* The operator's order: explicit --kubeconfig path, then $KUBECONFIG, then in-cluster when
 * KUBERNETES_SERVICE_HOST is set (from $KC_INCLUSTER_ROOT when set, see above), then
 * ~/.kube/config. */
kc_code kc_config_load_default(const char *kubeconfig_flag, const char *context, kc_config **out,
                               kc_err *err);

/* Resolves a kubeconfig held in memory, as kc_config_load_kubeconfig does for one file. name is
 * the file it came from (NULL: "<memory>" in the current directory): it labels messages and
 * anchors relative paths. Files the kubeconfig names are read (only regular files). */
kc_code kc_config_parse_kubeconfig(const char *buf, size_t len, const char *name,
                                   const char *context, kc_config **out, kc_err *err);

/* Deep copy (NULL on allocation failure). */
kc_config *kc_config_dup(const kc_config *cfg);
void kc_config_free(kc_config *cfg);

#endif
