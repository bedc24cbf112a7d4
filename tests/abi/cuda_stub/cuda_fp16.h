/* cuda_fp16.h stand-in: nccl.h includes it but uses nothing from it in C. */
