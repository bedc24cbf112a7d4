/*
 * layouts.c: collectives named only by their layouts (purlinCollective). One
 * thread drives 2, 3 and 4 ranks. The column-block collectives (all-gather
 * into the column blocks of a row-major matrix, reduce-scatter out of them)
 * run over shapes from one element to thousands of columns, in int32 and
 * float, and an all-to-all by a matrix of pair sizes and destination offsets
 * over random sizes, each checked exactly against a reference computed here; an
 * NCCL-style collective named by its layouts matches its own entry point's
 * result; pairs no collective takes are refused with purlinInvalidArgument
 * and an error text naming what is unsupported, and leave the communicator
 * usable.
 */
#include <stdlib.h>
#include <string.h>

#include "clique.h"
#include "harness.h"

enum { GUARD = 64 };
static const unsigned char kFill = 0xa5;

static const purlinLayout_t kPacked = {purlinPacked, 0, 0, 0, 0};
static const purlinLayout_t kScattered = {purlinScattered, 0, 0, 0, 0};
static const purlinLayout_t kColumns = {purlinScattered, 0, 0, 1, 0};

/* value is rank p's input element i: small integers, exact in float sums. */
static int32_t value(uint64_t seed, int p, size_t i) {
  rng_t r = {seed * 1000003u + (uint64_t)p * 7919u + i};
  return (int32_t)(rng_next(&r) % 201) - 100;
}

static void put(void* buf, int dtype, size_t i, int32_t v) {
  if (dtype == ncclFloat) ((float*)buf)[i] = (float)v;
  else ((int32_t*)buf)[i] = v;
}
static int32_t get(const void* buf, int dtype, size_t i) {
  return dtype == ncclFloat ? (int32_t)((const float*)buf)[i] : ((const int32_t*)buf)[i];
}

/* A buffer of n 4-byte elements with GUARD fill bytes after it. */
static unsigned char* guarded(size_t n) {
  unsigned char* b = malloc(n * 4 + GUARD);
  memset(b, kFill, n * 4 + GUARD);
  return b;
}
static int guard_intact(const unsigned char* b, size_t n) {
  for (size_t k = 0; k < GUARD; k++)
    if (b[n * 4 + k] != kFill) return 0;
  return 1;
}

/* run_desc issues desc (its buffers replaced by rank r's) on every rank of q
 * in one group, then synchronizes; returns the first failing result. */
static purlinResult_t run_desc(clique* q, purlinCollectiveDesc_t d, void** send, void** recv) {
  purlinResult_t first = purlinSuccess;
  ncclGroupStart();
  for (int r = 0; r < q->n; r++) {
    d.sendbuff = send[r], d.recvbuff = recv[r];
    purlinResult_t rc = purlinCollective(&d, PC(q->comms[r]), NULL);
    if (rc != purlinSuccess && first == purlinSuccess) first = rc;
  }
  ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess && first == purlinSuccess) first = (purlinResult_t)end;
  for (int r = 0; r < q->n; r++) purlinCommSynchronize(PC(q->comms[r]));
  return first;
}

/* columns runs one column-block collective of rows x width blocks and checks
 * every rank's output. */
static void columns(clique* q, int gather, size_t rows, size_t width, int dtype, int op, uint64_t seed) {
  const int n = q->n;
  const size_t count = rows * width, full = (size_t)n * count;
  const size_t in_len = gather ? count : full, out_len = gather ? full : count;
  void *send[CLIQUE_MAX], *recv[CLIQUE_MAX];
  for (int r = 0; r < n; r++) {
    send[r] = guarded(in_len), recv[r] = guarded(out_len);
    for (size_t i = 0; i < in_len; i++) put(send[r], dtype, i, value(seed, r, i));
  }
  purlinCollectiveDesc_t d = {.consume = gather ? purlinConsumeCopy : purlinConsumeReduce,
                              .in = gather ? kPacked : kColumns, .out = gather ? kColumns : kPacked,
                              .count = count, .datatype = dtype, .op = op, .rows = rows};
  char what[128];
  snprintf(what, sizeof what, "%s %zux%zu on %d ranks, %s, op %d", gather ? "all-gather into columns" : "reduce-scatter from columns",
           rows, width, n, dtype == ncclFloat ? "float" : "int32", op);
  purlinResult_t rc = run_desc(q, d, send, recv);
  EXPECT(rc == purlinSuccess, "%s: returned %d (%s)", what, rc, ncclGetLastError(NULL));
  for (int r = 0; rc == purlinSuccess && r < n && !harness_failed(); r++) {
    EXPECT(guard_intact(recv[r], out_len), "%s: rank %d wrote past its output", what, r);
    for (size_t i = 0; i < rows && !harness_failed(); i++)
      for (size_t j = 0; j < (gather ? (size_t)n * width : width) && !harness_failed(); j++) {
        int32_t want;
        if (gather) { /* row i, column j: rank j/width's row i, column j%width */
          want = value(seed, (int)(j / width), i * width + j % width);
        } else { /* rank r's block: row i, column r*width+j of every rank's matrix */
          size_t at = i * (size_t)n * width + (size_t)r * width + j;
          want = value(seed, 0, at);
          for (int p = 1; p < n; p++) {
            int32_t v = value(seed, p, at);
            want = op == ncclMax ? (v > want ? v : want) : want + v;
          }
        }
        size_t at = gather ? i * (size_t)n * width + j : i * width + j;
        int32_t got = get(recv[r], dtype, at);
        EXPECT(got == want, "%s: rank %d row %zu column %zu: got %d, want %d", what, r, i, j, got, want);
      }
  }
  for (int r = 0; r < n; r++) free(send[r]), free(recv[r]);
}

