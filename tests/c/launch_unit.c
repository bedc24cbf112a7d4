/*
 * launch_unit.c: the CUDA Atom's launch from C (atom/cuda/launch.c) alone,
 * with fake driver entry points: which launches go ahead on a Plan image
 * the rank may reclaim, which are counted, and which it hands back to the
 * slow path (purlinLaunchRetry) with nothing enqueued and nothing counted.
 */
#include <string.h>

#include "harness.h"
#include "launch.h"

static struct {
  int launches;      /* kernels enqueued */
  int launchesEx;    /* of them, programmatic dependent launches */
  void* current;     /* the thread's context (0: the rank's, 0x100) */
  int popResult;     /* what cuCtxPopCurrent returns */
  int result;        /* what the launch returns */
  int capturing;     /* what cuStreamIsCapturing reports */
  int captureError;  /* its result */
  purlinImage* flip; /* set: the image's state changes to flipTo as the capture is asked */
  uint64_t flipTo;
  uint64_t countedAt; /* the image's launches when the kernel was enqueued */
  purlinImage* img;
} fake;

static int fake_get_current(void** ctx) { *ctx = fake.current ? fake.current : (void*)0x100; return 0; }
static int fake_push(void* ctx) { (void)ctx; return 0; }
static int fake_pop(void** ctx) { *ctx = (void*)0x100; return fake.popResult; }
static int fake_launch(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shmem, void* stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)stream, (void)params, (void)extra;
  if (fake.result == 0) fake.launches++;
  if (fake.img) fake.countedAt = fake.img->launched;
  return fake.result;
}
static int fake_launch_ex(const void* cfg, void* f, void** params, void** extra) {
  (void)cfg, (void)f, (void)params, (void)extra;
  if (fake.result == 0) fake.launches++, fake.launchesEx++;
  return fake.result;
}
static int fake_is_capturing(void* stream, int* status) {
  (void)stream;
  *status = fake.capturing;
  if (fake.flip) fake.flip->state = fake.flipTo; /* a reclaim or a pin, between two looks */
  return fake.captureError;
}

static int launch_on(purlinImage* img) {
  static unsigned char arg[64];
  fake.img = img;
  return purlin_launch((uintptr_t)fake_get_current, (uintptr_t)fake_push, (uintptr_t)fake_pop,
                       (uintptr_t)fake_launch, 0, 0x100, 0x200, 8, 1, 512, 0x51, arg, img,
                       (uintptr_t)fake_is_capturing);
}

static void reset(void) { memset(&fake, 0, sizeof fake); }

static void test_without_image(void) {
  reset();
  fake.capturing = 1;
  EXPECT(launch_on(NULL) == 0 && fake.launches == 1, "an image that stays launches anywhere, uncounted");
}

static void test_live_image_counted(void) {
  reset();
  purlinImage img = {0};
  for (int i = 0; i < 3; i++) EXPECT(launch_on(&img) == 0, "launch %d", i);
  EXPECT(fake.launches == 3 && img.launched == 3, "%d launches, %llu counted", fake.launches,
         (unsigned long long)img.launched);
  EXPECT(fake.countedAt == 3, "counted before it was enqueued (%llu)", (unsigned long long)fake.countedAt);
}

static void test_capture_needs_a_pin(void) {
  reset();
  purlinImage img = {.launched = 5};
  fake.capturing = 1;
  EXPECT(launch_on(&img) == purlinLaunchRetry, "a capture of a live image goes to the slow path");
  fake.capturing = 0, fake.captureError = 900; /* e.g. an implicit capture: the legacy stream */
  EXPECT(launch_on(&img) == purlinLaunchRetry, "a stream whose capture cannot be asked too");
  EXPECT(fake.launches == 0 && img.launched == 5, "nothing enqueued, nothing counted");
  img.state = purlinImagePinned, fake.capturing = 1, fake.captureError = 0;
  EXPECT(launch_on(&img) == 0 && fake.launches == 1, "a pinned image launches in a capture");
  EXPECT(img.launched == 5, "uncounted");
}

static void test_reclaimed_images_refused(void) {
  uint64_t states[] = {purlinImageRetired, purlinImageFreed};
  for (int i = 0; i < 2; i++) {
    reset();
    purlinImage img = {.launched = 2, .state = states[i]};
    EXPECT(launch_on(&img) == purlinLaunchRetry, "state %llu", (unsigned long long)states[i]);
    EXPECT(fake.launches == 0 && img.launched == 2, "state %llu: nothing enqueued, nothing counted",
           (unsigned long long)states[i]);
  }
}

/* A reclaim that marks the image between the launch's two looks at it:
 * the count it made is taken back, and nothing is enqueued. */
