/* ks_runas: a mapped container's process runs with the credentials a real kubelet + containerd +
 * runc give it from the pod's and the container's securityContext: user, primary group,
 * supplementary groups (the primary group, supplementalGroups and fsGroup), the capability sets
 * (containerd's default set, then capabilities.add/drop, all of them when privileged) and
 * no_new_privs (allowPrivilegeEscalation: false). runAsNonRoot is verified as the kubelet does.
 *
 * libuv's spawn cannot set supplementary groups or capabilities, so the process is started
 * through the helper program kubesim-runas (runas_main.c, next to kubesim), which applies them in
 * runc's order and execs the program. */
#include "ks_kubelet.h"

#include "kc_log.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* clang-format off */
static const char *const cap_names[] = {
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID",
    "KILL", "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK",
    "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE",
    "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE",
    "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
    "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
};
/* clang-format on */
#define N_CAP_NAMES ((int)(sizeof(cap_names) / sizeof(cap_names[0])))

/* The highest capability the running kernel knows (/proc/sys/kernel/cap_last_cap). */
static int cap_last(void)
{
    int last = N_CAP_NAMES - 1;
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
    if (f) {
        if (fscanf(f, "%d", &last) != 1 || last < 0 || last > 63)
            last = N_CAP_NAMES - 1;
        fclose(f);
    }
    return last;
}

uint64_t ks_runas_all_caps(void)
{
    int last = cap_last();
    uint64_t all = last >= 63 ? ~0ULL : (1ULL << (last + 1)) - 1;
    /* kubesim itself may run with a reduced bounding set (in a container): nothing it starts can
     * have more. */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long bnd = all;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "CapBnd: %llx", &bnd) == 1)
            break;
    if (f)
        fclose(f);
    return all & bnd;
}

/* A capability name as Kubernetes spells it ("NET_ADMIN"; containerd upper-cases it and prefixes
 * CAP_), or -1 when runc would not know it. */
static int cap_number(const char *name)
{
    for (int i = 0; i < N_CAP_NAMES; i++)
        if (strcasecmp(name, cap_names[i]) == 0)
            return i;
    return -1;
}

static const json_t *sc_field(const json_t *pod_sc, const json_t *ctr_sc, const char *key)
{
    const json_t *v = json_object_get(ctr_sc, key);
    return v && !json_is_null(v) ? v : json_object_get(pod_sc, key);
}

static void add_group(ks_runas *ra, uint32_t g)
{
    for (size_t i = 0; i < ra->n_groups; i++)
        if (ra->groups[i] == g)
            return;
    if (ra->n_groups < KS_RUNAS_MAX_GROUPS)
        ra->groups[ra->n_groups++] = g;
}

static int cmp_gid(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* containerd's WithCapabilities: add ALL, drop ALL, then each added, then each dropped. */
static uint64_t apply_caps(uint64_t caps, const json_t *c, const char *pod, const char *ctr)
{
    const json_t *add = json_object_get(c, "add"), *drop = json_object_get(c, "drop");
    size_t i;
    json_t *v;
    json_array_foreach(add, i,
                       v) if (json_is_string(v) && strcasecmp(json_string_value(v), "ALL") == 0)
        caps = ks_runas_all_caps();
    json_array_foreach(drop, i, v) if (json_is_string(v) &&
                                       strcasecmp(json_string_value(v), "ALL") == 0) caps = 0;
    for (int pass = 0; pass < 2; pass++) {
        json_array_foreach(pass ? drop : add, i, v)
        {
            const char *name = json_string_value(v);
            if (!name || strcasecmp(name, "ALL") == 0)
                continue;
            int n = cap_number(name);
            if (n < 0 || n > cap_last()) {
                /* runc ignores capabilities it does not know, with a warning. */
                kc_warn("kubelet: ignoring unknown or unavailable capability",
                        "pod=%s container=%s capability=CAP_%s", pod, ctr, name);
                continue;
            }
            if (pass)
                caps &= ~(1ULL << n);
            else
                caps |= 1ULL << n;
        }
    }
    return caps;
}

kc_code ks_runas_resolve(const json_t *pod, const json_t *ctr, const ks_image_map_entry *map,
                         ks_runas *ra, kc_err *err)
{
    memset(ra, 0, sizeof(*ra));
    ra->fs_group = -1;
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *psc = json_object_get(json_object_get(pod, "spec"), "securityContext");
    const json_t *csc = json_object_get(ctr, "securityContext");
    const char *pname = json_string_value(json_object_get(meta, "name"));
    const char *pns = json_string_value(json_object_get(meta, "namespace"));
    const char *puid = json_string_value(json_object_get(meta, "uid"));
    const char *cname = json_string_value(json_object_get(ctr, "name"));
    char pdesc[512]; /* the kubelet's format.Pod: name_namespace(uid) */
    snprintf(pdesc, sizeof(pdesc), "%s_%s(%s)", pname ? pname : "", pns ? pns : "",
             puid ? puid : "");
    const json_t *run_user = sc_field(psc, csc, "runAsUser");
    const json_t *run_group = sc_field(psc, csc, "runAsGroup");
    /* The image's user: the map entry's `user` (an image without USER runs as root). */
    long long image_uid = map ? map->user_uid : 0, image_gid = map ? map->user_gid : 0;
    if (json_is_true(sc_field(psc, csc, "runAsNonRoot"))) {
        if (json_is_integer(run_user) && json_integer_value(run_user) == 0)
            return kc_err_set(err, KC_EINVALID,
                              "container's runAsUser breaks non-root policy (pod: \"%s\", "
                              "container: %s)",
                              pdesc, cname ? cname : "");
        if (!json_is_integer(run_user) && image_uid == 0)
            return kc_err_set(err, KC_EINVALID,
                              "container has runAsNonRoot and image will run as root (pod: \"%s\", "
                              "container: %s)",
                              pdesc, cname ? cname : "");
    }
    ra->uid =
        json_is_integer(run_user) ? (uint32_t)json_integer_value(run_user) : (uint32_t)image_uid;
    /* A numeric user the image's /etc/passwd does not list has group 0. */
    if (json_is_integer(run_group))
        ra->gid = (uint32_t)json_integer_value(run_group);
    else
        ra->gid = json_is_integer(run_user) ? 0 : (uint32_t)image_gid;
    add_group(ra, ra->gid);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(psc, "supplementalGroups"), i, v) if (json_is_integer(v))
        add_group(ra, (uint32_t)json_integer_value(v));
    const json_t *fsg = json_object_get(psc, "fsGroup");
    if (json_is_integer(fsg)) {
        ra->fs_group = json_integer_value(fsg);
        add_group(ra, (uint32_t)ra->fs_group);
    }
    qsort(ra->groups, ra->n_groups, sizeof(ra->groups[0]), cmp_gid);
    ra->privileged = json_is_true(json_object_get(csc, "privileged"));
    if (ra->privileged) {
        ra->caps = ks_runas_all_caps();
    } else {
        ra->caps = KS_RUNAS_DEFAULT_CAPS & ks_runas_all_caps();
        ra->caps =
            apply_caps(ra->caps, json_object_get(csc, "capabilities"), pdesc, cname ? cname : "") &
            ks_runas_all_caps();
        const json_t *ape = json_object_get(csc, "allowPrivilegeEscalation");
        ra->nnp = json_is_false(ape);
    }
    return KC_OK;
}