static void test_columns(void) {
  static const size_t shapes[][2] = {{1, 1}, {3, 5}, {2, 1}, {16, 33}, {64, 1024}, {7, 3001}, {512, 96}};
  uint64_t seed = 1;
  for (int n = 2; n <= 4; n++) {
    clique q;
    if (clique_init(&q, n) != 0) return;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
      for (int gather = 0; gather <= 1; gather++) {
        int dtype = (k + gather) & 1 ? ncclFloat : ncclInt32;
        int op = k % 3 == 2 ? ncclMax : ncclSum;
        columns(&q, gather, shapes[k][0], shapes[k][1], dtype, op, seed++);
      }
    clique_destroy(&q);
  }
}

/* An all-to-all by a matrix: random pair sizes (some empty), every slice
 * landing one element after the one before it in its output; the gaps
 * must stay untouched. */
static void test_matrix(void) {
  const purlinLayout_t from = {purlinScattered, 1, 0, 0, 1}, to = {purlinTransposed, 1, 0, 0, 1};
  uint64_t seed = 40;
  for (int n = 2; n <= 4; n++) {
    clique q;
    if (clique_init(&q, n) != 0) return;
    for (int most = 0; most <= 5000; most = most ? most * 10 : 5) {
      size_t counts[CLIQUE_MAX * CLIQUE_MAX], displs[CLIQUE_MAX * CLIQUE_MAX], in_len[CLIQUE_MAX] = {0},
             out_len[CLIQUE_MAX] = {0};
      rng_t r = {seed++};
      for (int p = 0; p < n; p++)
        for (int t = 0; t < n; t++) counts[p * n + t] = (size_t)rng_int(&r, 0, most), in_len[p] += counts[p * n + t];
      for (int t = 0; t < n; t++)
        for (int p = 0; p < n; p++) displs[p * n + t] = out_len[t] + 1, out_len[t] += counts[p * n + t] + 1;
      void *send[CLIQUE_MAX], *recv[CLIQUE_MAX];
      for (int p = 0; p < n; p++) {
        send[p] = guarded(in_len[p]), recv[p] = guarded(out_len[p]);
        memset(recv[p], kFill, out_len[p] * 4);
        for (size_t i = 0; i < in_len[p]; i++) put(send[p], ncclInt32, i, value(seed, p, i));
      }
      purlinCollectiveDesc_t d = {.consume = purlinConsumeCopy, .in = from, .out = to, .counts = counts,
                                  .displs = displs, .datatype = ncclInt32};
      purlinResult_t rc = run_desc(&q, d, send, recv);
      EXPECT(rc == purlinSuccess, "all-to-all by a matrix, %d ranks, most %d: %d (%s)", n, most, rc, ncclGetLastError(NULL));
      for (int t = 0; rc == purlinSuccess && t < n && !harness_failed(); t++) {
        for (int p = 0; p < n; p++) {
          size_t from_off = 0;
          for (int k = 0; k < t; k++) from_off += counts[p * n + k];
          EXPECT(((unsigned char*)recv[t])[(displs[p * n + t] - 1) * 4] == kFill, "rank %d: the gap before rank %d's slice was written", t, p);
          for (size_t i = 0; i < counts[p * n + t] && !harness_failed(); i++) {
            int32_t got = get(recv[t], ncclInt32, displs[p * n + t] + i), want = value(seed, p, from_off + i);
            EXPECT(got == want, "%d ranks, most %d: rank %d element %zu from rank %d: got %d, want %d", n, most, t, i, p, got, want);
          }
        }
        EXPECT(guard_intact(recv[t], out_len[t]), "rank %d wrote past its output", t);
      }
      for (int p = 0; p < n; p++) free(send[p]), free(recv[p]);
    }
    clique_destroy(&q);
  }
}

/* An NCCL-style collective named by its layouts (copy, packed -> scattered)
 * gives what ncclAllGather gives. */