static void test_marked_between_looks(void) {
  reset();
  purlinImage img = {.launched = 7};
  fake.flip = &img, fake.flipTo = purlinImageRetired;
  EXPECT(launch_on(&img) == purlinLaunchRetry, "marked meanwhile");
  EXPECT(fake.launches == 0 && img.launched == 7, "%d enqueued, %llu counted", fake.launches,
         (unsigned long long)img.launched);
}

static void test_failed_launch_uncounted(void) {
  reset();
  purlinImage img = {.launched = 1};
  fake.result = 700;
  EXPECT(launch_on(&img) == 700, "the driver's error");
  EXPECT(img.launched == 1, "a launch that enqueued nothing is not counted (%llu)", (unsigned long long)img.launched);
}

static void test_replay_checks_the_image(void) {
  reset();
  static _Alignas(16) unsigned char rec[purlinReplayArgs + 1024];
  purlinImage img = {.state = purlinImageFreed};
  uint64_t last = ~(uint64_t)0x51;
  purlinReplay h = {.getCurrent = (uintptr_t)fake_get_current, .push = (uintptr_t)fake_push, .pop = (uintptr_t)fake_pop,
                    .launch = (uintptr_t)fake_launch, .ctx = 0x100, .fn = 0x200, .isCapturing = (uintptr_t)fake_is_capturing,
                    .img = &img, .last = &last, .grid = 8, .block = 512, .send = 0, .recv = 8};
  memcpy(rec, &h, sizeof h);
  uint64_t bufs[2] = {0x1000, 0x2000};
  EXPECT(purlin_replay(rec, bufs, 1, 0x51) == purlinLaunchRetry && fake.launches == 0, "a record of a freed image");
  img.state = 0;
  EXPECT(purlin_replay(rec, bufs, 1, 0x51) == 0 && fake.launches == 1 && img.launched == 1, "a live one, counted");
  EXPECT(purlin_replay(rec, bufs, 1, 0x52) == purlinLaunchRetry && img.launched == 1, "another stream: the slow path orders it");
}

/* A launch enqueued in a context pushed for it stands though the pop then
 * fails: a caller told it failed would launch it again. A pop that fails
 * where nothing was enqueued is reported. */
static void test_pop_after_enqueue(void) {
  reset();
  fake.current = (void*)0x300, fake.popResult = 201;
  EXPECT(launch_on(NULL) == 0 && fake.launches == 1, "enqueued: 0, whatever the pop says");
  purlinImage img = {.state = purlinImageFreed};
  EXPECT(launch_on(&img) == 201 && fake.launches == 1, "nothing enqueued: the pop's error");
  fake.result = 700;
  EXPECT(launch_on(NULL) == 700, "the launch's own error first");
}

/* A record made with programmatic dependent launch launches without it once
 * its device is marked shared (a later communicator put two ranks on it). */
static void test_replay_drops_pdl_on_a_shared_device(void) {
  reset();
  static _Alignas(16) unsigned char rec[purlinReplayArgs + 1024];
  uint64_t last = ~(uint64_t)0x51;
  const int dev = purlinMaxDevices - 1;
  purlinReplay h = {.getCurrent = (uintptr_t)fake_get_current, .push = (uintptr_t)fake_push, .pop = (uintptr_t)fake_pop,
                    .launch = (uintptr_t)fake_launch, .launchEx = (uintptr_t)fake_launch_ex, .ctx = 0x100, .fn = 0x200,
                    .isCapturing = (uintptr_t)fake_is_capturing, .last = &last, .shared = &purlinSharedDevices[dev],
                    .grid = 8, .block = 512, .send = 0, .recv = 8};
  memcpy(rec, &h, sizeof h);
  uint64_t bufs[2] = {0x1000, 0x2000};
  EXPECT(purlin_replay(rec, bufs, 1, 0x51) == 0 && fake.launchesEx == 1, "PDL while the device is its rank's alone");
  __atomic_store_n(&purlinSharedDevices[dev], 1, __ATOMIC_RELAXED);
  EXPECT(purlin_replay(rec, bufs, 1, 0x51) == 0 && fake.launches == 2 && fake.launchesEx == 1, "no PDL once it is shared");
  __atomic_store_n(&purlinSharedDevices[dev], 0, __ATOMIC_RELAXED);
}

int main(void) {
  harness_init("launch_unit", 60);
  RUN(test_without_image);
  RUN(test_live_image_counted);
  RUN(test_capture_needs_a_pin);
  RUN(test_reclaimed_images_refused);
  RUN(test_marked_between_looks);
  RUN(test_failed_launch_uncounted);
  RUN(test_replay_checks_the_image);
  RUN(test_pop_after_enqueue);
  RUN(test_replay_drops_pdl_on_a_shared_device);
  return harness_finish();
}
