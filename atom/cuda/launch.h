/* launch.h: the CUDA Atom's launch from C (launch.c), for its Go code and for
 * a launch that C issues again without Go (purlin_replay, capi's call cache). */
#ifndef PURLIN_CUDA_LAUNCH_H_
#define PURLIN_CUDA_LAUNCH_H_

#include <stdint.h>

/* purlinImage is what a launch checks of the Plan image its kernel reads
 * (atom/cuda images.go), in C memory, where a record may keep it: how many
 * times it was launched outside a graph capture (purlin_run, with the
 * purlin_epilogue after it, counts once), and its state. A rank reclaims an
 * image that is neither pinned nor busy, once every block of those
 * launches has counted itself in the image's header. */
typedef struct {
  uint64_t launched;
  uint64_t state;
} purlinImage;

enum {
  purlinImagePinned = 1,  /* a graph holds it (or a launch met a reclaim): kept while the rank lives */
  purlinImageRetired = 2, /* being reclaimed: launch nothing on it now */
  purlinImageFreed = 4,   /* reclaimed: its memory holds other images */
  purlinLaunchRetry = -1  /* nothing enqueued: the caller takes the slow path */
};

/* purlin_launch calls cuLaunchKernel (or cuLaunchKernelEx with programmatic
 * dependent launch, when launchEx is set) through its pointer with one
 * by-value argument (the Launch struct at arg), in ctx: when ctx is not the
 * thread's current context it is pushed for the launch and popped after, so
 * the caller's context is left as it was. With img set it launches only on
 * an image that is pinned, or live while stream is not capturing
 * (isCapturing is cuStreamIsCapturing), counting the launch; otherwise it
 * returns purlinLaunchRetry: the caller pins the image, or uploads its Plan
 * again, in the slow path. It returns an error only where it enqueued
 * nothing (a pop that fails after the kernel is enqueued is not reported: a
 * caller taking the launch for undone would launch it twice). */
__attribute__((visibility("hidden"))) int purlin_launch(uintptr_t getCurrent, uintptr_t push, uintptr_t pop, uintptr_t launch,
                  uintptr_t launchEx, uintptr_t ctxAddr, uintptr_t fn, unsigned grid,
                  unsigned gridY, unsigned block, uintptr_t stream, void *arg,
                  purlinImage *img, uintptr_t isCapturing);

/* purlinSharedDevices[d] is set (1) once a communicator of this process put
 * two or more of its ranks on device d (atom/cuda markShared): every launch
 * on it, a recorded one's too, is then no programmatic dependent launch. */
enum { purlinMaxDevices = 64 };
__attribute__((visibility("hidden"))) extern uint32_t purlinSharedDevices[purlinMaxDevices];

/* purlinReplay heads a recorded launch (Rank.Replay): everything
 * purlin_launch takes but the stream and the Launch argument, which follows
 * the head at purlinReplayArgs bytes. */
typedef struct {
  uintptr_t getCurrent, push, pop, launch, launchEx, ctx, fn, isCapturing;
  purlinImage *img; /* the image the kernel reads, or 0 where it stays while the rank lives */
  /* last is the rank's launch-order word: ~stream of its latest launch.
   * A replay is issued only on that stream, which orders it by itself. */
  const uint64_t *last;
  /* shared is the rank's device's purlinSharedDevices entry, where launchEx
   * is set: once it is set, the record launches with launch instead. */
  const uint32_t *shared;
  uint32_t grid, block;
  uint32_t send, recv; /* offsets in the Launch argument of its inputs and outputs (8 bytes each) */
} purlinReplay;

enum { purlinReplayArgs = (sizeof(purlinReplay) + 15) & ~15 };

/* purlin_replay issues the launch recorded at rec (a copy the caller owns:
 * its buffers' addresses are written in place) with n buffer pairs, pair i
 * (bufs[2i] its input, bufs[2i+1] its output) being the Plan's buffer i,
 * n at most MaxBuffers. It returns 0 once the kernel is enqueued,
 * purlinLaunchRetry without enqueuing anything where stream is not the
 * rank's latest (the caller takes the slow path, which orders the streams)
 * or purlin_launch says so, else the driver's error, also with nothing
 * enqueued. */
__attribute__((visibility("hidden"))) int purlin_replay(void *rec, const uint64_t *bufs, int n, uintptr_t stream);

/* purlin_replay_nothing issues a Plan that launches nothing (no workers: an
 * empty call, or one rank's call in place that leaves its buffer as it is):
 * it returns 0, as the slow path's Launch does. */
__attribute__((visibility("hidden"))) int purlin_replay_nothing(void *rec, const uint64_t *bufs, int n, uintptr_t stream);

#endif
