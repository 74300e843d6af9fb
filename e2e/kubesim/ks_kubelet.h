/* ks_kubelet: internals of kubesim's simulated kubelet, shared by ks_kubelet*.c and ks_proc.c.
 * The public entry points are in ks_sim.h; the tuning call below is for main.c and tests. */
#ifndef KS_KUBELET_H
#define KS_KUBELET_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kc_error.h"
#include "kc_map.h"
#include "ks_sim.h"
#include "ks_store.h"

/* Knobs that ks_opts does not carry. Defaults: grace_cap_ms 1000 (a deleted pod is removed after
 * min(deletionGracePeriodSeconds, this)), backoff_ms 1000 doubling up to backoff_max_ms 30000
 * (restart back-off of crashed mapped containers), log_cap 1 MiB per container. */
typedef struct ks_kubelet_tuning {
    int grace_cap_ms;
    int backoff_ms;
    int backoff_max_ms;
    size_t log_cap;
} ks_kubelet_tuning;
/* Applies t (values <= 0 keep the current setting). Call after ks_kubelet_start. */
void ks_kubelet_tune(ks_sim *sim, const ks_kubelet_tuning *t);
/* Whether the kubelet records Pulled/Created/Started/Killing/BackOff/Unhealthy Events (default
 * on; a 20,000-pod benchmark may turn them off to keep the store small). */
void ks_kubelet_set_events(ks_sim *sim, bool on);

/* ---- internals ---- */

/* One entry of the image map file:
 *   images:
 *   - image: "ghcr.io/x/gpu-operator*"   # fnmatch(3) glob on the container's image
 *     program: /abs/path/to/bin         # absolute path of the local program to run
 *     args_prefix: ["--flag"]           # inserted right after the program (optional)
 *     env: {KEY: value}                 # extra environment (optional) */
typedef struct ks_image_map_entry {
    char *pattern;
    char *program;
    char **args_prefix; /* NULL-terminated */
    char **env;         /* NULL-terminated "KEY=value" */
} ks_image_map_entry;

typedef struct ks_image_map {
    ks_image_map_entry *entries;
    size_t n;
} ks_image_map;

/* Parses the image map file (see above). KC_EPARSE/KC_EINVALID naming the file and the entry. */
kc_code ks_image_map_load(const char *path, ks_image_map *out, kc_err *err);
void ks_image_map_free(ks_image_map *m);
/* The first entry whose pattern matches image, or NULL. */
const ks_image_map_entry *ks_image_map_match(const ks_image_map *m, const char *image);

/* Resolves a container's environment as the kubelet does: env (value, $(VAR) references to
 * earlier entries, valueFrom fieldRef / resourceFieldRef / secretKeyRef / configMapKeyRef) after
 * envFrom, plus the entry's extra env and the in-cluster variables. *out is a NULL-terminated
 * malloc'd array of malloc'd "KEY=value" strings (free with ks_proc_strv_free). A missing
 * non-optional Secret/ConfigMap or key → KC_ENOTFOUND with the kubelet's message
 * (`secret "x" not found`, `couldn't find key k in Secret ns/x`). */
kc_code ks_proc_build_env(ks_sim *sim, const json_t *pod, const json_t *container,
                          const ks_image_map_entry *map, const char *sa_root, char ***out,
                          kc_err *err);
/* argv for a mapped container: program, args_prefix, command[1:] (when command is set), args,
 * with $(VAR) expanded from env. NULL-terminated, free with ks_proc_strv_free. */
char **ks_proc_build_argv(const json_t *container, const ks_image_map_entry *map, char **env);
void ks_proc_strv_free(char **v);
/* Expands $(NAME) from env ("KEY=value" list) as Kubernetes does: $$ → $, unknown kept. */
char *ks_proc_expand(const char *s, char *const *env);

/* Writes <dir>/pods/<ns>_<pod>/serviceaccount/{token,ca.crt,namespace}; *root malloc'd. */
kc_code ks_proc_write_sa(ks_sim *sim, const json_t *pod, char **root, kc_err *err);

/* Probe of a mapped container (httpGet / tcpSocket on 127.0.0.1 unless host is given; exec is
 * counted as success since there is no container to exec in). Blocking; run it off the loop.
 * Returns true on success. */
typedef struct ks_probe_spec {
    int kind; /* 0 none, 1 http, 2 tcp, 3 exec */
    char host[256];
    int port;
    char path[1024];
    bool https;
    int initial_delay_s, period_s, timeout_s, success_threshold, failure_threshold;
} ks_probe_spec;
/* Fills spec from a probe object of container (NULL probe → kind 0). */
void ks_probe_parse(const json_t *probe, const json_t *container, ks_probe_spec *spec);
bool ks_probe_run(const ks_probe_spec *spec);

/* 64 lowercase hex chars of sha256(a "/" b decimal(n)) plus a NUL. */
void ks_proc_hash_hex(const char *a, const char *b, int n, char out[65]);
/* "<image without tag>@sha256:<hash of the image string>", the imageID a runtime reports. */
void ks_proc_image_id(const char *image, char *buf, size_t size);
/* "containerd://<64 hex>" derived from the pod uid, container name and restart count. */
void ks_proc_container_id(const char *uid, const char *name, int restarts, char *buf, size_t size);

/* CPU / memory quantity helpers for resourceFieldRef and extended resources. */
bool ks_quantity_parse(const char *s, double *out);

/* ---- logs (ks_kubelet_log.c) ---- */
typedef struct ks_kl_logs ks_kl_logs;
ks_kl_logs *ks_kl_logs_new(const char *dir, size_t cap);
void ks_kl_logs_free(ks_kl_logs *l);
void ks_kl_logs_set_cap(ks_kl_logs *l, size_t cap);
void ks_kl_logs_append(ks_kl_logs *l, const char *ns, const char *pod, const char *container,
                       const char *text, size_t len);
/* Copies a container's log (tail_lines < 0: all); false when nothing was ever logged. */
bool ks_kl_logs_get(ks_kl_logs *l, const char *ns, const char *pod, const char *container,
                    long tail_lines, char **out, size_t *len);
/* Forgets every container log of a pod (its files stay on disk). */
void ks_kl_logs_drop_pod(ks_kl_logs *l, const char *ns, const char *pod);

#endif
