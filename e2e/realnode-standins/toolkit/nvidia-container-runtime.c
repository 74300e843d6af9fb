/* Stand-in for NVIDIA's nvidia-container-runtime (NVIDIA Container Toolkit), for the real-node
 * lane, where there is no GPU.
 *
 * Contract honoured: containerd's runc.v2 shim runs this binary (the runtime's BinaryName) exactly
 * as it runs runc, with runc's command line. For `create` (and `run`) it reads the bundle's
 * config.json (--bundle/-b, else the current directory) and, only when the container process's env
 * has NVIDIA_VISIBLE_DEVICES set to something other than "void", "none" or "", adds read-only bind
 * mounts of the driver's user-space libraries (libcuda.so.1, libnvidia-ml.so.1) from the driver
 * root (/run/nvidia/driver, where the containerized driver publishes its root) to
 * /usr/lib/x86_64-linux-gnu in the container, and nvidia-smi to /usr/bin when the driver root has
 * one. A GPU container whose driver root lacks a library is refused, as NVIDIA's runtime refuses it
 * ("load library failed"). Every other command, and every container that asks for no GPU, is
 * passed to runc untouched. It then execs runc with the same arguments.
 *
 * Environment (of this process, for tests): NVIDIA_STANDIN_DRIVER_ROOT (default
 * /run/nvidia/driver), NVIDIA_STANDIN_RUNC (default: runc found in PATH, /usr/sbin, /usr/bin,
 * /usr/local/sbin, /usr/local/bin), NVIDIA_STANDIN_RUNTIME_LOG (a file that gets one line per
 * container it changes).
 *
 * Build: gcc -O2 -static -o nvidia-container-runtime nvidia-container-runtime.c -l:libjansson.a
 * (static, so that it runs on any host the toolkit container installs it on). */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const LIBS[] = {"libcuda.so.1", "libnvidia-ml.so.1", NULL};
static const char *const LIB_DIRS[] = {"usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib",
                                       "lib/x86_64-linux-gnu", NULL};
#define CTR_LIB_DIR "/usr/lib/x86_64-linux-gnu"

static void logf_(const char *fmt, const char *a, const char *b)
{
    const char *path = getenv("NVIDIA_STANDIN_RUNTIME_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *find_runc(char *buf, size_t size)
{
    const char *env = getenv("NVIDIA_STANDIN_RUNC");
    if (env && *env)
        return env;
    char selfreal[PATH_MAX] = "";
    if (!realpath("/proc/self/exe", selfreal))
        selfreal[0] = '\0';
    const char *path = getenv("PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin",
             path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (!*d)
            continue;
        snprintf(buf, size, "%s/runc", d);
        char real[PATH_MAX];
        if (access(buf, X_OK) == 0 && realpath(buf, real) && strcmp(real, selfreal) != 0)
            return buf;
    }
    return NULL;
}

/* NVIDIA_VISIBLE_DEVICES of the container process (the last one wins), NULL when unset. */
static const char *visible_devices(const json_t *config)
{
    const json_t *env = json_object_get(json_object_get(config, "process"), "env");
    const char *val = NULL;
    size_t i;
    const json_t *e;
    json_array_foreach(env, i, e)
    {
        const char *s = json_string_value(e);
        if (s && !strncmp(s, "NVIDIA_VISIBLE_DEVICES=", 23))
            val = s + 23;
    }
    return val;
}

/* Whether the file holds the text NVIDIA_VISIBLE_DEVICES= at all (unreadable: yes, so that the
 * parse reports it). */
static int mentions_visible_devices(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    static const char key[] = "NVIDIA_VISIBLE_DEVICES=";
    size_t matched = 0;
    int c, found = 0;
    while (!found && (c = getc(f)) != EOF) {
        matched = c == key[matched] ? matched + 1 : c == key[0] ? 1 : 0;
        found = key[matched] == '\0';
    }
    fclose(f);
    return found;
}

static int add_mount(json_t *mounts, const char *src, const char *dst)
{
    return json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s, s, s, s]}", "destination",
                                                   dst, "type", "bind", "source", src, "options",
                                                   "rbind", "ro", "nosuid", "nodev"));
}

