/* Tests of gpu-operator-hold, the program the image-prepull pods run in the images they pull: it
 * waits for a stop signal and exits 0, refuses arguments, and needs no shared library. */
#include <criterion/criterion.h>

#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *hold_bin(void)
{
    const char *bin = getenv("GPU_OPERATOR_HOLD_BIN");
    cr_assert(bin && *bin, "run through ctest: GPU_OPERATOR_HOLD_BIN names the program");
    return bin;
}

static pid_t spawn(const char *arg, int *errfd)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(hold_bin(), hold_bin(), arg, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    *errfd = p[0];
    return pid;
}

/* Whether process pid catches signal sig (its SigCgt mask in /proc): its handler is in place. */
static bool catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool yes = false;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "SigCgt:", 7))
            yes = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
    fclose(f);
    return yes;
}

static void stops_on(int sig)
{
    int errfd;
    pid_t pid = spawn(NULL, &errfd);
    /* Until its handler is in place, the signal's default action would kill it instead. */
    for (int i = 0; i < 5000 && !catches(pid, sig); i++)
        usleep(1000);
    cr_assert(catches(pid, sig), "gpu-operator-hold did not start waiting");
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, WNOHANG), 0, "it must keep running until signalled");
    cr_assert_eq(kill(pid, sig), 0);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "signal %d: status %#x, want exit 0", sig, st);
    close(errfd);
}

Test(hold, exits_0_on_sigterm)
{
    stops_on(SIGTERM);
}

Test(hold, exits_0_on_sigint_and_sighup)
{
    stops_on(SIGINT);
    stops_on(SIGHUP);
}

Test(hold, refuses_arguments)
{
    int errfd;
    pid_t pid = spawn("--forever", &errfd);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 64, "status %#x, want exit 64", st);
    char buf[256] = "";
    ssize_t n = read(errfd, buf, sizeof(buf) - 1);
    close(errfd);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert_str_eq(buf, "gpu-operator-hold: unexpected argument '--forever' (it takes none)\n");
}

/* It runs in images that may hold no C library: no program interpreter, no shared library
 * (sanitized builds cannot link statically and are not shipped). */
Test(hold, is_linked_statically)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("sanitized builds link dynamically");
#endif
    FILE *f = fopen(hold_bin(), "rb");
    cr_assert_not_null(f);
    Elf64_Ehdr eh;
    cr_assert_eq(fread(&eh, sizeof(eh), 1, f), 1u);
    cr_assert_eq(memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
    bool interp = false, dynamic = false;
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        cr_assert_eq(fseek(f, (long)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize), SEEK_SET), 0);
        cr_assert_eq(fread(&ph, sizeof(ph), 1, f), 1u);
        interp |= ph.p_type == PT_INTERP;
        dynamic |= ph.p_type == PT_DYNAMIC;
    }
    fclose(f);
    cr_assert(!interp, "gpu-operator-hold has a program interpreter (dynamically linked)");
    cr_assert(!dynamic, "gpu-operator-hold has a dynamic section");
}
