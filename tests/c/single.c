/*
 * single.c: the single-process suite. One thread drives 2, 3, 4 and 8 ranks
 * (ncclGroupStart; ncclCommInitRank x N; ncclGroupEnd, as nccl-tests does),
 * runs every collective over every dtype and op, in place and out of place,
 * on random data, and checks each output against a double reference.
 * PreMulSum gets a different scalar on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "clique.h"
#include "coll.h"
#include "dtypes.h"
#include "harness.h"
#include "reference.h"

static uint64_t g_seed = 1;

static void test_version(void) {
  int v = 0;
  EXPECT(ncclGetVersion(&v) == ncclSuccess, "ncclGetVersion failed");
  EXPECT(v >= 22809, "ncclGetVersion gave %d, want >= 22809", v);
}

/* Every dtype x op of AllReduce, in place and out of place, on one clique. */
static void sweep_allreduce(clique* q, size_t count) {
  for (int dt = 0; dt < DT_COUNT; dt++)
    for (int op = 0; op < OP_COUNT; op++) {
      if (!op_defined(dt, op, q->n)) continue; /* rejected: see badinput */
      coll_case c = {COLL_ALLREDUCE, dt, op, 0, (dt + op) & 1, count + (size_t)op, g_seed++};
      coll_run(&c, q->n, q->comms, 0, q->n);
    }
}

/* Every collective, several dtypes, ops, roots and counts. */
static void sweep_collectives(clique* q) {
  static const size_t counts[] = {1, 7, 1031, 20011};
  int n = q->n;
  for (int coll = 0; coll < COLL_COUNT; coll++)
    for (int i = 0; i < 8; i++) {
      coll_case c;
      c.coll = coll;
      c.dtype = (coll * 5 + i * 7 + n) % DT_COUNT;
      c.op = op_for(c.dtype, (coll + i) % OP_COUNT, n);
      c.root = (i * 3 + 1) % n;
      c.inplace = i & 1;
      c.count = counts[i % 4] + (size_t)(i / 4);
      if (n == 8 && c.count > 5000) c.count /= 4; /* keep the n*n-sized collectives small */
      c.seed = g_seed++;
      coll_run(&c, n, q->comms, 0, n);
    }
}

/* PreMulSum with a different scalar on every rank (each rank's own input
 * times its own scalar; residences alternate between ranks, see
 * coll_run.c): every dtype and reducing collective, packet and staged sizes,
 * in place and out of place. */
static void sweep_premulsum(clique* q) {
  static const int colls[] = {COLL_ALLREDUCE, COLL_REDUCE, COLL_REDUCESCATTER, COLL_REDUCESCATTERV};
  static const size_t counts[] = {1, 7, 1031, 20011};
  for (int dt = 0; dt < DT_COUNT; dt++)
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
      for (int i = 0; i < 4; i++) {
        coll_case c = {colls[k], dt, OP_PREMULSUM, (dt + i) % q->n, (int)(k + i) & 1, counts[i], g_seed++};
        coll_run(&c, q->n, q->comms, 0, q->n);
      }
}

static void run_clique(int n) {
  clique q;
  if (clique_init(&q, n) != 0) return;
  sweep_collectives(&q);
  if (n == 2 || n == 3) sweep_premulsum(&q);
  if (n == 4 || n == 8) sweep_allreduce(&q, 517);
  clique_destroy(&q);
}

static void test_clique2(void) { run_clique(2); }
static void test_clique3(void) { run_clique(3); }
static void test_clique4(void) { run_clique(4); }
static void test_clique8(void) { run_clique(8); }