/* Adds the driver mounts to bundle/config.json. 0 when done or nothing to do, else 1. */
static int inject(const char *bundle)
{
    char cfgpath[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", bundle);
    if (!mentions_visible_devices(cfgpath))
        return 0; /* not a GPU container: passed to runc untouched, not even parsed */
    json_error_t jerr;
    json_t *config = json_load_file(cfgpath, 0, &jerr);
    if (!config) {
        fprintf(stderr, "nvidia-container-runtime: %s: %s\n", cfgpath, jerr.text);
        return 1;
    }
    const char *vis = visible_devices(config);
    if (!vis || !*vis || !strcmp(vis, "void") || !strcmp(vis, "none")) {
        json_decref(config);
        return 0;
    }
    const char *root = getenv("NVIDIA_STANDIN_DRIVER_ROOT");
    if (!root || !*root)
        root = "/run/nvidia/driver";
    json_t *mounts = json_object_get(config, "mounts");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        json_object_set_new(config, "mounts", mounts);
    }
    for (int i = 0; LIBS[i]; i++) {
        char src[PATH_MAX], dst[PATH_MAX];
        int found = 0;
        for (int d = 0; LIB_DIRS[d] && !found; d++) {
            snprintf(src, sizeof src, "%s/%s/%s", root, LIB_DIRS[d], LIBS[i]);
            found = is_file(src);
        }
        if (!found) {
            fprintf(stderr,
                    "nvidia-container-runtime: NVIDIA_VISIBLE_DEVICES=%s but no %s under the "
                    "driver root %s: load library failed (is the driver ready?)\n",
                    vis, LIBS[i], root);
            json_decref(config);
            return 1;
        }
        snprintf(dst, sizeof dst, "%s/%s", CTR_LIB_DIR, LIBS[i]);
        if (add_mount(mounts, src, dst) != 0) {
            json_decref(config);
            return 1;
        }
    }
    char smi[PATH_MAX];
    snprintf(smi, sizeof smi, "%s/usr/bin/nvidia-smi", root);
    if (is_file(smi) && add_mount(mounts, smi, "/usr/bin/nvidia-smi") != 0) {
        json_decref(config);
        return 1;
    }
    snprintf(tmp, sizeof tmp, "%s.nvtmp", cfgpath);
    if (json_dump_file(config, tmp, JSON_PRESERVE_ORDER | JSON_COMPACT) != 0 ||
        rename(tmp, cfgpath) != 0) {
        fprintf(stderr, "nvidia-container-runtime: cannot rewrite %s: %s\n", cfgpath,
                strerror(errno));
        unlink(tmp);
        json_decref(config);
        return 1;
    }
    logf_("injected %s into %s", root, bundle);
    json_decref(config);
    return 0;
}

/* runc's global options that take a value (as a separate argument unless written --opt=value). */
static int global_takes_value(const char *a)
{
    static const char *const opts[] = {"--root", "--log",      "--log-format",
                                       "--criu", "--rootless", NULL};
    for (int i = 0; opts[i]; i++)
        if (!strcmp(a, opts[i]))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = NULL, *bundle = NULL;
    int i = 1;
    for (; i < argc && !cmd; i++) {
        if (argv[i][0] != '-')
            cmd = argv[i];
        else if (global_takes_value(argv[i]))
            i++;
    }
    if (cmd && (!strcmp(cmd, "create") || !strcmp(cmd, "run"))) {
        for (; i < argc; i++) {
            const char *a = argv[i];
            if ((!strcmp(a, "--bundle") || !strcmp(a, "-b")) && i + 1 < argc)
                bundle = argv[++i];
            else if (!strncmp(a, "--bundle=", 9))
                bundle = a + 9;
            else if (!strncmp(a, "-b=", 3))
                bundle = a + 3;
        }
        if (inject(bundle ? bundle : ".") != 0)
            return 1;
    }
    char buf[PATH_MAX];
    const char *runc = find_runc(buf, sizeof buf);
    if (!runc) {
        fprintf(stderr, "nvidia-container-runtime: runc not found\n");
        return 1;
    }
    argv[0] = (char *)runc;
    execv(runc, argv);
    fprintf(stderr, "nvidia-container-runtime: exec %s: %s\n", runc, strerror(errno));
    return 1;
}
