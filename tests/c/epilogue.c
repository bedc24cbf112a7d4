/*
 * epilogue.c: AllReduce epilogues (purlinAllReduceEpilogue). One thread
 * drives 2 and 3 ranks, issuing every rank's call in one group: every valid
 * kind (residual add, RMSNorm, both, each alone or with an fp8 output of a
 * tensor or a row scale) on float, half and bfloat16, rows of 1, 7, 64 and
 * 1024 elements, 1 to 40 rows, in place and apart, and several epilogues
 * beside a plain all-reduce in one group. Each is checked against a
 * reference of the unfused sequence computed here in double: the inputs
 * summed and rounded to the type, the residual added and rounded, RMSNorm
 * (mean square, 1/sqrt, product with the weight) rounded, and the fp8
 * output and row scales derived from the output the call produced, as a
 * quantize kernel after it would.
 *
 * Tolerance: the inputs lie on a grid of quarters (weights of eighths), so
 * the sums are exact in every type: the residual must equal its reference
 * exactly, and so must the fp8 output and the row scales. The output may
 * differ from its reference by 1 ulp of the type (the library computes
 * RMSNorm in float32, so a value near a rounding boundary may round the
 * other way); for float32 the float32 steps themselves (the division, eps,
 * sqrt, reciprocal and two products, each rounded) are added: 8 float32
 * roundings of the value, 8 * 2^-24 * |want|. Guards after every buffer
 * must stay intact, a tensor scale unchanged, an apart send unchanged.
 *
 * Bad epilogues (a non-float type, a count not a whole number of rows, a
 * NULL weight for RMSNorm, a residual overlapping the output, and the other
 * rules of spec.Epilogue) are refused on every rank with
 * purlinInvalidArgument and a text that names the problem, and leave the
 * communicators usable.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clique.h"
#include "dtypes.h"
#include "harness.h"

enum { GUARD = 64, MAX_ROWS = 40 };
static const unsigned char kFill = 0xa5;
static const float kEps = 1e-5f;
static const float kTensorScale = 0.015625f; /* some outputs / scale pass 448 and saturate */
static const double kFP8Max = 448;

enum { RA = purlinEpilogueResidualAdd, RMS = purlinEpilogueRMSNorm, QUANT = purlinEpilogueQuantFP8,
       ROW = purlinEpilogueRowScale };
/* Every valid kind: residual add, RMSNorm or both, without fp8 or with a tensor or a row scale. */
static const int kKinds[] = {RA, RMS, RA | RMS, RA | QUANT, RMS | QUANT, RA | RMS | QUANT, RA | QUANT | ROW,
                             RMS | QUANT | ROW, RA | RMS | QUANT | ROW};
static const int kTypes[] = {purlinFloat32, purlinFloat16, purlinBfloat16};
static const size_t kHidden[] = {1, 7, 64, 1024};

/* grid is element i of input `what` of rank r: a multiple of 1/4 in [-2, 2]
 * (weights: of 1/8 in [-2, 2]), exact in every type. */
enum { IN_SEND, IN_RESIDUAL, IN_WEIGHT };
static double grid(uint64_t seed, int what, int r, size_t i) {
  rng_t g = {seed * 1000003u + (uint64_t)what * 104729u + (uint64_t)r * 7919u + i};
  return what == IN_WEIGHT ? rng_int(&g, -16, 16) / 8.0 : rng_int(&g, -8, 8) / 4.0;
}

/* A buffer of bytes with GUARD fill bytes after it, and its check. */
static unsigned char* guarded(size_t bytes) {
  unsigned char* b = malloc(bytes + GUARD);
  memset(b, kFill, bytes + GUARD);
  return b;
}
static int guard_intact(const unsigned char* b, size_t bytes) {
  for (size_t k = 0; k < GUARD; k++)
    if (b[bytes + k] != kFill) return 0;
  return 1;
}

/* One epilogue call on every rank of a clique. */
typedef struct {
  int dtype, kind, inplace;
  size_t hidden, rows;
  uint64_t seed;
} ecase;

typedef struct {
  unsigned char *send, *recv, *residual, *weight, *quant, *scales;
} ebufs;

static size_t count_of(const ecase* c) { return c->hidden * c->rows; }
static size_t scales_of(const ecase* c) { return c->kind & ROW ? c->rows : 1; }

static void describe(const ecase* c, int n, char* what, size_t len) {
  snprintf(what, len, "%d ranks %s kind %d hidden %zu rows %zu %s seed %llu", n, dt_name(c->dtype), c->kind, c->hidden,
           c->rows, c->inplace ? "in-place" : "apart", (unsigned long long)c->seed);
}

