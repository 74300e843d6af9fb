/* gpu-operator-hold: waits for SIGTERM, SIGINT or SIGHUP, then exits 0. The image-prepull pods
 * run it in other projects' images (NVIDIA's operand images, some of them distroless) so that the
 * kubelet pulls those images without running anything of them: it is linked statically and needs
 * nothing from the image it runs in. As a container's first process it gets no default signal
 * action, hence the handlers. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            printf("usage: gpu-operator-hold\n"
                   "Waits for SIGTERM, SIGINT or SIGHUP and exits 0 (the image-prepull pods run it "
                   "in the images they pull).\n");
            return 0;
        }
        fprintf(stderr, "gpu-operator-hold: unexpected argument '%s' (it takes none)\n", argv[1]);
        return 64;
    }
    /* A signal that comes before the wait has set the flag the loop checks. */
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        if (sigaction(sigs[i], &sa, NULL) != 0) {
            perror("gpu-operator-hold: sigaction");
            return 1;
        }
        sigaddset(&block, sigs[i]);
    }
    if (sigprocmask(SIG_BLOCK, &block, &old) != 0) {
        perror("gpu-operator-hold: sigprocmask");
        return 1;
    }
    while (!g_stop)
        sigsuspend(&old);
    return 0;
}