char **ks_runas_wrap(const ks_runas *ra, const char *helper, const char *sa_dir,
                     const ks_image_map_entry *map, char *const *argv, size_t *prog)
{
    size_t n = 0, ne = 0;
    while (argv[n])
        n++;
    while (map && map->env && map->env[ne])
        ne++;
    char **out = calloc(n + ne + 16, sizeof(char *));
    if (!out)
        return NULL;
    char groups[KS_RUNAS_MAX_GROUPS * 11 + 1] = "";
    size_t gl = 0;
    for (size_t i = 0; i < ra->n_groups; i++)
        gl +=
            (size_t)snprintf(groups + gl, sizeof(groups) - gl, "%s%u", i ? "," : "", ra->groups[i]);
    size_t k = 0;
    bool oom = false;
#define PUSHF(...)                                                                                 \
    do {                                                                                           \
        if (asprintf(&out[k], __VA_ARGS__) < 0) {                                                  \
            out[k] = NULL;                                                                         \
            oom = true;                                                                            \
        } else {                                                                                   \
            k++;                                                                                   \
        }                                                                                          \
    } while (0)
    PUSHF("%s", helper);
    PUSHF("--uid=%u", ra->uid);
    PUSHF("--gid=%u", ra->gid);
    PUSHF("--groups=%s", groups);
    PUSHF("--caps=%llx", (unsigned long long)ra->caps);
    if (ra->nnp)
        PUSHF("--no-new-privs");
    if (sa_dir)
        PUSHF("--fd3=%s", sa_dir);
    for (size_t i = 0; i < ne; i++) {
        const char *eq = strchr(map->env[i], '=');
        if (eq && eq[1] == '/')
            PUSHF("--image-env=%.*s", (int)(eq - map->env[i]), map->env[i]);
    }
    PUSHF("--");
    *prog = k;
    for (size_t i = 0; i < n; i++)
        PUSHF("%s", argv[i]);
#undef PUSHF
    if (oom) {
        for (size_t i = 0; i < k; i++)
            free(out[i]);
        free(out);
        return NULL;
    }
    return out;
}

const char *ks_runas_helper(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("KUBESIM_RUNAS");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof(path), "%s/kubesim-runas", self);
            if (access(path, X_OK) == 0)
                return path;
        }
    }
#ifdef KS_RUNAS_PATH
    return KS_RUNAS_PATH;
#else
    return "kubesim-runas";
#endif
}

/* ---- volume ownership (the kubelet's SetVolumeOwnership) ---- */

/* nftw has no user pointer: the walk's parameters, per thread. */
static _Thread_local gid_t own_gid;
static _Thread_local bool own_ro;

static int own_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag == FTW_SL || S_ISLNK(st->st_mode))
        return 0;
    if (lchown(path, (uid_t)-1, own_gid) != 0)
        return -1;
    mode_t mask = own_ro ? 0440 : 0660;
    if (S_ISDIR(st->st_mode))
        mask |= S_ISGID | 0110;
    return chmod(path, (st->st_mode & 07777) | mask) == 0 ? 0 : -1;
}

kc_code ks_runas_own_volume(const char *dir, long long fs_group, bool readonly, kc_err *err)
{
    if (fs_group < 0)
        return KC_OK;
    own_gid = (gid_t)fs_group;
    own_ro = readonly;
    if (nftw(dir, own_one, 16, FTW_PHYS) != 0)
        return kc_err_set(err, KC_EIO, "cannot apply fsGroup %lld to %s: %s", fs_group, dir,
                          strerror(errno));
    return KC_OK;
}
