/*
 * selftest.c: checks the suite's own reference pieces (dtype encodings,
 * reductions) against values taken from the IEEE and OCP FP8 definitions, so
 * a wrong converter cannot make a wrong library look right. Needs no library.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "reference.h"

static uint32_t bits_of(int dtype, double v) {
  unsigned char b[8] = {0};
  dt_store(dtype, b, 0, v);
  uint32_t x = 0;
  memcpy(&x, b, dt_size(dtype) < 4 ? dt_size(dtype) : 4);
  return x;
}

static void test_encodings(void) {
  struct { int dtype; double v; uint32_t bits; } cases[] = {
      {6, 1.0, 0x3c00}, {6, -2.0, 0xc000}, {6, 65504, 0x7bff}, {6, 1e6, 0x7c00}, {6, 0x1p-24, 0x0001},
      {6, 1.0 + 0x1p-11, 0x3c00}, /* tie: to even */ {6, 1.0 + 3 * 0x1p-11, 0x3c02},
      {9, 1.0, 0x3f80}, {9, -0.5, 0xbf00}, {9, 1.0 + 0x1p-8, 0x3f80}, {9, 3.0e38, 0x7f62},
      {10, 1.0, 0x38}, {10, 448, 0x7e}, {10, 1000, 0x7e}, {10, -1000, 0xfe}, {10, 0x1p-9, 0x01},
      {10, 0x1p-11, 0x00}, {11, 1.0, 0x3c}, {11, 57344, 0x7b}, {11, 1e9, 0x7b}, {11, 0x1p-16, 0x01},
      {0, -1, 0xff}, {0, 130, 0x82}, {1, 255, 0xff}, {2, -2, 0xfffffffe},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t got = bits_of(cases[i].dtype, cases[i].v);
    EXPECT(got == cases[i].bits, "%s(%g): bits 0x%x, want 0x%x", dt_name(cases[i].dtype), cases[i].v, got, cases[i].bits);
  }
  EXPECT(isnan(dt_round(10, NAN)), "fp8e4m3: NaN must stay NaN");
  EXPECT(isnan(dt_round(6, NAN)), "fp16: NaN must stay NaN");
}

/* Property: every finite bit pattern of the small floats decodes and encodes back to itself. */
static void test_roundtrip(void) {
  int types[] = {6, 9, 10, 11};
  for (int t = 0; t < 4; t++) {
    int dt = types[t];
    uint32_t limit = dt_size(dt) == 2 ? 0x10000 : 0x100;
    for (uint32_t b = 0; b < limit; b++) {
      unsigned char buf[2] = {(unsigned char)b, (unsigned char)(b >> 8)};
      double v = dt_load(dt, buf, 0);
      if (isnan(v) || isinf(v)) continue;
      uint32_t back = bits_of(dt, v);
      if (back != b) {
        FAILF("%s: pattern 0x%x decodes to %g, which encodes to 0x%x", dt_name(dt), b, v, back);
        break;
      }
    }
  }
}

static void test_reductions(void) {
  double tol, xs[] = {3, -4, 2, 1};
  EXPECT(ref_reduce(2, OP_SUM, xs, 4, &tol) == 2 && tol == 0, "int32 sum");
  EXPECT(ref_reduce(2, OP_PROD, xs, 4, &tol) == -24, "int32 prod");
  EXPECT(ref_reduce(2, OP_AVG, xs, 4, &tol) == 0, "int32 avg truncates 2/4 to 0");
  double neg[] = {-3, -4, 0};
  EXPECT(ref_reduce(0, OP_AVG, neg, 3, &tol) == -2, "int8 avg truncates -7/3 toward zero");
  double big[] = {100, 100};
  EXPECT(ref_reduce(0, OP_SUM, big, 2, &tol) == -56, "int8 sum wraps 200 to -56");
  EXPECT(ref_reduce(7, OP_MAX, xs, 4, &tol) == 3 && tol == 0, "fp32 max");
  EXPECT(ref_reduce(7, OP_MIN, xs, 4, &tol) == -4, "fp32 min");
  EXPECT(ref_reduce(7, OP_PREMULSUM, xs, 4, &tol) == 3 * 0.75 - 4 * -1.5 + 2 * 2 + 1 * 0.5,
         "fp32 premulsum: each rank's own scalar");
  EXPECT(ref_reduce(2, OP_PREMULSUM, xs, 4, &tol) == 3 * 3 - 4 * -2 + 2 * 5 + 1 * -1, "int32 premulsum");
  double small[] = {1.125, 0};
  /* fp8 e4m3: 1.125 * 0.75 = 0.84375 is not an e4m3 value; rank 0 sends it
   * rounded (to even): 0.875. */
  EXPECT(ref_reduce(10, OP_PREMULSUM, small, 2, &tol) == 0.875, "fp8 premulsum rounds each product");
  EXPECT(ref_reduce(10, OP_SUM, xs, 4, &tol) == 2 && tol > 0 && tol < 0.5, "fp8 sum and its tolerance %g", tol);
}

/* Which ops NCCL runs on which types: all, but avg and PreMulSum on the
 * float8 types only on two or more ranks. */
static void test_op_defined(void) {
  for (int n = 1; n <= 3; n++)
    for (int dt = 0; dt < DT_COUNT; dt++)
      for (int op = 0; op < OP_COUNT; op++) {
        int want = n > 1 || !((op == OP_AVG || op == OP_PREMULSUM) && (dt == 10 || dt == 11));
        EXPECT(op_defined(dt, op, n) == want, "op_defined(%s, %s, %d) is %d", dt_name(dt), op_name(op), n,
               op_defined(dt, op, n));
        EXPECT(op_for(dt, op, n) == (want ? op : OP_MIN), "op_for(%s, %s, %d) is %s", dt_name(dt), op_name(op), n,
               op_name(op_for(dt, op, n)));
      }
}

int main(void) {
  harness_init("c-selftest", 60);
  RUN(test_encodings);
  RUN(test_roundtrip);
  RUN(test_reductions);
  RUN(test_op_defined);
  return harness_finish();
}