/* make fills rank r's buffers for c and its epilogue descriptor. */
static void make(const ecase* c, int r, ebufs* b, purlinEpilogue_t* e) {
  const int dt = c->dtype;
  const size_t count = count_of(c), bytes = count * dt_size(dt);
  memset(b, 0, sizeof *b);
  b->recv = guarded(bytes);
  memset(b->recv, 0xff, bytes); /* NaN in every float type: an element never written is wrong */
  b->send = c->inplace ? b->recv : guarded(bytes);
  for (size_t i = 0; i < count; i++) dt_store(dt, b->send, i, grid(c->seed, IN_SEND, r, i));
  *e = (purlinEpilogue_t){.kind = c->kind, .hidden = c->hidden};
  if (c->kind & RA) {
    e->residual = b->residual = guarded(bytes);
    for (size_t i = 0; i < count; i++) dt_store(dt, b->residual, i, grid(c->seed, IN_RESIDUAL, r, i));
  }
  if (c->kind & RMS) {
    e->weight = b->weight = guarded(c->hidden * dt_size(dt));
    for (size_t j = 0; j < c->hidden; j++) dt_store(dt, b->weight, j, grid(c->seed, IN_WEIGHT, r, j));
    e->eps = kEps;
  }
  if (c->kind & QUANT) {
    e->quant = b->quant = guarded(count);
    e->scales = b->scales = guarded(4 * scales_of(c));
    if (!(c->kind & ROW)) memcpy(b->scales, &kTensorScale, 4);
  }
}

static void release(ebufs* b, int inplace) {
  if (!inplace) free(b->send);
  free(b->recv), free(b->residual), free(b->weight), free(b->quant), free(b->scales);
}

/* within: got is want within 1 ulp of the type, plus for float32 the
 * rounding of its own float32 steps (the comment at the top). */
static int within(int dt, double got, double want) {
  if (isnan(got) || isnan(want)) return 0;
  double ulp = want == 0 ? dt_tiny(dt) : ldexp(dt_eps(dt), ilogb(want));
  if (ulp < dt_tiny(dt)) ulp = dt_tiny(dt);
  double slack = dt == purlinFloat32 ? 8 * ldexp(1.0, -24) * fabs(want) : 0;
  return fabs(got - want) <= ulp + slack;
}

/* check compares rank r's buffers after c with the unfused sequence's reference. */
static void check(const ecase* c, int n, int r, const ebufs* b, const char* what) {
  const int dt = c->dtype;
  const size_t H = c->hidden, count = count_of(c), bytes = count * dt_size(dt);
  double z[1024];
  EXPECT(guard_intact(b->recv, bytes), "%s: rank %d wrote past recvbuff", what, r);
  if (!c->inplace) {
    EXPECT(guard_intact(b->send, bytes), "%s: rank %d wrote past sendbuff", what, r);
    for (size_t i = 0; i < count && !harness_failed(); i++)
      EXPECT(dt_load(dt, b->send, i) == grid(c->seed, IN_SEND, r, i), "%s: rank %d changed sendbuff[%zu]", what, r, i);
  }
  if (b->residual) EXPECT(guard_intact(b->residual, bytes), "%s: rank %d wrote past the residual", what, r);
  if (b->weight) EXPECT(guard_intact(b->weight, H * dt_size(dt)), "%s: rank %d wrote past the weight", what, r);
  if (b->quant) EXPECT(guard_intact(b->quant, count), "%s: rank %d wrote past quant", what, r);
  if (b->scales) EXPECT(guard_intact(b->scales, 4 * scales_of(c)), "%s: rank %d wrote past scales", what, r);
  for (size_t row = 0; row < c->rows && !harness_failed(); row++) {
    double ss = 0;
    for (size_t j = 0; j < H; j++) {
      size_t i = row * H + j;
      double sum = 0;
      for (int p = 0; p < n; p++) sum += grid(c->seed, IN_SEND, p, i);
      z[j] = dt_round(dt, sum);
      if (c->kind & RA) {
        z[j] = dt_round(dt, z[j] + grid(c->seed, IN_RESIDUAL, r, i));
        double got = dt_load(dt, b->residual, i);
        EXPECT(got == z[j], "%s: rank %d residual[%zu] = %.9g, want %.9g", what, r, i, got, z[j]);
      }
      ss += z[j] * z[j];
    }
    double inv = 1 / sqrt(ss / (double)H + (double)kEps);
    float amax = 0;
    for (size_t j = 0; j < H; j++) {
      size_t i = row * H + j;
      double want = c->kind & RMS ? dt_round(dt, z[j] * inv * grid(c->seed, IN_WEIGHT, r, j)) : z[j];
      double got = dt_load(dt, b->recv, i);
      EXPECT(within(dt, got, want), "%s: rank %d out[%zu] (row %zu) = %.9g, want %.9g", what, r, i, row, got, want);
      amax = fmaxf(amax, fabsf((float)got));
    }
    if (!(c->kind & QUANT)) continue;
    float scale;
    memcpy(&scale, b->scales + (c->kind & ROW ? 4 * row : 0), 4);
    float want_scale = c->kind & ROW ? (amax > 0 ? amax / (float)kFP8Max : 1.0f) : kTensorScale;
    EXPECT(memcmp(&scale, &want_scale, 4) == 0, "%s: rank %d scale of row %zu = %.9g, want %.9g", what, r, row, scale,
           want_scale);
    for (size_t j = 0; j < H; j++) {
      size_t i = row * H + j;
      unsigned char want;
      dt_store(purlinFloat8e4m3, &want, 0, (double)((float)dt_load(dt, b->recv, i) / want_scale));
      EXPECT(b->quant[i] == want, "%s: rank %d quant[%zu] = %#x (%g), want %#x (%g)", what, r, i, b->quant[i],
             dt_load(purlinFloat8e4m3, b->quant, i), want, dt_load(purlinFloat8e4m3, &want, 0));
    }
  }
}

