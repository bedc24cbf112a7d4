/* launch.c: the CUDA Atom's kernel launch (launch.h). */
#include "launch.h"

#include <string.h>

typedef int (*ctxGetCurrentFn)(void **ctx);
typedef int (*ctxPushFn)(void *ctx);
typedef int (*ctxPopFn)(void **ctx);
typedef int (*launchKernelFn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, void *stream,
                              void **params, void **extra);

/* CUlaunchAttribute and CUlaunchConfig as cuda.h lays them out. */
typedef struct {
  int id;
  char pad[4];
  union {
    char bytes[64];
    unsigned long long align;
    int allowed; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
  } value;
} launchAttribute;
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void *hStream;
  launchAttribute *attrs;
  unsigned numAttrs;
} launchConfig;
typedef int (*launchKernelExFn)(const launchConfig *config, void *f, void **params, void **extra);
enum { launchAttributeProgrammaticStreamSerialization = 6 };

int purlin_launch(uintptr_t getCurrent, uintptr_t push, uintptr_t pop, uintptr_t launch,
                  uintptr_t launchEx, uintptr_t ctxAddr, uintptr_t fn, unsigned grid,
                  unsigned gridY, unsigned block, uintptr_t stream, void *arg) {
  void *ctx = (void *)ctxAddr;
  void *cur = 0;
  int r = ((ctxGetCurrentFn)getCurrent)(&cur);
  if (r) return r;
  if (cur != ctx && (r = ((ctxPushFn)push)(ctx))) return r;
  void *params[1] = {arg};
  if (launchEx) {
    /* Programmatic dependent launch: the kernel may start while the one
     * before it on stream ends (csrc/run.cu waits for it before it reads
     * anything that kernel writes). */
    launchAttribute attr = {.id = launchAttributeProgrammaticStreamSerialization};
    attr.value.allowed = 1;
    launchConfig cfg = {grid, gridY, 1, block, 1, 1, 0, (void *)stream, &attr, 1};
    r = ((launchKernelExFn)launchEx)(&cfg, (void *)fn, params, 0);
  } else {
    r = ((launchKernelFn)launch)((void *)fn, grid, gridY, 1, block, 1, 1, 0, (void *)stream, params, 0);
  }
  if (cur != ctx) {
    void *popped;
    int r2 = ((ctxPopFn)pop)(&popped);
    if (!r) r = r2;
  }
  return r;
}

int purlin_replay(void *rec, const uint64_t *bufs, int n, uintptr_t stream) {
  const purlinReplay *h = (const purlinReplay *)rec;
  /* As launchOrder.sameStream: another stream needs the slow path's
   * ordering (Replay records none for the per-thread stream). */
  if (__atomic_load_n(h->last, __ATOMIC_ACQUIRE) != ~(uint64_t)stream) return -1;
  unsigned char *arg = (unsigned char *)rec + purlinReplayArgs;
  for (int i = 0; i < n; i++) {
    memcpy(arg + h->send + 8 * i, &bufs[2 * i], sizeof *bufs);
    memcpy(arg + h->recv + 8 * i, &bufs[2 * i + 1], sizeof *bufs);
  }
  return purlin_launch(h->getCurrent, h->push, h->pop, h->launch, h->launchEx, h->ctx, h->fn, h->grid, 1,
                       h->block, stream, arg);
}
