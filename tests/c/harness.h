/*
 * harness.h: the little test framework of the C suites. A test is a function
 * returning nothing; it records failures with FAILF/EXPECT, and RUN prints one
 * "PASS name" or "FAIL name: first reason" line per test. harness_finish
 * prints the closing "N passed, M failed" line and returns the exit status.
 * Every binary arms a watchdog (harness_init) so nothing can hang CI.
 */
#ifndef PURLIN_TESTS_HARNESS_H_
#define PURLIN_TESTS_HARNESS_H_

#include <stdint.h>
#include <stdio.h>

/* Arms an alarm of `seconds` that ends the process with a message. */
void harness_init(const char* suite, unsigned seconds);
int harness_finish(void);

/* Runs fn as test name, unless HARNESS_ONLY is set and name lacks it. */
void harness_run(const char* name, void (*fn)(void));
#define RUN(fn) harness_run(#fn, fn)
/* Runs fn with a name of its own (table-driven tests). */
void harness_begin(const char* name);
void harness_end(void);

/* Records a failure of the current test (only the first reason is printed
 * on the FAIL line; the rest go to stderr). */
void harness_fail(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int harness_failed(void);
#define FAILF(...) harness_fail(__FILE__, __LINE__, __VA_ARGS__)
#define EXPECT(cond, ...) do { if (!(cond)) FAILF(__VA_ARGS__); } while (0)

/* Deterministic random numbers (splitmix64), so every process of a
 * multi-process test can compute every rank's data. */
typedef struct { uint64_t s; } rng_t;
uint64_t rng_next(rng_t* r);
double rng_unit(rng_t* r); /* in [0, 1) */
int rng_int(rng_t* r, int lo, int hi); /* in [lo, hi] */

/* Seconds since an arbitrary start. */
double now_s(void);

#endif /* PURLIN_TESTS_HARNESS_H_ */
