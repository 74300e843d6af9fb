/* Stand-in for NVIDIA's nvidia-smi (NVIDIA driver), for the real-node lane, where there is no GPU.
 *
 * Contract honoured: the driver DaemonSet's startupProbe runs `nvidia-smi` in the driver container
 * after `test -f /sys/module/nvidia/refcnt`; it must fail until the driver is loaded and succeed
 * after. Without arguments, or with -L, it lists the GPUs the way `nvidia-smi -L` does
 * ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)"), read through NVML (libnvidia-ml.so.1, the
 * driver root's library: the project's fake NVML), so the names and UUIDs are NVML's. It fails as
 * nvidia-smi does (exit 9, "couldn't communicate with the NVIDIA driver") when NVML cannot be
 * initialized, and in the driver container (the driver image sets NVIDIA_SMI_STANDIN_DRIVER_CTR=1)
 * also while the stand-in module is not loaded (/sys/module/nvidia/refcnt absent;
 * NVIDIA_SMI_STANDIN_SYS overrides /sys for tests). In GPU containers, where the nvidia runtime
 * stand-in mounts it from the driver root, NVML decides alone. Other options print a one-line note
 * and succeed.
 *
 * Build: gcc -O2 -o nvidia-smi nvidia-smi.c -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_fn)(void);
typedef int (*count_fn)(unsigned int *);
typedef int (*handle_fn)(unsigned int, void **);
typedef int (*str_fn)(void *, char *, unsigned int);
typedef int (*ver_fn)(char *, unsigned int);

static int no_driver(void)
{
    fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                    "Make sure that the latest NVIDIA driver is installed and running.\n\n");
    return 9;
}

int main(int argc, char **argv)
{
    const char *sys = getenv("NVIDIA_SMI_STANDIN_SYS");
    char path[512];
    snprintf(path, sizeof path, "%s/module/nvidia/refcnt", sys && *sys ? sys : "/sys");
    const char *drvctr = getenv("NVIDIA_SMI_STANDIN_DRIVER_CTR");
    if (drvctr && !strcmp(drvctr, "1") && access(path, F_OK) != 0)
        return no_driver();
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h)
        return no_driver();
    init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
    init_fn shutdown = (init_fn)dlsym(h, "nvmlShutdown");
    count_fn count = (count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
    handle_fn handle = (handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    str_fn name = (str_fn)dlsym(h, "nvmlDeviceGetName");
    str_fn uuid = (str_fn)dlsym(h, "nvmlDeviceGetUUID");
    ver_fn version = (ver_fn)dlsym(h, "nvmlSystemGetDriverVersion");
    if (!init || !shutdown || !count || !handle || !name || !uuid || !version || init() != 0)
        return no_driver();
    unsigned int n = 0;
    int rc = count(&n) != 0;
    int list = argc < 2 || !strcmp(argv[1], "-L") || !strcmp(argv[1], "--list-gpus");
    if (!list && !rc) {
        char v[96] = "";
        version(v, sizeof v);
        printf("nvidia-smi stand-in: driver %s, %u GPU(s); only -L is implemented\n", v, n);
    }
    for (unsigned int i = 0; list && !rc && i < n; i++) {
        void *dev;
        char nm[96], id[96];
        if (handle(i, &dev) != 0 || name(dev, nm, sizeof nm) != 0 ||
            uuid(dev, id, sizeof id) != 0) {
            rc = 1;
            break;
        }
        printf("GPU %u: %s (UUID: %s)\n", i, nm, id);
    }
    shutdown();
    if (rc)
        return no_driver();
    return 0;
}
