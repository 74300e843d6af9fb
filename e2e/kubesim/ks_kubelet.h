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

/* nodesim's answers (ks_kubelet_answers.c). The body of PUT /kubesim/v1/answers/namespaces/NS/
 * pods/NAME: {"uid": UID, "key": "nodesim.io/init" | "nodesim.io/probes", "answers": {CONTAINER:
 * TEXT}}; *out is the document, or KC_EBADREQUEST with a message naming the field. */
kc_code ks_answers_parse(const char *body, size_t len, json_t **out, kc_err *err);
/* An init container's answer: 1 "ok" (exited 0), -1 "exit N: TEXT" (exited N, 0 < N < 256, with
 * TEXT in msg), 0 anything else (still running: what it waits for). */
int ks_answer_init_parse(const char *v, int *code, char *msg, size_t size);

/* ---- internals ---- */

/* One entry of the image map file:
 *   images:
 *   - image: "ghcr.io/x/gpu-operator*"   # fnmatch(3) glob on the container's image
 *     program: /abs/path/to/bin         # absolute path of the local program to run
 *     args_prefix: ["--flag"]           # inserted right after the program (optional)
 *     env: {KEY: value}                 # extra environment (optional)
 *     user: "1000:1000"                 # the image's USER, numeric uid[:gid] (optional; an
 *                                       # image without one runs as root, uid 0 gid 0) */
typedef struct ks_image_map_entry {
    char *pattern;
    char *program;
    char **args_prefix; /* NULL-terminated */
    char **env;         /* NULL-terminated "KEY=value" */
    long long user_uid, user_gid;
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

/* ---- credentials of a mapped container's process (ks_runas.c) ---- */
#define KS_RUNAS_MAX_GROUPS 64
/* containerd's default capability set: CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID
 * SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE. */
#define KS_RUNAS_DEFAULT_CAPS 0xa80425fbULL
typedef struct ks_runas {
    uint32_t uid, gid;
    uint32_t groups[KS_RUNAS_MAX_GROUPS]; /* sorted: gid, supplementalGroups, fsGroup */
    size_t n_groups;
    uint64_t caps;      /* bounding set; also permitted/effective for root after exec */
    bool nnp;           /* allowPrivilegeEscalation: false */
    bool privileged;    /* securityContext.privileged: all capabilities */
    long long fs_group; /* pod's fsGroup, -1 when unset */
} ks_runas;
/* The credentials of container ctr of pod as the kubelet and containerd compute them (container
 * securityContext over the pod's; map's `user` as the image's USER). runAsNonRoot violations →
 * KC_EINVALID with the kubelet's message (a CreateContainerConfigError). */
kc_code ks_runas_resolve(const json_t *pod, const json_t *ctr, const ks_image_map_entry *map,
                         ks_runas *ra, kc_err *err);
/* Every capability the running kernel knows that kubesim's own bounding set holds. */
uint64_t ks_runas_all_caps(void);
/* argv running argv through the helper with ra's credentials (free with ks_proc_strv_free);
 * *prog is the index of argv[0] in it. sa_dir (or NULL): the service-account volume, which the
 * helper opens as descriptor 3 before changing credentials, so the process reaches it as
 * /proc/self/fd/3 (KS_RUNAS_SA_PATH) as it would at a mount point. */
#define KS_RUNAS_SA_PATH "/proc/self/fd/3"
/* The image's own files are the map entry's: its program, and each env value of it that is an
 * absolute path. In a container they sit in the image's root, readable by any user; here they
 * are host paths, possibly under directories the container's user cannot search (a checkout
 * in a 0700 temporary directory). The helper opens them before changing credentials: it execs
 * the program from its descriptor and hands each path on as /proc/self/fd/N. map may be NULL. */
char **ks_runas_wrap(const ks_runas *ra, const char *helper, const char *sa_dir,
                     const ks_image_map_entry *map, char *const *argv, size_t *prog);
/* The helper program: $KUBESIM_RUNAS, else kubesim-runas next to the running program, else the
 * one the build made. */
const char *ks_runas_helper(void);
/* The kubelet's volume ownership management for fsGroup (emptyDir, configMap, secret,
 * projected; not hostPath): group fs_group on everything under dir, g+r (g+rw unless readonly),
 * directories also g+x and setgid. No-op when fs_group < 0. */
kc_code ks_runas_own_volume(const char *dir, long long fs_group, bool readonly, kc_err *err);

/* Writes <dir>/pods/<ns>_<pod>/serviceaccount/{token,ca.crt,namespace}; *root malloc'd. The
 * directories on the way are searchable by anyone (a container sees its volumes at their mount
 * points whatever its uid), the volume gets the pod's fsGroup as a projected volume does. */
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
