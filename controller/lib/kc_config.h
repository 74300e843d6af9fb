/* kc_config: where the API server is and how to authenticate (kubeconfig or in-cluster). */
#ifndef KC_CONFIG_H
#define KC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

typedef struct kc_config {
    char *server; /* "https://host:port" (no trailing slash) */
    char *ca_pem; /* CA bundle in PEM (from certificate-authority or -data), or NULL */
    size_t ca_pem_len;
    bool insecure_skip_tls_verify;
    char *tls_server_name; /* optional SNI / verification name override */
    char *token;           /* static bearer token, or NULL */
    char *token_file;      /* bearer token file, re-read when it changes, or NULL */
    char *client_cert_pem; /* client certificate PEM, or NULL */
    size_t client_cert_pem_len;
    char *client_key_pem; /* client key PEM, or NULL */
    size_t client_key_pem_len;
    char *namespace_; /* default namespace ("default" when unset) */
    char *context;    /* context used (NULL in-cluster) */
    char *source;     /* the file it came from, or "in-cluster" */
} kc_config;

/* Loads a kubeconfig. path: an explicit file (the --kubeconfig flag), or NULL for $KUBECONFIG
 * (a ':'-separated list merged first-wins, as kubectl does) or else ~/.kube/config. context:
 * NULL for current-context. Relative file paths resolve against the kubeconfig's directory; the
 * -data fields are base64. Errors name the file, the context and the field. On success *out is
 * a new config the caller frees with kc_config_free (true of every loader below). exec and
 * auth-provider plugins, basic auth and impersonation are refused as not supported. */
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