/* Counts past the staging area (host default 8 MiB a half) take the ring regime. */
static void test_large(void) {
  clique q;
  if (clique_init(&q, 4) != 0) return;
  coll_case cases[] = {
      {COLL_ALLREDUCE, 7, OP_SUM, 0, 0, 3000017, 0},
      {COLL_ALLREDUCE, 9, OP_MAX, 0, 1, 5000011, 0},
      {COLL_ALLREDUCE, 6, OP_PREMULSUM, 0, 1, 4000037, 0},
      {COLL_REDUCESCATTER, 8, OP_PREMULSUM, 0, 0, 1200007, 0},
      {COLL_REDUCESCATTER, 6, OP_SUM, 0, 1, 1200007, 0},
      {COLL_ALLGATHER, 2, OP_SUM, 0, 0, 900001, 0},
      {COLL_BROADCAST, 8, OP_SUM, 2, 0, 1500001, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cases[i].seed = g_seed++;
    coll_run(&cases[i], q.n, q.comms, 0, q.n);
  }
  clique_destroy(&q);
}

/* The same communicators serve many calls in a row: epochs and flags advance. */
static void test_repeated_calls(void) {
  clique q;
  if (clique_init(&q, 3) != 0) return;
  for (int i = 0; i < 50 && !harness_failed(); i++) {
    coll_case c = {i % 3 == 0 ? COLL_ALLREDUCE : i % 3 == 1 ? COLL_ALLGATHER : COLL_REDUCESCATTER,
                   7, OP_SUM, 0, i & 1, (size_t)(1 + i * 37), g_seed++};
    coll_run(&c, q.n, q.comms, 0, q.n);
  }
  clique_destroy(&q);
}

static void init_all(int use_nccl_name) {
  ncclComm_t comms[4] = {0};
  int rc = use_nccl_name ? (int)ncclCommInitAll(comms, 4, NULL)
                         : (int)purlinCommInitAll((purlinComm_t*)comms, 4, NULL);
  if (rc != 0) {
    FAILF("%s(4, NULL): %d (%s)", use_nccl_name ? "ncclCommInitAll" : "purlinCommInitAll", rc, ncclGetLastError(NULL));
    return;
  }
  for (int r = 0; r < 4; r++) {
    int rank = -1;
    ncclCommUserRank(comms[r], &rank);
    EXPECT(rank == r, "comm %d has rank %d", r, rank);
  }
  coll_case c = {COLL_ALLREDUCE, 7, OP_SUM, 0, 0, 4099, g_seed++};
  coll_run(&c, 4, comms, 0, 4);
  coll_case g = {COLL_ALLGATHER, 6, OP_SUM, 0, 1, 333, g_seed++};
  coll_run(&g, 4, comms, 0, 4);
  for (int r = 0; r < 4; r++) EXPECT(ncclCommDestroy(comms[r]) == ncclSuccess, "ncclCommDestroy %d", r);
}

static void test_purlin_init_all(void) { init_all(0); }
static void test_nccl_init_all(void) { init_all(1); }

/* Calls on one host stream run in order; synchronizing the stream waits for them. */
static void test_host_stream(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  purlinStream_t st[2] = {0};
  for (int r = 0; r < 2; r++)
    EXPECT(purlinHostStreamCreate(&st[r]) == purlinSuccess && st[r], "purlinHostStreamCreate rank %d", r);
  if (harness_failed()) return;
  enum { N = 10007 };
  float* buf[2];
  for (int r = 0; r < 2; r++) {
    buf[r] = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) buf[r][i] = (float)(r + 1);
  }
  /* Three in-place sums in a row: 1+2 = 3, then 6, then 12 on both ranks. */
  for (int k = 0; k < 3; k++) {
    ncclGroupStart();
    for (int r = 0; r < 2; r++)
      EXPECT(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, q.comms[r], (cudaStream_t)st[r]) == ncclSuccess,
             "ncclAllReduce on a host stream, rank %d", r);
    ncclGroupEnd();
  }
  for (int r = 0; r < 2; r++) {
    EXPECT(purlinHostStreamSynchronize(st[r]) == purlinSuccess, "purlinHostStreamSynchronize rank %d: %s", r,
           ncclGetLastError(q.comms[r]));
    for (int i = 0; i < N; i++)
      if (buf[r][i] != 12.0f) {
        FAILF("rank %d element %d: got %g after three chained sums, want 12", r, i, buf[r][i]);
        break;
      }
    purlinHostStreamDestroy(st[r]);
    free(buf[r]);
  }
  clique_destroy(&q);
}

/* Symmetric windows as an NCCL program drives them from one thread: two per
 * communicator registered in a group, then released without a group, one
 * communicator after the other (and a buffer registration likewise).
 * Deregistration waits for no peer, as NCCL's, so each call returns at once.
 * The clique is made under PURLIN_TIMEOUT=5, so a deregistration that waited
 * for the other rank would fail within seconds rather than minutes. */
