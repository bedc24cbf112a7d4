/*
 * backend.h: what purlin-perf needs from the memory and stream system of
 * its ranks. backend_host.c (the default) uses host memory and Purlin's host
 * streams; backend_cuda.c (-DPERF_CUDA) uses one GPU per rank, CUDA streams
 * and, for -G, CUDA graphs. All functions report failures themselves and
 * return nonzero; the benchmark then stops.
 */
#ifndef PERF_BACKEND_H_
#define PERF_BACKEND_H_

#include <stddef.h>
#include <stdio.h>

#include "nccl_api.h"

/* backend_name is "host" or "cuda", for the run header. */
extern const char* const backend_name;

/* backend_init prepares ranks [first, first+count) of nranks; call before any NCCL call. */
int backend_init(int first, int count, int nranks);
void backend_fini(void);

/* backend_select_rank makes rank r current (cudaSetDevice); NCCL binds a new communicator to it. */
int backend_select_rank(int r);

/* Buffers live where rank r's collectives can use them. An upload or download
 * comes after the work already queued on rank r's stream and has ended when it
 * returns, so a collective issued next sees the uploaded data in full. */
void* backend_alloc(int r, size_t bytes);
void backend_free(int r, void* p);
int backend_upload(int r, void* dst, const void* host, size_t bytes);
int backend_download(int r, void* host, const void* src, size_t bytes);

/* Each rank has one stream; backend_sync waits until its work is done,
 * polling the communicator's async error so a failed collective is reported. */
cudaStream_t backend_stream(int r);
int backend_sync(int r, ncclComm_t comm);

/* A monotonic clock in microseconds. */
double backend_now_us(void);

/* CUDA graphs (-G): capture rank r's stream, instantiate its graph once every rank's capture has
 * ended and before any rank launches (instantiating may allocate, which holds later work behind the
 * ranks already waiting: README, ranks that share a GPU), then replay it. The host
 * backend returns errors. */
int backend_graph_supported(void);
int backend_capture_begin(int r);
int backend_capture_end(int r);
int backend_graph_instantiate(int r);
int backend_graph_launch(int r);
void backend_graph_destroy(int r);

/* backend_describe prints rank r's device line for the run header. */
void backend_describe(FILE* out, int r);

#endif
