/* NVML access for the validator: libnvidia-ml loaded at run time, GPUs and MIG devices listed. */
#ifndef VALIDATOR_NVML_H
#define VALIDATOR_NVML_H

#include <stddef.h>

#include "validator.h"

/* The few NVML types the validator needs, declared here so that no NVIDIA headers are needed to
 * build it (the values are those of the public NVML API). */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

#define NVML_SUCCESS                           0
#define NVML_ERROR_NOT_SUPPORTED               3
#define NVML_ERROR_NOT_FOUND                   6
#define NVML_ERROR_DRIVER_NOT_LOADED           9
#define NVML_ERROR_LIBRARY_NOT_FOUND           12
#define NVML_DEVICE_MIG_ENABLE                 1
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

/* The most MIG devices the validator lists per GPU (current GPUs have at most 7). */
#define VNVML_MAX_MIG 16

/* libnvidia-ml.so.1 opened with dlopen, with the entry points the validator calls. */
struct vnvml {
    void *lib;
    int initialized;
    nvmlReturn_t (*nvmlInit)(void);
    nvmlReturn_t (*nvmlShutdown)(void);
    const char *(*nvmlErrorString)(nvmlReturn_t rc);
    nvmlReturn_t (*nvmlSystemGetDriverVersion)(char *version, unsigned int len);
    nvmlReturn_t (*nvmlDeviceGetCount)(unsigned int *count);
    nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned int index, nvmlDevice_t *dev);
    nvmlReturn_t (*nvmlDeviceGetName)(nvmlDevice_t dev, char *name, unsigned int len);
    nvmlReturn_t (*nvmlDeviceGetUUID)(nvmlDevice_t dev, char *uuid, unsigned int len);
    nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t dev, nvmlMemory_t *mem);
    nvmlReturn_t (*nvmlDeviceGetMigMode)(nvmlDevice_t dev, unsigned int *current,
                                         unsigned int *pending);
    nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount)(nvmlDevice_t dev, unsigned int *count);
    nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex)(nvmlDevice_t dev, unsigned int index,
                                                        nvmlDevice_t *mig);
};

/* One MIG device of a GPU. */
struct vnvml_mig {
    unsigned int index; /* the MIG device index on its GPU */
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    unsigned long long mem_total; /* 0: not reported */
};

/* What the validator reports about one GPU. */
struct vnvml_gpu {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    unsigned long long mem_total; /* 0: not reported */
    int mig_capable;              /* 0: the GPU has no MIG mode */
    unsigned int mig_current;     /* NVML_DEVICE_MIG_ENABLE when on */
    unsigned int mig_pending;
    unsigned int mig_max; /* most MIG devices the GPU can hold */
    int mig_count;        /* MIG devices found (listed in mig[]) */
    struct vnvml_mig mig[VNVML_MAX_MIG];
};

/* Opens the library at path (NULL: $GPU_VALIDATOR_LIBNVML, else "libnvidia-ml.so.1"), resolves the
 * entry points and calls nvmlInit_v2. VAL_NO_DRIVER when the library is absent or the driver is
 * not loaded, VAL_FAILED for other NVML errors; the reason is in err. */
int vnvml_open(struct vnvml *nv, const char *path, char *err, size_t errlen);

/* nvmlShutdown when initialized, then closes the library; safe on a zeroed struct. */
void vnvml_close(struct vnvml *nv);

/* Writes "what: text [code N]" for a failed call into err. */
void vnvml_error(const struct vnvml *nv, nvmlReturn_t rc, const char *what, char *err,
                 size_t errlen);

/* The driver version string and the number of GPUs. */
int vnvml_driver(struct vnvml *nv, char *version, size_t versionlen, unsigned int *count, char *err,
                 size_t errlen);

/* Name, UUID, memory of GPU index; with mig set, also its MIG mode and MIG devices. */
int vnvml_gpu(struct vnvml *nv, unsigned int index, int mig, struct vnvml_gpu *gpu, char *err,
              size_t errlen);

#endif
