/* cuda_runtime.h stand-in for compiling NCCL's nccl.h on a machine without
 * CUDA: nccl.h needs only cudaStream_t (an opaque pointer) and CUDART_VERSION. */
#ifndef PURLIN_ABI_CUDA_RUNTIME_STUB_H_
#define PURLIN_ABI_CUDA_RUNTIME_STUB_H_
#include <stddef.h> /* the real header brings size_t in */
#define CUDART_VERSION 13000
typedef struct CUstream_st* cudaStream_t;
#endif
