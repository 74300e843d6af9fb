/* NVML access for the validator: libnvidia-ml loaded at run time, GPUs and MIG devices listed. */
#include "validator_nvml.h"

#include "validator_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LIBNVML "libnvidia-ml.so.1"

void vnvml_close(struct vnvml *nv)
{
    if (nv->initialized && nv->nvmlShutdown)
        nv->nvmlShutdown();
    if (nv->lib)
        dlclose(nv->lib);
    memset(nv, 0, sizeof(*nv));
}

void vnvml_error(const struct vnvml *nv, nvmlReturn_t rc, const char *what, char *err,
                 size_t errlen)
{
    const char *text = nv->nvmlErrorString ? nv->nvmlErrorString(rc) : NULL;
    snprintf(err, errlen, "%s failed: %s [NVML code %d]", what, text ? text : "unknown error", rc);
}

int vnvml_open(struct vnvml *nv, const char *path, char *err, size_t errlen)
{
    memset(nv, 0, sizeof(*nv));
    static const struct val_dl_sym syms[] = {
        {"nvmlInit_v2", offsetof(struct vnvml, nvmlInit)},
        {"nvmlShutdown", offsetof(struct vnvml, nvmlShutdown)},
        {"nvmlErrorString", offsetof(struct vnvml, nvmlErrorString)},
        {"nvmlSystemGetDriverVersion", offsetof(struct vnvml, nvmlSystemGetDriverVersion)},
        {"nvmlDeviceGetCount_v2", offsetof(struct vnvml, nvmlDeviceGetCount)},
        {"nvmlDeviceGetHandleByIndex_v2", offsetof(struct vnvml, nvmlDeviceGetHandleByIndex)},
        {"nvmlDeviceGetName", offsetof(struct vnvml, nvmlDeviceGetName)},
        {"nvmlDeviceGetUUID", offsetof(struct vnvml, nvmlDeviceGetUUID)},
        {"nvmlDeviceGetMemoryInfo", offsetof(struct vnvml, nvmlDeviceGetMemoryInfo)},
        {"nvmlDeviceGetMigMode", offsetof(struct vnvml, nvmlDeviceGetMigMode)},
        {"nvmlDeviceGetMaxMigDeviceCount", offsetof(struct vnvml, nvmlDeviceGetMaxMigDeviceCount)},
        {"nvmlDeviceGetMigDeviceHandleByIndex",
         offsetof(struct vnvml, nvmlDeviceGetMigDeviceHandleByIndex)},
    };
    int lrc =
        val_dl_load(&nv->lib, path, "GPU_VALIDATOR_LIBNVML", DEFAULT_LIBNVML, "the NVML library",
                    syms, sizeof(syms) / sizeof(syms[0]), nv, err, errlen);
    if (lrc != VAL_OK)
        return lrc;
    nvmlReturn_t rc = nv->nvmlInit();
    if (rc != NVML_SUCCESS) {
        vnvml_error(nv, rc, "nvmlInit_v2", err, errlen);
        int no_driver = rc == NVML_ERROR_DRIVER_NOT_LOADED || rc == NVML_ERROR_LIBRARY_NOT_FOUND;
        if (no_driver) {
            size_t len = strlen(err);
            snprintf(err + len, errlen - len, " (is the NVIDIA kernel module loaded?)");
        }
        vnvml_close(nv);
        return no_driver ? VAL_NO_DRIVER : VAL_FAILED;
    }
    nv->initialized = 1;
    return VAL_OK;
}

int vnvml_driver(struct vnvml *nv, char *version, size_t versionlen, unsigned int *count, char *err,
                 size_t errlen)
{
    nvmlReturn_t rc = nv->nvmlSystemGetDriverVersion(version, (unsigned int)versionlen);
    if (rc != NVML_SUCCESS) {
        vnvml_error(nv, rc, "nvmlSystemGetDriverVersion", err, errlen);
        return VAL_FAILED;
    }
    version[versionlen - 1] = '\0';
    rc = nv->nvmlDeviceGetCount(count);
    if (rc != NVML_SUCCESS) {
        vnvml_error(nv, rc, "nvmlDeviceGetCount_v2", err, errlen);
        return VAL_FAILED;
    }
    return VAL_OK;
}

