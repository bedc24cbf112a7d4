/*
 * dtype_test.c: checks purlin-perf's float codecs against known encodings
 * and, for half and bfloat16, against the compiler's own conversions over
 * every bit pattern and many doubles. Build and run: make perf-test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dtype.h"

static int failures;

#define EXPECT_BITS(tname, value, want)                                                   \
  do {                                                                                    \
    const dtype_t* t_ = dtype_by_name(tname);                                             \
    unsigned char b_[8] = {0};                                                            \
    store_float(t_, b_, 0, (value));                                                      \
    unsigned long long got_ = load_bits(t_, b_, 0);                                       \
    if (got_ != (unsigned long long)(want)) {                                             \
      fprintf(stderr, "%s(%g): got %#llx, want %#llx\n", tname, (double)(value), got_,    \
              (unsigned long long)(want));                                                \
      failures++;                                                                         \
    }                                                                                     \
  } while (0)

static void known_encodings(void) {
  EXPECT_BITS("half", 1.0, 0x3c00);
  EXPECT_BITS("half", -2.0, 0xc000);
  EXPECT_BITS("half", 65504.0, 0x7bff);
  EXPECT_BITS("half", 1e6, 0x7c00);            /* overflow: inf */
  EXPECT_BITS("half", 0x1p-24, 0x0001);        /* smallest subnormal */
  EXPECT_BITS("half", 1.0 + 0x1p-11, 0x3c00);  /* tie to even (down) */
  EXPECT_BITS("half", 1.0 + 3 * 0x1p-11, 0x3c02); /* tie to even (up) */
  EXPECT_BITS("bfloat16", 1.0, 0x3f80);
  EXPECT_BITS("bfloat16", 3.0, 0x4040);
  EXPECT_BITS("f8e4m3", 1.0, 0x38);
  EXPECT_BITS("f8e4m3", 448.0, 0x7e);
  EXPECT_BITS("f8e4m3", 1000.0, 0x7e);         /* saturates */
  EXPECT_BITS("f8e4m3", -1000.0, 0xfe);
  EXPECT_BITS("f8e4m3", INFINITY, 0x7e);
  EXPECT_BITS("f8e4m3", 0x1p-9, 0x01);
  EXPECT_BITS("f8e4m3", NAN, 0x7f);
  EXPECT_BITS("f8e4m3", 17.0, 0x58);           /* 17 is a tie between 16 and 18: even is 16 */
  EXPECT_BITS("f8e5m2", 1.0, 0x3c);
  EXPECT_BITS("f8e5m2", 57344.0, 0x7b);
  EXPECT_BITS("f8e5m2", 1e9, 0x7b);            /* saturates */
  EXPECT_BITS("f8e5m2", 0x1p-16, 0x01);
  EXPECT_BITS("float", 1.5, 0x3fc00000);
}

/* Every half and bf16 pattern decodes to what the compiler says and re-encodes to itself. */
static void all_patterns_round_trip(void) {
  const char* names[] = {"half", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int n = 0; n < 4; n++) {
    const dtype_t* t = dtype_by_name(names[n]);
    unsigned limit = 1u << (8 * t->size);
    for (unsigned bits = 0; bits < limit; bits++) {
      unsigned char b[2];
      store_bits(t, b, 0, bits);
      double v = load_float(t, b, 0);
      if (isnan(v) || isinf(v)) continue; /* fp8 saturates infinity by design */
      unsigned char back[2];
      store_float(t, back, 0, v);
      if (load_bits(t, back, 0) != bits) {
        fprintf(stderr, "%s: %#x decodes to %g, re-encodes to %#llx\n", names[n], bits, v,
                (unsigned long long)load_bits(t, back, 0));
        failures++;
        break;
      }
#if defined(__FLT16_MAX__)
      if (n == 0) {
        _Float16 h;
        uint16_t hb = (uint16_t)bits;
        memcpy(&h, &hb, 2);
        if ((double)h != v) { fprintf(stderr, "half %#x: %g, compiler %g\n", bits, v, (double)h); failures++; break; }
      }
#endif
    }
  }
}

/* Random doubles round like the compiler's double->_Float16 and double->float. */
static void random_doubles_round_like_compiler(void) {
  const dtype_t* half = dtype_by_name("half");
  const dtype_t* f32 = dtype_by_name("float");
  srand(7);
  for (int i = 0; i < 200000; i++) {
    double v = ldexp((double)rand() / RAND_MAX - 0.5, rand() % 50 - 30);
#if defined(__FLT16_MAX__)
    _Float16 h = (_Float16)v;
    if (round_float(half, v) != (double)h) { fprintf(stderr, "half(%a): %a vs %a\n", v, round_float(half, v), (double)h); failures++; break; }
#else
    (void)half;
#endif
    if (round_float(f32, v) != (double)(float)v) { fprintf(stderr, "float(%a)\n", v); failures++; break; }
  }
}

int main(void) {
  known_encodings();
  all_patterns_round_trip();
  random_doubles_round_like_compiler();
  if (failures) { fprintf(stderr, "dtype_test: %d failures\n", failures); return 1; }
  printf("dtype_test: ok\n");
  return 0;
}