/* run issues c on every rank of q in one group and checks every rank. */
static void run(clique* q, const ecase* c) {
  ebufs b[CLIQUE_MAX];
  purlinEpilogue_t e[CLIQUE_MAX];
  char what[160];
  describe(c, q->n, what, sizeof what);
  for (int r = 0; r < q->n; r++) make(c, r, &b[r], &e[r]);
  purlinResult_t first = purlinSuccess;
  ncclGroupStart();
  for (int r = 0; r < q->n; r++) {
    purlinResult_t rc = purlinAllReduceEpilogue(b[r].send, b[r].recv, count_of(c), c->dtype, purlinSum, &e[r],
                                                PC(q->comms[r]), NULL);
    if (rc != purlinSuccess && first == purlinSuccess) first = rc;
  }
  ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess && first == purlinSuccess) first = (purlinResult_t)end;
  for (int r = 0; r < q->n; r++) purlinCommSynchronize(PC(q->comms[r]));
  EXPECT(first == purlinSuccess, "%s: returned %d (%s)", what, first, ncclGetLastError(NULL));
  for (int r = 0; first == purlinSuccess && r < q->n && !harness_failed(); r++) check(c, q->n, r, &b[r], what);
  for (int r = 0; r < q->n; r++) release(&b[r], c->inplace);
}

/* Every kind x row length of one type on n ranks, a random number of rows, in place and apart. */
static void kinds(int n, int dtype, uint64_t seed) {
  clique q;
  if (clique_init(&q, n) != 0) return;
  for (size_t k = 0; k < sizeof kKinds / sizeof kKinds[0] && !harness_failed(); k++)
    for (size_t h = 0; h < sizeof kHidden / sizeof kHidden[0] && !harness_failed(); h++)
      for (int inplace = 0; inplace <= 1 && !harness_failed(); inplace++) {
        rng_t g = {seed * 31 + 7};
        ecase c = {.dtype = dtype, .kind = kKinds[k], .inplace = inplace, .hidden = kHidden[h],
                   .rows = (size_t)rng_int(&g, 1, MAX_ROWS), .seed = seed++};
        if (k == 0 && h == 0) c.rows = inplace ? MAX_ROWS : 1; /* both ends of the row counts on every type */
        run(&q, &c);
      }
  clique_destroy(&q);
}

static void test_kinds(void) {
  for (int n = 2; n <= 3; n++)
    for (size_t t = 0; t < sizeof kTypes / sizeof kTypes[0]; t++) {
      char name[64];
      snprintf(name, sizeof name, "kinds_%d_ranks_%s", n, dt_name(kTypes[t]));
      const char* only = getenv("HARNESS_ONLY");
      if (only && *only && !strstr(name, only)) continue;
      harness_begin(name);
      kinds(n, kTypes[t], 1000 * (uint64_t)n + 100 * t);
      harness_end();
    }
}

