/* Test shim for libnvidia-ml.so.1: the NVML calls gpu-validator makes, answered from the
 * environment. Built in the test tree only.
 *
 * FAKENVML_GPUS=N        GPUs (default 2)
 * FAKENVML_MIG=S0,S1,..  per GPU: "-" no MIG support (default), "off" MIG capable but disabled,
 *                        a number: MIG enabled with that many MIG devices, at most 4 (placed at
 *                        every other of 7 indices, so the indices have gaps as they can on real
 *                        GPUs)
 * FAKENVML_INIT_RC=N     nvmlInit_v2 returns N
 * FAKENVML_DRIVER=V      driver version (default 550.54.15)
 * FAKENVML_MEMINFO_RC=N  nvmlDeviceGetMemoryInfo returns N
 *
 * Unbalanced nvmlInit_v2/nvmlShutdown calls are reported when the library is unloaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;

#define NVML_SUCCESS                 0
#define NVML_ERROR_UNINITIALIZED     1
#define NVML_ERROR_INVALID_ARGUMENT  2
#define NVML_ERROR_NOT_SUPPORTED     3
#define NVML_ERROR_NOT_FOUND         6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_UNKNOWN           999

#define MAX_GPUS  8
#define MAX_MIG   4
#define MIG_SLOTS 7

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

struct dev {
    int gpu;   /* owning GPU index */
    int slot;  /* MIG slot, -1 for the GPU itself */
    int valid; /* a MIG device exists in this slot */
};

static struct dev g_gpu[MAX_GPUS];
static struct dev g_mig[MAX_GPUS][MIG_SLOTS];
static int g_inits;

__attribute__((destructor)) static void fakenvml_fini(void)
{
    if (g_inits != 0)
        fprintf(stderr, "fakenvml: leaked %d nvmlInit_v2 without nvmlShutdown\n", g_inits);
}

static int ngpus(void)
{
    const char *v = getenv("FAKENVML_GPUS");
    int n = v && *v ? atoi(v) : 2;
    return n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : n;
}

/* MIG spec of GPU index: -2 no MIG support, -1 disabled, else MIG devices. */
static int mig_spec(int gpu)
{
    const char *v = getenv("FAKENVML_MIG");
    if (!v)
        return -2;
    for (int i = 0; i < gpu && v; i++) {
        v = strchr(v, ',');
        if (v)
            v++;
    }
    if (!v || *v == '-' || *v == ',' || !*v)
        return -2;
    if (strncmp(v, "off", 3) == 0)
        return -1;
    int n = atoi(v);
    return n > MAX_MIG ? MAX_MIG : n;
}

static int is_gpu(const struct dev *d)
{
    return d >= g_gpu && d < g_gpu + MAX_GPUS && d->gpu < ngpus();
}

static int is_mig(const struct dev *d)
{
    return d >= &g_mig[0][0] && d < &g_mig[0][0] + MAX_GPUS * MIG_SLOTS && d->valid;
}

#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (g_inits <= 0)                                                                          \
            return NVML_ERROR_UNINITIALIZED;                                                       \
    } while (0)

const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlInit_v2(void)
{
    const char *v = getenv("FAKENVML_INIT_RC");
    if (v && *v && atoi(v) != NVML_SUCCESS)
        return atoi(v);
    for (int g = 0; g < MAX_GPUS; g++) {
        g_gpu[g] = (struct dev){g, -1, 1};
        int n = mig_spec(g);
        for (int s = 0; s < MIG_SLOTS; s++)
            g_mig[g][s] = (struct dev){g, s, n > 0 && s % 2 == 0 && s / 2 < n};
    }
    g_inits++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    NEED_INIT();
    g_inits--;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    NEED_INIT();
    const char *v = getenv("FAKENVML_DRIVER");
    if (!v)
        v = "550.54.15";
    if (!version || strlen(v) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(version, v);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    NEED_INIT();
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)ngpus();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct dev **dev)
{
    NEED_INIT();
    if (!dev || index >= (unsigned int)ngpus())
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = &g_gpu[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(struct dev *d, char *name, unsigned int len)
{
    NEED_INIT();
    char buf[96];
    if (is_gpu(d))
        snprintf(buf, sizeof(buf), "NVIDIA A100-SXM4-40GB");
    else if (is_mig(d))
        snprintf(buf, sizeof(buf), "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!name || strlen(buf) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(name, buf);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(struct dev *d, char *uuid, unsigned int len)
{
    NEED_INIT();
    char buf[96];
    if (is_gpu(d))
        snprintf(buf, sizeof(buf), "GPU-fa4e0000-0000-4000-8000-%012d", d->gpu);
    else if (is_mig(d))
        snprintf(buf, sizeof(buf), "MIG-fa4e0000-%04d-4000-8000-%012d", d->gpu, d->slot);
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!uuid || strlen(buf) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(uuid, buf);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(struct dev *d, nvmlMemory_t *mem)
{
    NEED_INIT();
    const char *v = getenv("FAKENVML_MEMINFO_RC");
    if (v && *v && atoi(v) != NVML_SUCCESS)
        return atoi(v);
    if (!mem)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (is_gpu(d))
        mem->total = 40960ull << 20;
    else if (is_mig(d))
        mem->total = 4864ull << 20;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    mem->used = 0;
    mem->free = mem->total;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(struct dev *d, unsigned int *current, unsigned int *pending)
{
    NEED_INIT();
    if (!is_gpu(d) || !current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    int spec = mig_spec(d->gpu);
    if (spec == -2)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = spec >= 0 ? 1 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(struct dev *d, unsigned int *count)
{
    NEED_INIT();
    if (!is_gpu(d) || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mig_spec(d->gpu) == -2)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = MIG_SLOTS;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(struct dev *d, unsigned int index,
                                                 struct dev **mig)
{
    NEED_INIT();
    if (!is_gpu(d) || !mig || index >= MIG_SLOTS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mig_spec(d->gpu) < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!g_mig[d->gpu][index].valid)
        return NVML_ERROR_NOT_FOUND;
    *mig = &g_mig[d->gpu][index];
    return NVML_SUCCESS;
}
