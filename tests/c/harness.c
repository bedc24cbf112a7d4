/* harness.c: see harness.h. */
#include "harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* g_suite = "?";
static const char* g_test;
static char g_reason[700];
static int g_failed_now, g_passed, g_failed;

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "\nFAIL watchdog: the test binary ran past its time limit (a hang)\n";
  ssize_t rc = write(2, msg, sizeof msg - 1);
  (void)rc;
  _exit(124);
}

void harness_init(const char* suite, unsigned seconds) {
  g_suite = suite;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(seconds);
}

int harness_finish(void) {
  printf("%s: %d passed, %d failed\n", g_suite, g_passed, g_failed);
  return g_failed ? 1 : 0;
}

void harness_begin(const char* name) {
  g_test = name;
  g_failed_now = 0;
  g_reason[0] = 0;
}

void harness_end(void) {
  if (g_failed_now) {
    g_failed++;
    printf("FAIL %s: %s\n", g_test, g_reason);
  } else {
    g_passed++;
    printf("PASS %s\n", g_test);
  }
}

void harness_run(const char* name, void (*fn)(void)) {
  const char* only = getenv("HARNESS_ONLY"); /* when set, run only the tests whose name contains it */
  if (only && *only && !strstr(name, only)) return;
  harness_begin(name);
  fn();
  harness_end();
}

void harness_fail(const char* file, int line, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!g_failed_now) snprintf(g_reason, sizeof g_reason, "%s (%s:%d)", buf, file, line);
  else fprintf(stderr, "  also %s: %s (%s:%d)\n", g_test ? g_test : "?", buf, file, line);
  g_failed_now++;
}

int harness_failed(void) { return g_failed_now; }

uint64_t rng_next(rng_t* r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double rng_unit(rng_t* r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

int rng_int(rng_t* r, int lo, int hi) { return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1)); }

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
