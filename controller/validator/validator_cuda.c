/* CUDA driver API access for the validator: libcuda loaded at run time, and the vectorAdd test. */
#include "validator_cuda.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "validator_dl.h"
#include "vectoradd_ptx.h"

#define DEFAULT_LIBCUDA "libcuda.so.1"

void vcuda_unload(struct vcuda *cu)
{
    if (cu->lib)
        dlclose(cu->lib);
    memset(cu, 0, sizeof(*cu));
}

int vcuda_load(struct vcuda *cu, const char *path, char *err, size_t errlen)
{
    memset(cu, 0, sizeof(*cu));
    /* Versioned names are those the CUDA headers map the plain names to. */
    static const struct val_dl_sym syms[] = {
        {"cuInit", offsetof(struct vcuda, cuInit)},
        {"cuDriverGetVersion", offsetof(struct vcuda, cuDriverGetVersion)},
        {"cuDeviceGetCount", offsetof(struct vcuda, cuDeviceGetCount)},
        {"cuDeviceGet", offsetof(struct vcuda, cuDeviceGet)},
        {"cuDeviceGetName", offsetof(struct vcuda, cuDeviceGetName)},
        {"cuDeviceGetAttribute", offsetof(struct vcuda, cuDeviceGetAttribute)},
        {"cuDevicePrimaryCtxRetain", offsetof(struct vcuda, cuDevicePrimaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease_v2", offsetof(struct vcuda, cuDevicePrimaryCtxRelease)},
        {"cuCtxSetCurrent", offsetof(struct vcuda, cuCtxSetCurrent)},
        {"cuCtxSynchronize", offsetof(struct vcuda, cuCtxSynchronize)},
        {"cuModuleLoadDataEx", offsetof(struct vcuda, cuModuleLoadDataEx)},
        {"cuModuleUnload", offsetof(struct vcuda, cuModuleUnload)},
        {"cuModuleGetFunction", offsetof(struct vcuda, cuModuleGetFunction)},
        {"cuMemAlloc_v2", offsetof(struct vcuda, cuMemAlloc)},
        {"cuMemFree_v2", offsetof(struct vcuda, cuMemFree)},
        {"cuMemcpyHtoD_v2", offsetof(struct vcuda, cuMemcpyHtoD)},
        {"cuMemcpyDtoH_v2", offsetof(struct vcuda, cuMemcpyDtoH)},
        {"cuLaunchKernel", offsetof(struct vcuda, cuLaunchKernel)},
        {"cuGetErrorName", offsetof(struct vcuda, cuGetErrorName)},
        {"cuGetErrorString", offsetof(struct vcuda, cuGetErrorString)},
    };
    return val_dl_load(&cu->lib, path, "GPU_VALIDATOR_LIBCUDA", DEFAULT_LIBCUDA,
                       "a CUDA driver library", syms, sizeof(syms) / sizeof(syms[0]), cu, err,
                       errlen);
}

void vcuda_error(const struct vcuda *cu, CUresult rc, const char *what, char *err, size_t errlen)
{
    const char *name = NULL, *text = NULL;
    if (cu->cuGetErrorName && cu->cuGetErrorName(rc, &name) != CUDA_SUCCESS)
        name = NULL;
    if (cu->cuGetErrorString && cu->cuGetErrorString(rc, &text) != CUDA_SUCCESS)
        text = NULL;
    snprintf(err, errlen, "%s failed: %s (%s)", what, name ? name : "unknown CUresult",
             text ? text : "no description");
    if (!name) {
        size_t len = strlen(err);
        snprintf(err + len, errlen - len, " [code %d]", rc);
    }
}

int vcuda_init(struct vcuda *cu, int *count, FILE *out, char *err, size_t errlen)
{
    CUresult rc = cu->cuInit(0);
    if (rc != CUDA_SUCCESS) {
        vcuda_error(cu, rc, "cuInit", err, errlen);
        return VAL_FAILED;
    }
    int version = 0;
    rc = cu->cuDriverGetVersion(&version);
    if (rc != CUDA_SUCCESS) {
        vcuda_error(cu, rc, "cuDriverGetVersion", err, errlen);
        return VAL_FAILED;
    }
    rc = cu->cuDeviceGetCount(count);
    if (rc != CUDA_SUCCESS) {
        vcuda_error(cu, rc, "cuDeviceGetCount", err, errlen);
        return VAL_FAILED;
    }
    fprintf(out, "CUDA driver API version %d.%d, %d CUDA device(s) visible\n", version / 1000,
            (version % 1000) / 10, *count);
    if (*count < 1) {
        snprintf(err, errlen,
                 "the CUDA driver sees no device (check the GPUs given to this "
                 "container: CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES)");
        return VAL_FAILED;
    }
    return VAL_OK;
}

unsigned int vectoradd_blocks(int n, int threads)
{
    return (unsigned int)((n + threads - 1) / threads);
}

void vectoradd_fill(float *v, int n, unsigned int *seed)
{
    /* xorshift32: the same values everywhere for one seed; zero is not a valid state. */
    uint32_t x = *seed ? *seed : 0x9e3779b9u;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = (float)(x >> 8) / 16777216.0f;
    }
    *seed = x;
}

int vectoradd_verify(const float *a, const float *b, const float *c, int n, char *err,
                     size_t errlen)
{
    for (int i = 0; i < n; i++) {
        /* Written so that a NaN result fails too. */
        if (!(fabsf(a[i] + b[i] - c[i]) <= VECTORADD_TOLERANCE)) {
            snprintf(err, errlen, "Result verification failed at element %d: %.6g + %.6g != %.6g",
                     i, a[i], b[i], c[i]);
            return i;
        }
    }
    return -1;
}

/* Everything vcuda_vectoradd allocates, released in one place. */
struct va_state {
    CUdevice dev;
    int have_ctx;
    CUmodule mod;
    CUdeviceptr d_a, d_b, d_c;
    float *a, *b, *c;
};

/* Releases what was acquired; the first failure is reported only when none happened before. */
static int va_release(struct vcuda *cu, struct va_state *s, int rc, char *err, size_t errlen)
{
    CUdeviceptr *bufs[] = {&s->d_a, &s->d_b, &s->d_c};
    for (size_t i = 0; i < 3; i++) {
        if (*bufs[i]) {
            CUresult r = cu->cuMemFree(*bufs[i]);
            if (r != CUDA_SUCCESS && rc == VAL_OK) {
                vcuda_error(cu, r, "cuMemFree", err, errlen);
                rc = VAL_FAILED;
            }
            *bufs[i] = 0;
        }
    }
    if (s->mod) {
        CUresult r = cu->cuModuleUnload(s->mod);
        if (r != CUDA_SUCCESS && rc == VAL_OK) {
            vcuda_error(cu, r, "cuModuleUnload", err, errlen);
            rc = VAL_FAILED;
        }
        s->mod = NULL;
    }
    if (s->have_ctx) {
        cu->cuCtxSetCurrent(NULL);
        CUresult r = cu->cuDevicePrimaryCtxRelease(s->dev);
        if (r != CUDA_SUCCESS && rc == VAL_OK) {
            vcuda_error(cu, r, "cuDevicePrimaryCtxRelease", err, errlen);
            rc = VAL_FAILED;
        }
        s->have_ctx = 0;
    }
    free(s->a);
    free(s->b);
    free(s->c);
    s->a = s->b = s->c = NULL;
    return rc;
}

#define CU_CHECK(call, what)                                                                       \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            vcuda_error(cu, r_, what, err, errlen);                                                \
            rc = VAL_FAILED;                                                                       \
            goto cleanup;                                                                          \
        }                                                                                          \
    } while (0)

