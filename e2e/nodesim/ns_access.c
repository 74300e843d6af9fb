/* ns_access: what gpu-validator in a container can reach on a real node, decided from the pod
 * spec alone (see ns_access.h). */
#include "ns_access.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The uid the project's image runs as (its Dockerfile's USER 1000:1000). */
#define IMAGE_UID 1000

static const char *ctr_env(const json_t *c, const char *name)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && !strcmp(n, name))
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

/* The value after flag in the container's command or args, or NULL. */
static const char *ctr_flag(const json_t *c, const char *flag)
{
    static const char *const keys[2] = {"command", "args"};
    size_t fl = strlen(flag);
    for (int k = 0; k < 2; k++) {
        const json_t *a = json_object_get(c, keys[k]);
        for (size_t i = 0; i < json_array_size(a); i++) {
            const char *s = json_string_value(json_array_get(a, i));
            if (!s || strncmp(s, flag, fl) != 0)
                continue;
            if (s[fl] == '=')
                return s + fl + 1;
            if (!s[fl])
                return json_string_value(json_array_get(a, i + 1));
        }
    }
    return NULL;
}

/* The volume of pod mounted at a prefix of path in container c, or NULL. */
static const json_t *mount_of(const json_t *pod, const json_t *c, const char *path)
{
    size_t i, best = 0;
    const json_t *m, *vol = NULL;
    json_array_foreach(json_object_get(c, "volumeMounts"), i, m)
    {
        const char *mp = json_string_value(json_object_get(m, "mountPath"));
        size_t n = mp ? strlen(mp) : 0;
        while (n > 1 && mp[n - 1] == '/')
            n--;
        if (!n || strncmp(path, mp, n) != 0 || (path[n] && path[n] != '/' && n > 1) || n <= best)
            continue;
        const char *vn = json_string_value(json_object_get(m, "name"));
        size_t j;
        const json_t *v;
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), "volumes"), j, v)
        {
            const char *n2 = json_string_value(json_object_get(v, "name"));
            if (vn && n2 && !strcmp(vn, n2)) {
                vol = v;
                best = n;
            }
        }
    }
    return vol;
}

static bool requests_devices(const json_t *c)
{
    const char *k;
    const json_t *q;
    const json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
    json_object_foreach((json_t *)lim, k, q)
    {
        if (!strncmp(k, "nvidia.com/", 11))
            return true;
    }
    return false;
}

/* Whether the nvidia runtime injects the driver's libraries into c: a runtime class (the
 * toolkit's handler) and devices asked for, by NVIDIA_VISIBLE_DEVICES or through the device
 * plugin's allocation of a requested resource. */
static bool injected(const json_t *pod, const json_t *c)
{
    const char *rc =
        json_string_value(json_object_get(json_object_get(pod, "spec"), "runtimeClassName"));
    if (!rc || !*rc)
        return false;
    if (requests_devices(c))
        return true;
    const char *vis = ctr_env(c, "NVIDIA_VISIBLE_DEVICES");
    return vis && *vis && strcmp(vis, "void") != 0 && strcmp(vis, "none") != 0;
}

/* Whether library `def` (e.g. libcuda.so.1) loads outside the runtime: from its explicit path
 * (env var) or from the driver root, either mounted into the container. */
static int lib_loads(const json_t *pod, const json_t *c, const char *env, const char *def,
                     char *msg, size_t size)
{
    const char *path = ctr_env(c, env);
    if (path && *path) {
        if (path[0] == '/' && mount_of(pod, c, path))
            return 0;
        snprintf(msg, size,
                 "no NVIDIA driver: %s: cannot open shared object file: No such file or directory "
                 "(is the driver installed and the container run with the nvidia runtime?)",
                 path);
        return 2;
    }
    const char *root = ctr_env(c, "GPU_VALIDATOR_DRIVER_ROOT");
    if (root && *root) {
        if (root[0] == '/' && mount_of(pod, c, root))
            return 0;
        snprintf(msg, size,
                 "no NVIDIA driver: %s not found under the driver root %s (looked in "
                 "usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu, usr/lib64, usr/lib, "
                 "lib/x86_64-linux-gnu, lib/aarch64-linux-gnu, lib64; is the driver installed "
                 "there?)",
                 def, root);
        return 2;
    }
    snprintf(msg, size,
             "no NVIDIA driver: %s: cannot open shared object file: No such file or directory (is "
             "the driver installed and the container run with the nvidia runtime?)",
             def);
    return 2;
}

static long run_as(const json_t *pod, const json_t *c)
{
    const json_t *u = json_object_get(json_object_get(c, "securityContext"), "runAsUser");
    if (!json_is_integer(u))
        u = json_object_get(json_object_get(json_object_get(pod, "spec"), "securityContext"),
                            "runAsUser");
    return json_is_integer(u) ? (long)json_integer_value(u) : IMAGE_UID;
}

int ns_validator_access(const json_t *pod, const json_t *c, char *msg, size_t size)
{
    msg[0] = '\0';
    const char *mode = ctr_flag(c, "--mode");
    if (!mode)
        mode = "cuda";
    if (!injected(pod, c)) {
        bool nvml = !strcmp(mode, "driver") || !strcmp(mode, "toolkit") || !strcmp(mode, "mig");
        int rc =
            nvml ? lib_loads(pod, c, "GPU_VALIDATOR_LIBNVML", "libnvidia-ml.so.1", msg, size) : 0;
        if (!rc)
            rc = lib_loads(pod, c, "GPU_VALIDATOR_LIBCUDA", "libcuda.so.1", msg, size);
        if (rc)
            return rc;
    }
    const char *status = ctr_flag(c, "--status-file");
    if (!status || !*status)
        return 0;
    /* The status file goes into a hostPath directory the kubelet created root-owned, 0755. */
    const json_t *vol = mount_of(pod, c, status);
    long uid = run_as(pod, c);
    if (vol && json_object_get(vol, "hostPath") && uid != 0) {
        snprintf(msg, size, "cannot write status file %s.tmp.1: Permission denied", status);
        return 1;
    }
    return 0;
}
