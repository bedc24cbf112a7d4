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

typedef int (*streamIsCapturingFn)(void *stream, int *status);

/* admit says how a launch on img goes: admitRetry where the slow path must
 * pin the image (stream is being captured) or find its Plan again (the
 * image is being reclaimed, or was), admitPinned for a pinned image, and
 * admitCounted once it has counted the launch of a live one. The count
 * comes before the second look at the state, and the rank's reclaim marks
 * an image retired before it reads the count: a launch the reclaim does
 * not count is one that sees the mark and backs off. */
enum { admitRetry, admitPinned, admitCounted };

static int admit(purlinImage *img, uintptr_t isCapturing, uintptr_t stream) {
  uint64_t s = __atomic_load_n(&img->state, __ATOMIC_SEQ_CST);
  if (s != 0) return s == purlinImagePinned ? admitPinned : admitRetry;
  int status = 0;
  if (((streamIsCapturingFn)isCapturing)((void *)stream, &status) || status != 0) return admitRetry;
  __atomic_add_fetch(&img->launched, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&img->state, __ATOMIC_SEQ_CST) == 0) return admitCounted;
  __atomic_sub_fetch(&img->launched, 1, __ATOMIC_SEQ_CST);
  return admitRetry;
}

static int enqueue(uintptr_t launch, uintptr_t launchEx, uintptr_t fn, unsigned grid, unsigned gridY,
                   unsigned block, uintptr_t stream, void *arg) {
  void *params[1] = {arg};
  if (launchEx) {
    /* Programmatic dependent launch: the kernel may start while the one
     * before it on stream ends (csrc/run.cu waits for it before it reads
     * anything that kernel writes). */
    launchAttribute attr = {.id = launchAttributeProgrammaticStreamSerialization};
    attr.value.allowed = 1;
    launchConfig cfg = {grid, gridY, 1, block, 1, 1, 0, (void *)stream, &attr, 1};
    return ((launchKernelExFn)launchEx)(&cfg, (void *)fn, params, 0);
  }
  return ((launchKernelFn)launch)((void *)fn, grid, gridY, 1, block, 1, 1, 0, (void *)stream, params, 0);
}

uint32_t purlinSharedDevices[purlinMaxDevices];

int purlin_launch(uintptr_t getCurrent, uintptr_t push, uintptr_t pop, uintptr_t launch,
                  uintptr_t launchEx, uintptr_t ctxAddr, uintptr_t fn, unsigned grid,
                  unsigned gridY, unsigned block, uintptr_t stream, void *arg,
                  purlinImage *img, uintptr_t isCapturing) {
  void *ctx = (void *)ctxAddr;
  void *cur = 0;
  int r = ((ctxGetCurrentFn)getCurrent)(&cur);
  if (r) return r;
  if (cur != ctx && (r = ((ctxPushFn)push)(ctx))) return r;
  /* in ctx: the legacy stream's capture is the context's */
  int a = img != 0 ? admit(img, isCapturing, stream) : admitPinned;
  if (a == admitRetry) {
    r = purlinLaunchRetry;
  } else {
    r = enqueue(launch, launchEx, fn, grid, gridY, block, stream, arg);
    if (r && a == admitCounted) __atomic_sub_fetch(&img->launched, 1, __ATOMIC_SEQ_CST); /* nothing enqueued */
  }
  if (cur != ctx) {
    void *popped;
    int r2 = ((ctxPopFn)pop)(&popped);
    if (r == purlinLaunchRetry && r2) r = r2; /* after an enqueue, 0 stands (launch.h) */
  }
  return r;
}

int purlin_replay(void *rec, const uint64_t *bufs, int n, uintptr_t stream) {
  const purlinReplay *h = (const purlinReplay *)rec;
  /* As launchOrder.sameStream: another stream needs the slow path's
   * ordering (Replay records none for the per-thread stream). */
  if (__atomic_load_n(h->last, __ATOMIC_ACQUIRE) != ~(uint64_t)stream) return purlinLaunchRetry;
  unsigned char *arg = (unsigned char *)rec + purlinReplayArgs;
  for (int i = 0; i < n; i++) {
    memcpy(arg + h->send + 8 * i, &bufs[2 * i], sizeof *bufs);
    memcpy(arg + h->recv + 8 * i, &bufs[2 * i + 1], sizeof *bufs);
  }
  uintptr_t launchEx = h->launchEx && !__atomic_load_n(h->shared, __ATOMIC_RELAXED) ? h->launchEx : 0;
  return purlin_launch(h->getCurrent, h->push, h->pop, h->launch, launchEx, h->ctx, h->fn, h->grid, 1,
                       h->block, stream, arg, h->img, h->isCapturing);
}

int purlin_replay_nothing(void *rec, const uint64_t *bufs, int n, uintptr_t stream) {
  (void)rec, (void)bufs, (void)n, (void)stream;
  return 0;
}
