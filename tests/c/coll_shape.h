/* coll_shape.h: the shape of a collective call (element counts of every rank),
 * shared by coll.c (reference side) and coll_run.c (launch side). Internal. */
#ifndef PURLIN_TESTS_COLL_SHAPE_H_
#define PURLIN_TESTS_COLL_SHAPE_H_

#include "coll.h"

typedef struct {
  int n;
  size_t vcount[64], vdispl[64], vtotal; /* AllGatherV, ReduceScatterV */
  size_t a2a[64][64];                    /* AlltoAllV: a2a[p][q] elements from p to q */
} shape;

void shape_init(shape* s, const coll_case* c, int n);
size_t shape_in_len(const coll_case* c, const shape* s, int r);
size_t shape_out_len(const coll_case* c, const shape* s, int r);
void shape_gen_input(const coll_case* c, int r, double* out, size_t len);
double shape_expected(const coll_case* c, const shape* s, double** in, int r, size_t j, double* tol);

#endif