static void test_named_row(void) {
  clique q;
  if (clique_init(&q, 3) != 0) return;
  const size_t count = 1001;
  void *send[CLIQUE_MAX], *recv[CLIQUE_MAX], *ref[CLIQUE_MAX];
  for (int r = 0; r < q.n; r++) {
    send[r] = guarded(count), recv[r] = guarded(3 * count), ref[r] = guarded(3 * count);
    for (size_t i = 0; i < count; i++) put(send[r], ncclInt32, i, value(9, r, i));
  }
  purlinCollectiveDesc_t d = {.consume = purlinConsumeCopy, .in = kPacked, .out = kScattered, .count = count,
                              .datatype = ncclInt32};
  purlinResult_t rc = run_desc(&q, d, send, recv);
  EXPECT(rc == purlinSuccess, "AllGather by layouts: %d (%s)", rc, ncclGetLastError(NULL));
  ncclGroupStart();
  for (int r = 0; r < q.n; r++) ncclAllGather(send[r], ref[r], count, ncclInt32, q.comms[r], NULL);
  EXPECT(ncclGroupEnd() == ncclSuccess, "ncclAllGather: %s", ncclGetLastError(NULL));
  for (int r = 0; r < q.n; r++) {
    purlinCommSynchronize(PC(q.comms[r]));
    EXPECT(memcmp(recv[r], ref[r], 3 * count * 4 + GUARD) == 0, "rank %d: layouts and ncclAllGather differ", r);
    free(send[r]), free(recv[r]), free(ref[r]);
  }
  clique_destroy(&q);
}

/* Pairs no collective takes, and column calls whose rows do not fit, are
 * refused on every rank with a text that names the problem; the
 * communicators still run a good call afterwards. */
static void test_refused(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  const purlinLayout_t packed_columns = {purlinPacked, 0, 0, 1, 0}, varying_columns = {purlinScattered, 1, 0, 1, 0},
                       transposed_columns = {purlinTransposed, 0, 0, 1, 0}, bad_shape = {7, 0, 0, 0, 0},
                       plain_matrix = {purlinScattered, 0, 0, 0, 1};
  struct {
    purlinCollectiveDesc_t d;
    const char* says;
  } cases[] = {
      {{.consume = purlinConsumeCopy, .in = kPacked, .out = packed_columns, .count = 4, .rows = 2}, "no column blocks"},
      {{.consume = purlinConsumeCopy, .in = kPacked, .out = varying_columns, .count = 4, .rows = 2}, "neither V nor rooted"},
      {{.consume = purlinConsumeCopy, .in = kColumns, .out = transposed_columns, .count = 4, .rows = 2}, "column blocks serve"},
      {{.consume = purlinConsumeReduce, .in = kPacked, .out = kColumns, .count = 4, .rows = 2}, "column blocks serve"},
      {{.consume = purlinConsumeCopy, .in = bad_shape, .out = kPacked, .count = 4}, "unknown shape"},
      {{.consume = purlinConsumeCopy, .in = plain_matrix, .out = kScattered, .count = 4}, "a size matrix is a V layout's"},
      {{.consume = purlinConsumeCopy, .in = kPacked, .out = kColumns, .count = 4, .rows = 0}, "rows is 0"},
      {{.consume = purlinConsumeCopy, .in = kPacked, .out = kColumns, .count = 5, .rows = 2}, "not a whole number of rows"},
      {{.consume = purlinConsumeCopy, .in = kPacked, .out = kScattered, .count = 4, .rows = 2}, "no side is a column-block layout"},
  };
  int32_t send[16] = {0}, recv[64] = {0};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    purlinCollectiveDesc_t d = cases[k].d;
    d.datatype = ncclInt32, d.sendbuff = send, d.recvbuff = recv;
    for (int r = 0; r < q.n; r++) {
      purlinResult_t rc = purlinCollective(&d, PC(q.comms[r]), NULL);
      const char* text = ncclGetLastError(q.comms[r]);
      EXPECT(rc == purlinInvalidArgument, "case %zu rank %d: returned %d, want purlinInvalidArgument", k, r, rc);
      EXPECT(text && strstr(text, cases[k].says), "case %zu rank %d: error text \"%s\" lacks \"%s\"", k, r, text ? text : "",
             cases[k].says);
    }
  }
  EXPECT(purlinCollective(NULL, PC(q.comms[0]), NULL) != purlinSuccess, "a NULL descriptor was accepted");
  columns(&q, 1, 3, 4, ncclInt32, ncclSum, 77); /* still usable */
  clique_destroy(&q);
}

int main(void) {
  harness_init("layouts", 240);
  RUN(test_columns);
  RUN(test_matrix);
  RUN(test_named_row);
  RUN(test_refused);
  return harness_finish();
}
