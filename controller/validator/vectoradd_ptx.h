/* The vectorAdd kernel as PTX text, loaded by the validator through the CUDA driver JIT. */
#ifndef VECTORADD_PTX_H
#define VECTORADD_PTX_H

/* Name of the kernel entry in vectoradd_ptx. */
#define VECTORADD_ENTRY "vectorAdd"

/* vectorAdd(const float *A, const float *B, float *C, int n): C[i] = A[i] + B[i] for
 * i = blockDim.x * blockIdx.x + threadIdx.x when i < n. NUL-terminated PTX text. */
extern const char vectoradd_ptx[];

#endif
