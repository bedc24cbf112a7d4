/*
 * nccl_api.h: which NCCL header purlin-perf compiles against.
 *
 * PERF_REAL_NCCL: the system's <nccl.h> (link -lnccl, or run on Purlin with
 * LD_PRELOAD); Purlin's V collectives are then left out.
 * Otherwise: Purlin's NCCL-compatible header, which also declares purlin.h;
 * PERF_PURLIN is defined and the V collectives are built.
 */
#ifndef PERF_NCCL_API_H_
#define PERF_NCCL_API_H_

#ifdef PERF_REAL_NCCL
#include <nccl.h>
#else
#include "purlin_nccl.h"
#define PERF_PURLIN 1
#endif

#endif