static void test_windows_released_one_comm_at_a_time(void) {
  enum { N = 2, SIZE = 1 << 16 };
  char* saved = getenv("PURLIN_TIMEOUT") ? strdup(getenv("PURLIN_TIMEOUT")) : NULL;
  setenv("PURLIN_TIMEOUT", "5", 1);
  ncclResetDebugInit();
  clique q;
  int made = clique_init(&q, N) == 0;
  if (saved) setenv("PURLIN_TIMEOUT", saved, 1);
  else unsetenv("PURLIN_TIMEOUT");
  free(saved);
  ncclResetDebugInit();
  if (!made) return;
  void* buf[N][2];
  ncclWindow_t win[N][2];
  void* reg[N];
  for (int r = 0; r < N; r++)
    for (int i = 0; i < 2; i++) EXPECT(ncclMemAlloc(&buf[r][i], SIZE) == ncclSuccess, "ncclMemAlloc rank %d", r);
  if (harness_failed()) return;
  ncclGroupStart();
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 2; i++)
      EXPECT(ncclCommWindowRegister(q.comms[r], buf[r][i], SIZE, &win[r][i], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
             "ncclCommWindowRegister rank %d window %d: %s", r, i, ncclGetLastError(q.comms[r]));
    EXPECT(ncclCommRegister(q.comms[r], buf[r][0], SIZE, &reg[r]) == ncclSuccess, "ncclCommRegister rank %d", r);
  }
  EXPECT(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd after the registrations: %s", ncclGetLastError(NULL));
  if (harness_failed()) return;
  for (int r = 0; r < N; r++) {
    double t0 = now_s();
    for (int i = 0; i < 2; i++)
      EXPECT(ncclCommWindowDeregister(q.comms[r], win[r][i]) == ncclSuccess, "ncclCommWindowDeregister rank %d window %d: %s",
             r, i, ncclGetLastError(q.comms[r]));
    EXPECT(ncclCommDeregister(q.comms[r], reg[r]) == ncclSuccess, "ncclCommDeregister rank %d: %s", r,
           ncclGetLastError(q.comms[r]));
    double took = now_s() - t0;
    EXPECT(took < 1, "rank %d's deregistrations took %.1f s: they waited for the other rank", r, took);
  }
  coll_case c = {COLL_ALLREDUCE, 7, OP_SUM, 0, 0, 1000, g_seed++};
  coll_run(&c, q.n, q.comms, 0, q.n); /* the communicators stay in step */
  clique_destroy(&q);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < 2; i++) EXPECT(ncclMemFree(buf[r][i]) == ncclSuccess, "ncclMemFree rank %d", r);
}

/* Outputs in symmetric windows, as a serving engine registers them: an
 * AllGather, an in-place AllReduce, a Broadcast and an in-place AllToAll whose outputs lie at one
 * offset of every rank's window push straight into the outputs (snac
 * direct.go), each call twice (the second time the call cache has seen its
 * arguments), between calls of the same arguments whose outputs lie
 * outside the windows (which the cache records); every output is checked. */
