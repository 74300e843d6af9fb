/* CUDA driver API access for the validator: libcuda loaded at run time, and the vectorAdd test. */
#ifndef VALIDATOR_CUDA_H
#define VALIDATOR_CUDA_H

#include <stddef.h>
#include <stdio.h>

#include "validator.h"

/* The few driver API types the validator needs, declared here so that no CUDA headers are needed
 * to build it (the values are those of the public driver API). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS                                 0
#define CUDA_ERROR_NO_DEVICE                         100
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_JIT_ERROR_LOG_BUFFER                      5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES           6

/* The vectorAdd problem size and launch shape (those of the CUDA sample). */
#define VECTORADD_ELEMENTS          50000
#define VECTORADD_THREADS_PER_BLOCK 256
#define VECTORADD_TOLERANCE         1e-5f

/* libcuda.so.1 opened with dlopen, with the entry points the validator calls. */
struct vcuda {
    void *lib;
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuModuleLoadDataEx)(CUmodule *mod, const void *image, unsigned int n_options,
                                   int *options, void **option_values);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr dptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shared_bytes, CUstream stream, void **params,
                               void **extra);
    CUresult (*cuGetErrorName)(CUresult rc, const char **name);
    CUresult (*cuGetErrorString)(CUresult rc, const char **text);
};

/* Opens the driver library at path (NULL: $GPU_VALIDATOR_LIBCUDA, else "libcuda.so.1") and resolves
 * every entry point. On failure returns VAL_NO_DRIVER with the reason in err. */
int vcuda_load(struct vcuda *cu, const char *path, char *err, size_t errlen);

/* Closes the library; safe on a zeroed or already unloaded struct. */
void vcuda_unload(struct vcuda *cu);

/* Writes "what: NAME (text)" for a failed call into err. */
void vcuda_error(const struct vcuda *cu, CUresult rc, const char *what, char *err, size_t errlen);

/* cuInit(0), then the driver version and device count, reported on out. A count of zero fails. */
int vcuda_init(struct vcuda *cu, int *count, FILE *out, char *err, size_t errlen);

/* Runs vectorAdd on CUDA device ordinal: random inputs, 196 blocks of 256 threads, every element
 * checked on the host. Progress goes to out in the style of the CUDA sample. */
int vcuda_vectoradd(struct vcuda *cu, int ordinal, FILE *out, char *err, size_t errlen);

/* vcuda_vectoradd with another PTX text for the kernel (same entry and parameters), for tests. */
int vcuda_vectoradd_ptx(struct vcuda *cu, int ordinal, const char *ptx, FILE *out, char *err,
                        size_t errlen);

/* Number of blocks needed to cover n elements with threads per block. */
unsigned int vectoradd_blocks(int n, int threads);

/* Fills v with n pseudo-random values in [0, 1) from the generator state *seed. */
void vectoradd_fill(float *v, int n, unsigned int *seed);

/* Checks c[i] == a[i] + b[i] within VECTORADD_TOLERANCE for every i < n. Returns the index of the
 * first wrong element (its description in err) or -1 when all are right. */
int vectoradd_verify(const float *a, const float *b, const float *c, int n, char *err,
                     size_t errlen);

#endif
