/*
 * reference.h: what each reduction should produce, computed in double from
 * the very inputs the ranks hold, and how far a correct result may be from it.
 */
#ifndef PURLIN_TESTS_REFERENCE_H_
#define PURLIN_TESTS_REFERENCE_H_

#include <stddef.h>
#include "harness.h"

/* Our op ids: NCCL's five plus PreMulSum (a run-time op in NCCL). */
enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3, OP_AVG = 4, OP_PREMULSUM = 5, OP_COUNT = 6 };
const char* op_name(int op);
/* Whether NCCL reduces dtype with op across nranks ranks: every op on every
 * type, except avg and PreMulSum on the float8 types on a one-rank
 * communicator (a reducing call of them returns ncclInvalidArgument). */
int op_defined(int dtype, int op, int nranks);
/* op where it is defined on dtype and nranks, else the previous op that is
 * (on one rank, PreMulSum and avg on a float8 type become min): for sweeps
 * that cycle ops, types and rank counts apart. */
int op_for(int dtype, int op, int nranks);

/* A random value of dtype suitable as an input of op, exactly representable. */
double ref_random_input(rng_t* r, int dtype, int op);
/* Rank `rank`'s PreMulSum scalar in the tests: every rank has its own (NCCL
 * lets ranks pass different scalars). Floats as dtype holds them; integers
 * as small signed values, which unsigned types hold wrapped (the products
 * agree modulo the type's width). */
double ref_premul_scalar(int dtype, int rank);

/* The reduction of xs[0..n-1] (xs[p] is rank p's input) under op, and the
 * largest distance from it a correct implementation may produce (0 for
 * integers, Max and Min: those must be exact). PreMulSum multiplies xs[p]
 * by rank p's scalar, the product rounded to dtype as rank p sends it. */
double ref_reduce(int dtype, int op, const double* xs, int n, double* tolerance);

#endif /* PURLIN_TESTS_REFERENCE_H_ */