static void test_windows_push_into_outputs(void) {
  enum { N = 3, COUNT = 1 << 18, SIZE = 8 << 20 };
  clique q;
  if (clique_init(&q, N) != 0) return;
  float *win_buf[N], *send[N], *apart[N];
  ncclWindow_t win[N];
  for (int r = 0; r < N; r++) {
    EXPECT(ncclMemAlloc((void**)&win_buf[r], SIZE) == ncclSuccess, "ncclMemAlloc rank %d", r);
    send[r] = malloc(COUNT * sizeof(float));
    apart[r] = malloc((size_t)N * COUNT * sizeof(float));
  }
  if (harness_failed()) return;
  ncclGroupStart();
  for (int r = 0; r < N; r++)
    EXPECT(ncclCommWindowRegister(q.comms[r], win_buf[r], SIZE, &win[r], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
           "ncclCommWindowRegister rank %d: %s", r, ncclGetLastError(q.comms[r]));
  EXPECT(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd after the registrations: %s", ncclGetLastError(NULL));
  for (int round = 0; round < 12 && !harness_failed(); round++) {
    int coll = round % 4, inside = round >= 4; /* each call outside the windows, then twice inside */
    size_t off = (size_t)(round & 1) * (1 << 20) / sizeof(float); /* one offset on every rank */
    for (int r = 0; r < N; r++) {
      float* out = inside ? win_buf[r] + off : apart[r];
      for (size_t i = 0; i < COUNT; i++) send[r][i] = (float)((r * 7 + round * 3 + (int)i) % 1021);
      ncclResult_t rc;
      if (coll == 0) {
        rc = ncclAllGather(send[r], out, COUNT, ncclFloat32, q.comms[r], NULL);
      } else if (coll == 1) {
        memcpy(out, send[r], COUNT * sizeof(float));
        rc = ncclAllReduce(out, out, COUNT, ncclFloat32, ncclSum, q.comms[r], NULL);
      } else if (coll == 3) { /* in place: slice p of the input goes to rank p */
        for (int p = 0; p < N; p++)
          for (size_t i = 0; i < COUNT / N; i++) out[(size_t)p * (COUNT / N) + i] = (float)((r * 5 + p * 11 + round + (int)i) % 1021);
        rc = ncclAlltoAll(out, out, COUNT / N, ncclFloat32, q.comms[r], NULL);
      } else {
        rc = ncclBroadcast(send[r], out, COUNT, ncclFloat32, 1, q.comms[r], NULL);
      }
      EXPECT(rc == ncclSuccess, "round %d rank %d: %s", round, r, ncclGetLastError(q.comms[r]));
    }
    for (int r = 0; r < N; r++)
      EXPECT(purlinCommSynchronize(PC(q.comms[r])) == purlinSuccess, "round %d rank %d: %s", round, r,
             ncclGetLastError(q.comms[r]));
    for (int r = 0; r < N && !harness_failed(); r++) {
      const float* out = inside ? win_buf[r] + off : apart[r];
      size_t n = coll == 0 ? (size_t)N * COUNT : coll == 3 ? (size_t)N * (COUNT / N) : COUNT;
      for (size_t i = 0; i < n; i++) {
        float want;
        if (coll == 0) want = (float)(((int)(i / COUNT) * 7 + round * 3 + (int)(i % COUNT)) % 1021);
        else if (coll == 2) want = (float)((7 + round * 3 + (int)i) % 1021);
        else if (coll == 3) /* slice p came from rank p: its slice r */
          want = (float)(((int)(i / (COUNT / N)) * 5 + r * 11 + round + (int)(i % (COUNT / N))) % 1021);
        else {
          want = 0;
          for (int p = 0; p < N; p++) want += (float)((p * 7 + round * 3 + (int)i) % 1021);
        }
        if (out[i] != want) {
          FAILF("round %d (%s, output %s the window) rank %d element %zu: %g, want %g", round,
                coll == 0 ? "AllGather" : coll == 1 ? "AllReduce in place" : coll == 2 ? "Broadcast" : "AllToAll in place",
                inside ? "in" : "outside", r, i,
                out[i], want);
          break;
        }
      }
    }
  }
  for (int r = 0; r < N; r++) {
    EXPECT(ncclCommWindowDeregister(q.comms[r], win[r]) == ncclSuccess, "ncclCommWindowDeregister rank %d", r);
    free(send[r]);
    free(apart[r]);
  }
  clique_destroy(&q);
  for (int r = 0; r < N; r++) EXPECT(ncclMemFree(win_buf[r]) == ncclSuccess, "ncclMemFree rank %d", r);
}

/* p2p_value: element i of the k-th transfer from rank `from` to rank `to`. */
static float p2p_value(int from, int to, int k, size_t i) {
  return (float)((from * 131 + to * 31 + k * 7 + (int)(i % 65521)) % 65521);
}

/* NCCL matches the k-th send from one rank to another with the k-th receive
 * there, however either side groups its calls. Rank 0 sends two to every
 * peer in one group while the peers receive one call at a time (and the
 * reverse), at a packet size and at one past the host's staging half (a ring). */
static void test_p2p_mixed_groups(void) {
  enum { N = 4, K = 2 };
  static const size_t counts[] = {1000, 300007};
  clique q;
  if (clique_init(&q, N) != 0) return;
  for (int toroot = 0; toroot < 2 && !harness_failed(); toroot++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0] && !harness_failed(); c++) {
      size_t count = counts[c];
      float *src[N][K], *dst[N][K]; /* transfer k between rank 0 and peer p: the sender's and the receiver's buffer */
      for (int p = 1; p < N; p++)
        for (int k = 0; k < K; k++) {
          src[p][k] = malloc(count * sizeof(float));
          dst[p][k] = malloc(count * sizeof(float));
          for (size_t i = 0; i < count; i++)
            src[p][k][i] = p2p_value(toroot ? p : 0, toroot ? 0 : p, k, i), dst[p][k][i] = -1.0f;
        }
      /* Rank 0: every transfer in one group. */
      ncclGroupStart();
      for (int k = 0; k < K; k++)
        for (int p = 1; p < N; p++) {
          ncclResult_t rc = toroot ? ncclRecv(dst[p][k], count, ncclFloat32, p, q.comms[0], NULL)
                                   : ncclSend(src[p][k], count, ncclFloat32, p, q.comms[0], NULL);
          EXPECT(rc == ncclSuccess, "rank 0 call %d with %d: %d", k, p, rc);
        }
      EXPECT(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd: %s", ncclGetLastError(NULL));
      /* The peers: one call at a time (each only enqueues on its own queue). */
      for (int p = 1; p < N; p++)
        for (int k = 0; k < K; k++) {
          ncclResult_t rc = toroot ? ncclSend(src[p][k], count, ncclFloat32, 0, q.comms[p], NULL)
                                   : ncclRecv(dst[p][k], count, ncclFloat32, 0, q.comms[p], NULL);
          EXPECT(rc == ncclSuccess, "rank %d call %d: %d", p, k, rc);
        }
      for (int r = 0; r < N; r++)
        EXPECT(purlinCommSynchronize(PC(q.comms[r])) == purlinSuccess, "rank %d synchronize: %s", r,
               ncclGetLastError(q.comms[r]));
      for (int p = 1; p < N; p++)
        for (int k = 0; k < K; k++) {
          if (memcmp(src[p][k], dst[p][k], count * sizeof(float)) != 0)
            FAILF("transfer %d between ranks 0 and %d (count %zu, %s, rank 0 grouped) arrived wrong", k, p, count,
                  toroot ? "to rank 0" : "from rank 0");
          free(src[p][k]);
          free(dst[p][k]);
        }
    }
  clique_destroy(&q);
}

/* A group of more sends and receives on a communicator than one launch
 * holds (16): every rank sends to and receives from every rank, itself too,
 * K times in one group (nccl-tests' alltoallv -m K, torch's batched p2p),
 * with counts that differ per pair; every element arrives. */
static void test_p2p_group_past_one_launch(void) {
  static const struct { int n, k; } shapes[] = {{4, 3}, {8, 2}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !harness_failed(); s++) {
    enum { MaxN = 8, MaxK = 3 };
    const int n = shapes[s].n, K = shapes[s].k;
    clique q;
    if (clique_init(&q, n) != 0) return;
    float *src[MaxN][MaxN][MaxK], *dst[MaxN][MaxN][MaxK]; /* [from][to][k] */
    size_t count[MaxN][MaxN][MaxK];
    for (int f = 0; f < n; f++)
      for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
          count[f][t][k] = 1 + (size_t)((f * 7 + t * 3 + k * 5) % 11) * 97;
          src[f][t][k] = malloc(count[f][t][k] * sizeof(float));
          dst[f][t][k] = malloc(count[f][t][k] * sizeof(float));
          for (size_t i = 0; i < count[f][t][k]; i++) src[f][t][k][i] = p2p_value(f, t, k, i), dst[f][t][k][i] = -1.0f;
        }
    ncclGroupStart();
    for (int r = 0; r < n; r++)
      for (int k = 0; k < K; k++)
        for (int p = 0; p < n; p++) {
          EXPECT(ncclSend(src[r][p][k], count[r][p][k], ncclFloat32, p, q.comms[r], NULL) == ncclSuccess,
                 "rank %d send %d to %d: %s", r, k, p, ncclGetLastError(NULL));
          EXPECT(ncclRecv(dst[p][r][k], count[p][r][k], ncclFloat32, p, q.comms[r], NULL) == ncclSuccess,
                 "rank %d receive %d from %d: %s", r, k, p, ncclGetLastError(NULL));
        }
    EXPECT(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd of %d operations a rank: %s", 2 * n * K, ncclGetLastError(NULL));
    for (int r = 0; r < n; r++)
      EXPECT(purlinCommSynchronize(PC(q.comms[r])) == purlinSuccess, "rank %d synchronize: %s", r,
             ncclGetLastError(q.comms[r]));
    for (int f = 0; f < n; f++)
      for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
          if (!harness_failed() && memcmp(src[f][t][k], dst[f][t][k], count[f][t][k] * sizeof(float)) != 0)
            FAILF("%d ranks: transfer %d from rank %d to %d (count %zu) arrived wrong", n, k, f, t, count[f][t][k]);
          free(src[f][t][k]);
          free(dst[f][t][k]);
        }
    clique_destroy(&q);
  }
}

int main(int argc, char** argv) {
  harness_init("c-single", 300);
  if (argc > 1) g_seed = strtoull(argv[1], NULL, 0);
  RUN(test_version);
  RUN(test_clique2);
  RUN(test_clique3);
  RUN(test_clique4);
  RUN(test_clique8);
  RUN(test_large);
  RUN(test_repeated_calls);
  RUN(test_purlin_init_all);
  RUN(test_nccl_init_all);
  RUN(test_host_stream);
  RUN(test_windows_released_one_comm_at_a_time);
  RUN(test_windows_push_into_outputs);
  RUN(test_p2p_mixed_groups);
  RUN(test_p2p_group_past_one_launch);
  return harness_finish();
}
