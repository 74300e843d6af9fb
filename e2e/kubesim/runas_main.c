/* kubesim-runas: starts a mapped container's program with the credentials kubesim's kubelet
 * computed (ks_runas.c), applied in runc's order: bounding set, supplementary groups, gid, uid
 * (keeping capabilities across the switch), permitted/effective sets (inheritable and ambient
 * empty, as containerd leaves them), no_new_privs, exec. The kernel then computes the sets after
 * exec as it does for a runc container: a non-root user ends with empty permitted and effective
 * sets, root with the bounding set.
 *
 *   kubesim-runas --uid=N --gid=N --groups=A,B --caps=HEX [--no-new-privs] [--fd3=DIR]
 *                 -- program [args]
 *
 * Kept free of kubesim's libraries: it runs once per container start. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_GROUPS    64
#define MAX_IMAGE_ENV 16

static int fail(const char *what)
{
    fprintf(stderr, "kubesim-runas: %s: %s\n", what, strerror(errno));
    return 127;
}

int main(int argc, char **argv)
{
    unsigned long long uid = 0, gid = 0, caps = 0;
    bool nnp = false;
    const char *fd3 = NULL;
    const char *image_env[MAX_IMAGE_ENV];
    size_t n_image_env = 0;
    gid_t groups[MAX_GROUPS];
    size_t ng = 0;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--uid=", 6)) {
            uid = strtoull(a + 6, NULL, 10);
        } else if (!strncmp(a, "--gid=", 6)) {
            gid = strtoull(a + 6, NULL, 10);
        } else if (!strncmp(a, "--caps=", 7)) {
            caps = strtoull(a + 7, NULL, 16);
        } else if (!strcmp(a, "--no-new-privs")) {
            nnp = true;
        } else if (!strncmp(a, "--fd3=", 6)) {
            fd3 = a + 6;
        } else if (!strncmp(a, "--image-env=", 12)) {
            if (n_image_env < MAX_IMAGE_ENV)
                image_env[n_image_env++] = a + 12;
        } else if (!strncmp(a, "--groups=", 9)) {
            for (const char *p = a + 9; *p && ng < MAX_GROUPS;) {
                char *end;
                groups[ng++] = (gid_t)strtoul(p, &end, 10);
                p = *end == ',' ? end + 1 : end + strlen(end);
            }
        } else {
            fprintf(stderr, "kubesim-runas: unknown option %s\n", a);
            return 127;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: kubesim-runas --uid=N --gid=N --groups=A,B --caps=HEX "
                        "[--no-new-privs] [--fd3=DIR] -- program [args]\n");
        return 127;
    }
    char **prog = argv + i + 1;
    if (fd3) {
        /* A volume, opened while still root: the process reaches it as /proc/self/fd/3 whatever
         * the modes of the directories above it, as a container does at its mount point. */
        int fd = open(fd3, O_PATH | O_DIRECTORY);
        if (fd < 0)
            return fail(fd3);
        if (fd != 3 && (dup2(fd, 3) != 3 || close(fd) != 0))
            return fail("dup2");
    }
    /* The image's files, opened while still root: in a container they are in the image's root,
     * readable by any user, whatever the host directories above them allow. */
    for (size_t e = 0; e < n_image_env; e++) {
        const char *v = getenv(image_env[e]);
        if (!v || v[0] != '/')
            continue;
        int fd = open(v, O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue; /* the program reports a missing file itself */
        int keep = fcntl(fd, F_DUPFD, 10);
        close(fd);
        char path[64];
        if (keep < 0)
            return fail("fcntl(F_DUPFD)");
        snprintf(path, sizeof(path), "/proc/self/fd/%d", keep);
        if (setenv(image_env[e], path, 1) != 0)
            return fail("setenv");
    }
    /* The program too: exec'd through /proc/self/fd/N when its path is out of the user's reach.
     * The descriptor stays open across exec: a script's interpreter, and valgrind's launcher
     * when it traces children, open that path after the exec. */
    int exe = open(prog[0], O_RDONLY);
    if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
        return fail("prctl(PR_SET_KEEPCAPS)");
    /* Capabilities beyond the kernel's last one answer EINVAL: the end of the bounding set. */
    for (int c = 0; c < 64; c++) {
        if (caps & (1ULL << c))
            continue;
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) {
            if (errno == EINVAL)
                break;
            return fail("prctl(PR_CAPBSET_DROP)");
        }
    }
    if (setgroups(ng, groups) != 0)
        return fail("setgroups");
    if (setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0)
        return fail("setgid");
    if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0)
        return fail("setuid");
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    data[0].effective = data[0].permitted = (uint32_t)caps;
    data[1].effective = data[1].permitted = (uint32_t)(caps >> 32);
    if (syscall(SYS_capset, &hdr, data) != 0)
        return fail("capset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return fail("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0)
        return fail("prctl(PR_SET_KEEPCAPS)");
    if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return fail("prctl(PR_SET_NO_NEW_PRIVS)");
    if (exe < 0 || access(prog[0], X_OK) == 0) {
        execv(prog[0], prog);
    } else {
        char via[64];
        snprintf(via, sizeof(via), "/proc/self/fd/%d", exe);
        execv(via, prog);
    }
    /* What runc reports for a program it cannot start. */
    fprintf(stderr, "exec: \"%s\": %s\n", prog[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