/* Epilogues of three kinds and a plain all-reduce of the same type in one
 * group, merged into one Plan per rank: each gets its own result. */
static void test_grouped(void) {
  clique q;
  if (clique_init(&q, 3) != 0) return;
  const ecase cases[] = {
      {.dtype = purlinBfloat16, .kind = RA | RMS, .hidden = 64, .rows = 5, .seed = 900},
      {.dtype = purlinBfloat16, .kind = RMS | QUANT | ROW, .hidden = 7, .rows = 33, .inplace = 1, .seed = 901},
      {.dtype = purlinBfloat16, .kind = RA | QUANT, .hidden = 1024, .rows = 2, .seed = 902},
  };
  enum { NC = sizeof cases / sizeof cases[0], PLAIN = 300 };
  ebufs b[NC][CLIQUE_MAX];
  purlinEpilogue_t e[NC][CLIQUE_MAX];
  unsigned char *psend[CLIQUE_MAX], *precv[CLIQUE_MAX];
  for (int r = 0; r < q.n; r++) {
    for (int k = 0; k < NC; k++) make(&cases[k], r, &b[k][r], &e[k][r]);
    psend[r] = guarded(PLAIN * 2), precv[r] = guarded(PLAIN * 2);
    for (size_t i = 0; i < PLAIN; i++) dt_store(purlinBfloat16, psend[r], i, grid(903, IN_SEND, r, i));
  }
  ncclGroupStart();
  for (int r = 0; r < q.n; r++) {
    for (int k = 0; k < NC; k++)
      EXPECT(purlinAllReduceEpilogue(b[k][r].send, b[k][r].recv, count_of(&cases[k]), purlinBfloat16, purlinSum, &e[k][r],
                                     PC(q.comms[r]), NULL) == purlinSuccess,
             "case %d rank %d: %s", k, r, ncclGetLastError(q.comms[r]));
    EXPECT(purlinAllReduceEpilogue(psend[r], precv[r], PLAIN, purlinBfloat16, purlinSum, NULL, PC(q.comms[r]), NULL) ==
               purlinSuccess,
           "plain rank %d: %s", r, ncclGetLastError(q.comms[r]));
  }
  EXPECT(ncclGroupEnd() == ncclSuccess, "group: %s", ncclGetLastError(NULL));
  for (int r = 0; r < q.n; r++) purlinCommSynchronize(PC(q.comms[r]));
  for (int r = 0; r < q.n && !harness_failed(); r++) {
    for (int k = 0; k < NC; k++) {
      char what[160];
      describe(&cases[k], q.n, what, sizeof what);
      check(&cases[k], q.n, r, &b[k][r], what);
    }
    for (size_t i = 0; i < PLAIN; i++) {
      double want = grid(903, IN_SEND, 0, i) + grid(903, IN_SEND, 1, i) + grid(903, IN_SEND, 2, i);
      EXPECT(dt_load(purlinBfloat16, precv[r], i) == want, "plain all-reduce rank %d element %zu", r, i);
    }
  }
  for (int r = 0; r < q.n; r++) {
    for (int k = 0; k < NC; k++) release(&b[k][r], cases[k].inplace);
    free(psend[r]), free(precv[r]);
  }
  clique_destroy(&q);
}

/* Bad epilogues: each refused on every rank with purlinInvalidArgument and
 * a text naming the problem; then the communicators still run good calls. */