/* Name, UUID and total memory of one device (a GPU or a MIG device). */
static int device_basics(struct vnvml *nv, nvmlDevice_t dev, char *name, char *uuid,
                         unsigned long long *mem, const char *what, char *err, size_t errlen)
{
    char call[128];
    nvmlMemory_t m = {0};
    nvmlReturn_t rc = nv->nvmlDeviceGetName(dev, name, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    if (rc != NVML_SUCCESS) {
        snprintf(call, sizeof(call), "nvmlDeviceGetName (%s)", what);
        vnvml_error(nv, rc, call, err, errlen);
        return VAL_FAILED;
    }
    name[NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1] = '\0';
    rc = nv->nvmlDeviceGetUUID(dev, uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    if (rc != NVML_SUCCESS) {
        snprintf(call, sizeof(call), "nvmlDeviceGetUUID (%s)", what);
        vnvml_error(nv, rc, call, err, errlen);
        return VAL_FAILED;
    }
    uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE - 1] = '\0';
    rc = nv->nvmlDeviceGetMemoryInfo(dev, &m);
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
        *mem = 0; /* some GPUs and virtual GPUs do not report it */
        return VAL_OK;
    }
    if (rc != NVML_SUCCESS) {
        snprintf(call, sizeof(call), "nvmlDeviceGetMemoryInfo (%s)", what);
        vnvml_error(nv, rc, call, err, errlen);
        return VAL_FAILED;
    }
    *mem = m.total;
    return VAL_OK;
}

int vnvml_gpu(struct vnvml *nv, unsigned int index, int mig, struct vnvml_gpu *gpu, char *err,
              size_t errlen)
{
    char what[64];
    nvmlDevice_t dev = NULL;
    memset(gpu, 0, sizeof(*gpu));
    snprintf(what, sizeof(what), "GPU %u", index);
    nvmlReturn_t rc = nv->nvmlDeviceGetHandleByIndex(index, &dev);
    if (rc != NVML_SUCCESS) {
        snprintf(what, sizeof(what), "nvmlDeviceGetHandleByIndex_v2 (GPU %u)", index);
        vnvml_error(nv, rc, what, err, errlen);
        return VAL_FAILED;
    }
    if (device_basics(nv, dev, gpu->name, gpu->uuid, &gpu->mem_total, what, err, errlen) != VAL_OK)
        return VAL_FAILED;
    if (!mig)
        return VAL_OK;

    rc = nv->nvmlDeviceGetMigMode(dev, &gpu->mig_current, &gpu->mig_pending);
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        return VAL_OK; /* a GPU without MIG */
    if (rc != NVML_SUCCESS) {
        snprintf(what, sizeof(what), "nvmlDeviceGetMigMode (GPU %u)", index);
        vnvml_error(nv, rc, what, err, errlen);
        return VAL_FAILED;
    }
    gpu->mig_capable = 1;
    if (gpu->mig_current != NVML_DEVICE_MIG_ENABLE)
        return VAL_OK;
    rc = nv->nvmlDeviceGetMaxMigDeviceCount(dev, &gpu->mig_max);
    if (rc != NVML_SUCCESS) {
        snprintf(what, sizeof(what), "nvmlDeviceGetMaxMigDeviceCount (GPU %u)", index);
        vnvml_error(nv, rc, what, err, errlen);
        return VAL_FAILED;
    }
    /* MIG device indices can have gaps: NOT_FOUND marks an unused slot. */
    for (unsigned int i = 0; i < gpu->mig_max && gpu->mig_count < VNVML_MAX_MIG; i++) {
        nvmlDevice_t m = NULL;
        rc = nv->nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &m);
        if (rc == NVML_ERROR_NOT_FOUND)
            continue;
        if (rc != NVML_SUCCESS) {
            snprintf(what, sizeof(what), "nvmlDeviceGetMigDeviceHandleByIndex (GPU %u, MIG %u)",
                     index, i);
            vnvml_error(nv, rc, what, err, errlen);
            return VAL_FAILED;
        }
        struct vnvml_mig *md = &gpu->mig[gpu->mig_count];
        md->index = i;
        snprintf(what, sizeof(what), "GPU %u MIG device %u", index, i);
        if (device_basics(nv, m, md->name, md->uuid, &md->mem_total, what, err, errlen) != VAL_OK)
            return VAL_FAILED;
        gpu->mig_count++;
    }
    return VAL_OK;
}