int vcuda_vectoradd(struct vcuda *cu, int ordinal, FILE *out, char *err, size_t errlen)
{
    return vcuda_vectoradd_ptx(cu, ordinal, vectoradd_ptx, out, err, errlen);
}

int vcuda_vectoradd_ptx(struct vcuda *cu, int ordinal, const char *ptx, FILE *out, char *err,
                        size_t errlen)
{
    struct va_state s = {0};
    int rc = VAL_OK;
    const int n = VECTORADD_ELEMENTS;
    const size_t bytes = (size_t)n * sizeof(float);
    char name[256] = "";
    int major = 0, minor = 0;
    char jit_log[4096] = "";
    CUcontext ctx = NULL;
    CUfunction fn = NULL;
    CUresult lr;
    int opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {jit_log, (void *)(uintptr_t)sizeof(jit_log)};
    unsigned int seed = 0x5eed1234u;
    const unsigned int threads = VECTORADD_THREADS_PER_BLOCK;
    const unsigned int blocks = vectoradd_blocks(n, (int)threads);
    int n_arg = n;
    void *params[] = {&s.d_a, &s.d_b, &s.d_c, &n_arg};

    fprintf(out, "[Vector addition of %d elements]\n", n);
    CU_CHECK(cu->cuDeviceGet(&s.dev, ordinal), "cuDeviceGet");
    CU_CHECK(cu->cuDeviceGetName(name, (int)sizeof(name), s.dev), "cuDeviceGetName");
    CU_CHECK(cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s.dev),
             "cuDeviceGetAttribute");
    CU_CHECK(cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s.dev),
             "cuDeviceGetAttribute");
    name[sizeof(name) - 1] = '\0';
    fprintf(out, "CUDA device %d: \"%s\" with compute capability %d.%d\n", ordinal, name, major,
            minor);

    CU_CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, s.dev), "cuDevicePrimaryCtxRetain");
    s.have_ctx = 1;
    CU_CHECK(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

    /* JIT-compile the PTX; on failure the compiler's log says why. */
    lr = cu->cuModuleLoadDataEx(&s.mod, ptx, 2, opts, vals);
    if (lr != CUDA_SUCCESS) {
        s.mod = NULL;
        vcuda_error(cu, lr, "cuModuleLoadDataEx (vectorAdd PTX)", err, errlen);
        jit_log[sizeof(jit_log) - 1] = '\0';
        if (jit_log[0]) {
            size_t len = strlen(err);
            snprintf(err + len, errlen - len, ": %s", jit_log);
        }
        rc = VAL_FAILED;
        goto cleanup;
    }
    CU_CHECK(cu->cuModuleGetFunction(&fn, s.mod, VECTORADD_ENTRY), "cuModuleGetFunction");

    s.a = malloc(bytes);
    s.b = malloc(bytes);
    s.c = malloc(bytes);
    if (!s.a || !s.b || !s.c) {
        snprintf(err, errlen, "out of host memory for %zu-byte vectors", bytes);
        rc = VAL_FAILED;
        goto cleanup;
    }
    vectoradd_fill(s.a, n, &seed);
    vectoradd_fill(s.b, n, &seed);
    /* A value no correct sum can have: an element the kernel never wrote fails the check. */
    for (int i = 0; i < n; i++)
        s.c[i] = -1.0f;

    CU_CHECK(cu->cuMemAlloc(&s.d_a, bytes), "cuMemAlloc (A)");
    CU_CHECK(cu->cuMemAlloc(&s.d_b, bytes), "cuMemAlloc (B)");
    CU_CHECK(cu->cuMemAlloc(&s.d_c, bytes), "cuMemAlloc (C)");

    fprintf(out, "Copy input data from the host memory to the CUDA device\n");
    CU_CHECK(cu->cuMemcpyHtoD(s.d_a, s.a, bytes), "cuMemcpyHtoD (A)");
    CU_CHECK(cu->cuMemcpyHtoD(s.d_b, s.b, bytes), "cuMemcpyHtoD (B)");
    /* C starts with the sentinel too, so stale device memory cannot pass for a result. */
    CU_CHECK(cu->cuMemcpyHtoD(s.d_c, s.c, bytes), "cuMemcpyHtoD (C)");

    fprintf(out, "CUDA kernel launch with %u blocks of %u threads\n", blocks, threads);
    CU_CHECK(cu->cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel");
    CU_CHECK(cu->cuCtxSynchronize(), "cuCtxSynchronize (vectorAdd kernel)");

    fprintf(out, "Copy output data from the CUDA device to the host memory\n");
    CU_CHECK(cu->cuMemcpyDtoH(s.c, s.d_c, bytes), "cuMemcpyDtoH (C)");

    if (vectoradd_verify(s.a, s.b, s.c, n, err, errlen) >= 0) {
        rc = VAL_FAILED;
        goto cleanup;
    }
    fprintf(out, "Verified %d of %d elements on CUDA device %d (tolerance %g)\n", n, n, ordinal,
            (double)VECTORADD_TOLERANCE);

cleanup:
    rc = va_release(cu, &s, rc, err, errlen);
    fflush(out);
    return rc;
}