static void test_refused(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  enum { H = 8, ROWS = 4, COUNT = H * ROWS };
  static float send[COUNT + 1], recv[COUNT + 1], residual[COUNT], weight[H], scales[ROWS];
  static int32_t ints[COUNT], int_recv[COUNT], int_residual[COUNT];
  static unsigned char quant[COUNT];
  const purlinEpilogue_t ok = {.kind = RA | RMS, .hidden = H, .residual = residual, .weight = weight, .eps = kEps};
  struct {
    const char* name;
    purlinEpilogue_t e;
    const void* send;
    void* recv;
    size_t count;
    int dtype;
    const char* says;
  } cases[] = {
      {"non-float type", {.kind = RA, .hidden = H, .residual = int_residual}, ints, int_recv, COUNT, purlinInt32,
       "float32, float16 and bfloat16 only"},
      {"count not whole rows", ok, send, recv, COUNT + 1, purlinFloat32, "not a whole number of rows"},
      {"NULL weight", {.kind = RA | RMS, .hidden = H, .residual = residual, .eps = kEps}, send, recv, COUNT,
       purlinFloat32, "weight buffer is NULL"},
      {"residual overlaps recvbuff", {.kind = RA, .hidden = H, .residual = recv + 1}, send, recv, COUNT, purlinFloat32,
       "overlaps"},
      {"residual is recvbuff in place", {.kind = RA, .hidden = H, .residual = recv}, recv, recv, COUNT, purlinFloat32,
       "overlaps"},
      {"quant overlaps residual", {.kind = RA | QUANT, .hidden = H, .residual = residual,
                                   .quant = (unsigned char*)residual, .scales = scales}, send, recv, COUNT,
       purlinFloat32, "overlaps"},
      {"unknown kind bit", {.kind = 16 | RA, .hidden = H, .residual = residual}, send, recv, COUNT, purlinFloat32,
       "unknown epilogue kind bits"},
      {"kind past its bits", {.kind = 0x101, .hidden = H, .residual = residual}, send, recv, COUNT, purlinFloat32,
       "unknown epilogue kind bits"},
      {"negative kind", {.kind = -1, .hidden = H}, send, recv, COUNT, purlinFloat32, "unknown epilogue kind bits"},
      {"quant alone", {.kind = QUANT, .hidden = H, .quant = quant, .scales = scales}, send, recv, COUNT, purlinFloat32,
       "needs residual_add or rmsnorm"},
      {"row scale without quant", {.kind = RA | ROW, .hidden = H, .residual = residual}, send, recv, COUNT,
       purlinFloat32, "row_scale needs quant_fp8"},
      {"hidden 0", {.kind = RA, .residual = residual}, send, recv, COUNT, purlinFloat32, "hidden size is 0"},
      {"eps NaN", {.kind = RMS, .hidden = H, .weight = weight, .eps = NAN}, send, recv, COUNT, purlinFloat32,
       "not a finite value >= 0"},
      {"eps negative", {.kind = RMS, .hidden = H, .weight = weight, .eps = -1}, send, recv, COUNT, purlinFloat32,
       "not a finite value >= 0"},
      {"a buffer the kind does not use", {.kind = RA, .hidden = H, .residual = residual, .weight = weight}, send,
       recv, COUNT, purlinFloat32, "does not use"},
      {"fields without a kind", {.hidden = H}, send, recv, COUNT, purlinFloat32, "no epilogue kind"},
      {"misaligned residual", {.kind = RA, .hidden = H, .residual = (char*)residual + 2}, send, recv, COUNT - H,
       purlinFloat32, "not aligned"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int r = 0; r < q.n; r++) {
      purlinEpilogue_t e = cases[k].e;
      purlinResult_t rc = purlinAllReduceEpilogue(cases[k].send, cases[k].recv, cases[k].count, cases[k].dtype,
                                                  purlinSum, &e, PC(q.comms[r]), NULL);
      const char* text = ncclGetLastError(q.comms[r]);
      EXPECT(rc == purlinInvalidArgument, "%s, rank %d: returned %d, want purlinInvalidArgument", cases[k].name, r, rc);
      EXPECT(text && strstr(text, cases[k].says), "%s, rank %d: error text \"%s\" lacks \"%s\"", cases[k].name, r,
             text ? text : "", cases[k].says);
    }
  /* Still usable: a valid epilogue, then a NULL epilogue (a plain all-reduce). */
  ecase c = {.dtype = purlinFloat32, .kind = RA | RMS | QUANT | ROW, .hidden = 7, .rows = 3, .seed = 77};
  run(&q, &c);
  float x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  ncclGroupStart();
  for (int r = 0; r < q.n; r++)
    EXPECT(purlinAllReduceEpilogue(x[r], x[r], 4, purlinFloat32, purlinSum, NULL, PC(q.comms[r]), NULL) == purlinSuccess,
           "NULL epilogue, rank %d: %s", r, ncclGetLastError(q.comms[r]));
  EXPECT(ncclGroupEnd() == ncclSuccess, "NULL epilogue: %s", ncclGetLastError(NULL));
  for (int r = 0; r < q.n; r++) {
    purlinCommSynchronize(PC(q.comms[r]));
    EXPECT(x[r][0] == 11 && x[r][3] == 44, "NULL epilogue, rank %d: got %g .. %g, want 11 .. 44", r, x[r][0], x[r][3]);
  }
  clique_destroy(&q);
}

int main(void) {
  harness_init("epilogue", 240);
  test_kinds();
  RUN(test_grouped);
  RUN(test_refused);
  return harness_finish();
}
