/*
 * callcache.c: the C API's call cache (capi/callcache.h) through the library.
 * A collective called again with the same arguments but its buffers is
 * issued from a record without entering Go; these tests call the same shapes
 * with other buffers, in place after out of place and back, with buffers Go
 * would refuse, inside groups (sends and receives of one communicator
 * among them, and collectives of one type), with a user op made again under the same
 * handle, after finalize and destroy, and from two threads that are two
 * ranks, and check every result and error against what the path through Go
 * gives (run.sh also runs the suite with PURLIN_CALL_CACHE=0).
 *
 * Built with -DCALLCACHE_CUDA (and cudart) the buffers are device memory, for
 * the CUDA Atom's records (tests/gpu/run.sh); two ranks then share GPU 0 when
 * it is the only one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl_api.h"

enum { N = 1031 }; /* elements: not a multiple of 16 bytes */

/* The buffers collectives read and write: host memory, or device memory. */
#ifdef CALLCACHE_CUDA
#include <cuda_runtime.h>
static void* mem_alloc(size_t n) {
  void* p = NULL;
  return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
static void mem_free(void* p) { cudaFree(p); }
static void mem_put(void* dst, const void* src, size_t n) { cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice); }
static void mem_get(void* dst, const void* src, size_t n) { cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost); }
static void use_device(int rank) {
  int n = 1;
  cudaGetDeviceCount(&n);
  cudaSetDevice(rank % (n > 0 ? n : 1));
}
/* A rank's own stream: two ranks on one GPU must not queue their kernels
 * behind each other on its legacy stream. */
static void* rank_stream(void) {
  cudaStream_t s = NULL;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  return s;
}
static void stream_free(void* s) { cudaStreamDestroy((cudaStream_t)s); }
static int gpus(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
#else
static void* mem_alloc(size_t n) { return calloc(1, n); }
static void mem_free(void* p) { free(p); }
static void mem_put(void* dst, const void* src, size_t n) { memcpy(dst, src, n); }
static void mem_get(void* dst, const void* src, size_t n) { memcpy(dst, src, n); }
static void use_device(int rank) { (void)rank; }
static void* rank_stream(void) { return NULL; } /* the communicator's own queue */
static void stream_free(void* s) { (void)s; }
static int gpus(void) { return 2; } /* host ranks: as many as asked */
#endif

static ncclComm_t one_rank(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  use_device(0);
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&c, 1, id, 0) != ncclSuccess) {
    FAILF("a one-rank communicator: init failed");
    return NULL;
  }
  return c;
}

/* FIXTURE_TEST defines test name, whose body runs with a one-rank
 * communicator c and buffers a and b of a_elems and b_elems floats, freed
 * after it. */
static void with_fixture(void (*body)(ncclComm_t, float*, float*), size_t a_elems, size_t b_elems) {
  ncclComm_t c = one_rank();
  float* a = mem_alloc(a_elems * sizeof(float));
  float* b = mem_alloc(b_elems * sizeof(float));
  if (c && a && b) {
    body(c, a, b);
  } else {
    FAILF("no communicator or buffers");
  }
  mem_free(a);
  mem_free(b);
  if (c) ncclCommDestroy(c);
}
#define FIXTURE_TEST(name, a_elems, b_elems)                                 \
  static void name##_body(ncclComm_t c, float* a, float* b);               \
  static void name(void) { with_fixture(name##_body, a_elems, b_elems); } \
  static void name##_body(ncclComm_t c, float* a, float* b)

static int sync_comm(ncclComm_t c) { return purlinCommSynchronize(PC(c)) == purlinSuccess; }

/* fill writes base + i to p[0:n]. */
static void fill(float* p, size_t n, float base) {
  static float h[4 * N];
  for (size_t i = 0; i < n; i++) h[i] = base + (float)i;
  mem_put(p, h, n * sizeof(float));
}

static void zero(float* p, size_t n) {
  static const float h[4 * N];
  mem_put(p, h, n * sizeof(float));
}

static float element(const float* p, size_t i) {
  float v;
  mem_get(&v, p + i, sizeof v);
  return v;
}

/* expect_copy checks that out[0:n] holds base + i (a one-rank collective copies). */
static void expect_copy(const char* what, const float* out, size_t n, float base) {
  static float h[4 * N];
  mem_get(h, out, n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    if (h[i] != base + (float)i) {
      FAILF("%s: element %zu is %g, want %g", what, i, h[i], base + (float)i);
      return;
    }
  }
}

/* The same AllReduce shape with other buffers, in place, then apart again. */
static void test_buffers_change(void) {
  ncclComm_t c = one_rank();
  if (!c) return;
  float* buf = mem_alloc(6 * N * sizeof(float));
  for (int i = 0; i < 40; i++) {
    float* send = buf + (i % 3) * N;
    float* recv = buf + 3 * N + (i % 3) * N;
    int in_place = i % 5 == 4;
    if (in_place) recv = send;
    fill(send, N, (float)i);
    EXPECT(ncclAllReduce(send, recv, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "call %d failed", i);
    EXPECT(sync_comm(c), "sync %d failed", i);
    expect_copy(in_place ? "in place" : "apart", recv, N, (float)i);
  }
  mem_free(buf);
  ncclCommDestroy(c);
}

/* Buffers the path through Go refuses, after the same shape was cached with
 * good ones: every refusal is an error, and the communicator stays usable. */
FIXTURE_TEST(test_bad_buffers_refused, 2 * N + 4, N) {
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "warm-up failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "cached call failed");
  EXPECT(ncclAllReduce(a, NULL, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument, "NULL recvbuff accepted");
  EXPECT(ncclAllReduce(NULL, b, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument, "NULL sendbuff accepted");
  EXPECT(ncclAllReduce(a, (char*)b + 2, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument,
         "misaligned recvbuff accepted");
  EXPECT(ncclAllReduce(a, a + 1, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument,
         "overlapping buffers, not in place, accepted");
  EXPECT(ncclAllReduce(a + 1, a, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument,
         "overlapping buffers (recv first), not in place, accepted");
  fill(a, N, 7);
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "good call after refusals failed");
  EXPECT(sync_comm(c), "sync failed");
  expect_copy("after refusals", b, N, 7);
}

/* AllGather's in-place form is the input at the rank's slice of the output
 * (offset 0 on one rank); Broadcast's root is part of what selects a record. */
FIXTURE_TEST(test_allgather_and_broadcast, N, N) {
  for (int i = 0; i < 12; i++) {
    fill(a, N, (float)(10 * i));
    float* out = i % 3 == 2 ? a : b;
    EXPECT(ncclAllGather(a, out, N, ncclFloat32, c, 0) == ncclSuccess, "AllGather %d failed", i);
    EXPECT(sync_comm(c), "sync failed");
    expect_copy("AllGather", out, N, (float)(10 * i));
    fill(a, N, (float)(10 * i + 1));
    EXPECT(ncclBroadcast(a, b, N, ncclFloat32, 0, c, 0) == ncclSuccess, "Broadcast %d failed", i);
    EXPECT(sync_comm(c), "sync failed");
    expect_copy("Broadcast", b, N, (float)(10 * i + 1));
  }
  EXPECT(ncclBroadcast(a, b, N, ncclFloat32, 1, c, 0) == ncclInvalidArgument, "root 1 of 1 rank accepted");
}

/* More shapes than a communicator keeps records of, in turn. */
FIXTURE_TEST(test_many_shapes, N, N) {
  for (int i = 0; i < 60; i++) {
    size_t n = 1 + (size_t)(i % 9) * 97;
    fill(a, n, (float)i);
    zero(b, N);
    EXPECT(ncclAllReduce(a, b, n, ncclFloat32, ncclMax, c, 0) == ncclSuccess, "call %d failed", i);
    EXPECT(sync_comm(c), "sync failed");
    expect_copy("shape", b, n, (float)i);
    if (element(b, n) != 0) FAILF("call %d of %zu elements wrote element %zu", i, n, n);
  }
}

/* A user op destroyed and made again under the same handle with another
 * scalar: the second call must use the new scalar. */
static void test_premulsum_made_again(void) {
  ncclComm_t c = one_rank();
  if (!c) return;
  const float h[4] = {1, 2, 3, 4};
  float* a = mem_alloc(sizeof h);
  float* b = mem_alloc(sizeof h);
  mem_put(a, h, sizeof h);
  for (int k = 2; k <= 4; k++) {
    float scalar = (float)k;
    ncclRedOp_t op;
    EXPECT(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, c) == ncclSuccess,
           "RedOpCreatePreMulSum failed");
    for (int i = 0; i < 2; i++) {
      EXPECT(ncclAllReduce(a, b, 4, ncclFloat32, op, c, 0) == ncclSuccess, "PreMulSum call failed");
      EXPECT(sync_comm(c), "sync failed");
      for (int j = 0; j < 4; j++) EXPECT(element(b, j) == h[j] * scalar, "scalar %d: element %d is %g", k, j, element(b, j));
    }
    ncclRedOpDestroy(op, c);
  }
  mem_free(a);
  mem_free(b);
  ncclCommDestroy(c);
}

/* Calls in a group are queued for GroupEnd, also a shape cached before. */
FIXTURE_TEST(test_group, N, N) {
  fill(a, N, 3);
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "warm-up failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "cached call failed");
  EXPECT(sync_comm(c), "sync failed");
  fill(a, N, 5);
  zero(b, N);
  EXPECT(ncclGroupStart() == ncclSuccess, "GroupStart failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "grouped call failed");
  EXPECT(ncclGroupEnd() == ncclSuccess, "GroupEnd failed");
  EXPECT(sync_comm(c), "sync failed");
  expect_copy("grouped", b, N, 5);
  fill(a, N, 6);
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "call after the group failed");
  EXPECT(sync_comm(c), "sync failed");
  expect_copy("after the group", b, N, 6);
}

/* A group's sends and receives on one communicator (to itself here) are
 * issued by one record at the group's end: each receive gets its send's
 * data, round after round, with the buffers changing, the receive first or
 * the send, and with a second pair of another length in the group. */
static void test_sends_and_receives(void) {
  ncclComm_t c = one_rank();
  float* buf = mem_alloc(8 * N * sizeof(float));
  for (int i = 0; i < 24 && c && buf; i++) {
    float *send = buf + (i % 3) * N, *recv = buf + 4 * N + (i % 2) * N, *send2 = buf + 3 * N, *recv2 = buf + 6 * N;
    size_t n = i % 5 == 4 ? 17 : N, n2 = 33;
    int pairs = i % 6 == 5 ? 2 : 1, ok = 1;
    fill(send, n, (float)i);
    fill(send2, n2, (float)(1000 + i));
    zero(recv, n);
    zero(recv2, n2);
    ok &= ncclGroupStart() == ncclSuccess;
    if (i % 4 == 1) ok &= ncclRecv(recv, n, ncclFloat32, 0, c, 0) == ncclSuccess;
    ok &= ncclSend(send, n, ncclFloat32, 0, c, 0) == ncclSuccess;
    if (i % 4 != 1) ok &= ncclRecv(recv, n, ncclFloat32, 0, c, 0) == ncclSuccess;
    if (pairs == 2) {
      ok &= ncclSend(send2, n2, ncclFloat32, 0, c, 0) == ncclSuccess;
      ok &= ncclRecv(recv2, n2, ncclFloat32, 0, c, 0) == ncclSuccess;
    }
    ok &= ncclGroupEnd() == ncclSuccess;
    EXPECT(ok && sync_comm(c), "round %d: a call failed", i);
    expect_copy("a receive", recv, n, (float)i);
    if (pairs == 2) expect_copy("the second pair's receive", recv2, n2, (float)(1000 + i));
  }
  mem_free(buf);
  if (c) ncclCommDestroy(c);
}

/* Collectives of one type and op in one group on one communicator are
 * issued by one record (the Plan Go merges them into), round after round
 * with their buffers changing; one of another type in the group sends the
 * group through Go. */
static void test_coalesced(void) {
  ncclComm_t c = one_rank();
  float* buf = mem_alloc(8 * N * sizeof(float));
  for (int i = 0; i < 12 && c && buf; i++) {
    float *in = buf + (i % 2) * N, *out = buf + 4 * N + (i % 3) * N, *in2 = buf + 2 * N, *out2 = buf + 7 * N;
    size_t n2 = 33;
    fill(in, N, (float)i);
    fill(in2, n2, (float)(100 + i));
    int ok = ncclGroupStart() == ncclSuccess;
    ok &= ncclAllReduce(in, out, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess;
    ok &= ncclAllReduce(in2, out2, n2, ncclFloat32, ncclSum, c, 0) == ncclSuccess;
    if (i % 4 == 3) ok &= ncclAllReduce(in2, in2, n2, ncclFloat64, ncclSum, c, 0) == ncclSuccess; /* in place, another type */
    ok &= ncclGroupEnd() == ncclSuccess;
    EXPECT(ok && sync_comm(c), "round %d: a call failed", i);
    expect_copy("the first", out, N, (float)i);
    expect_copy("the second", out2, n2, (float)(100 + i));
  }
  mem_free(buf);
  if (c) ncclCommDestroy(c);
}

/* After finalize, and after destroy, a cached shape is refused. */
static void test_ended(void) {
  float* a = mem_alloc(N * sizeof(float));
  float* b = mem_alloc(N * sizeof(float));
  fill(a, N, 1);
  ncclComm_t c = one_rank();
  if (!c) return;
  for (int i = 0; i < 3; i++) EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "call failed");
  EXPECT(ncclCommFinalize(c) == ncclSuccess, "CommFinalize failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidUsage, "call after finalize accepted");
  EXPECT(ncclCommDestroy(c) == ncclSuccess, "CommDestroy failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidUsage, "call after destroy accepted");

  c = one_rank();
  if (!c) return;
  for (int i = 0; i < 3; i++) EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclSuccess, "call failed");
  EXPECT(ncclCommAbort(c) == ncclSuccess, "CommAbort failed");
  EXPECT(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, 0) == ncclInvalidUsage, "call after abort accepted");
  mem_free(a);
  mem_free(b);
}

/* Two ranks, one thread each: AllReduce without groups, then sends and
 * receives, then both in one group, then broadcasts in one group; every
 * call of a rank after its first of a shape is issued from its record. bad:
 * 0, or the failed call's round (sends and receives from 101, exchanges
 * from 201, broadcasts from 301). */
typedef struct {
  ncclUniqueId id;
  int rank;
  int bad;
} two_ranks_arg;

static void* two_ranks_rank(void* p) {
  two_ranks_arg* t = p;
  ncclComm_t c;
  use_device(t->rank);
  if (ncclCommInitRank(&c, 2, t->id, t->rank) != ncclSuccess) {
    t->bad = -1;
    return NULL;
  }
  float* buf = mem_alloc(4 * N * sizeof(float));
  float* h = malloc(N * sizeof(float));
  void* stream = rank_stream();
  for (int i = 0; i < 60 && !t->bad; i++) {
    size_t n = i % 7 == 6 ? 33 : N;
    float* send = buf + (i % 2) * N;
    float* recv = i % 4 == 3 ? send : buf + 2 * N + (i % 2) * N;
    for (size_t j = 0; j < n; j++) h[j] = (float)(t->rank + 1) * (float)(i + j);
    mem_put(send, h, n * sizeof(float));
    if (ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, c, stream) != ncclSuccess || !sync_comm(c)) {
      t->bad = i + 1;
      break;
    }
    mem_get(h, recv, n * sizeof(float));
    for (size_t j = 0; j < n; j++) {
      if (h[j] != 3.0f * (float)(i + j)) {
        t->bad = i + 1;
        break;
      }
    }
  }
  /* Sends and receives, one call a rank, alone or in a group of its own,
   * the direction turning every round: each is issued from its record
   * after its first. */
  for (int i = 0; i < 40 && !t->bad; i++) {
    int sender = i % 2, grouped = i % 4 < 2;
    size_t n = i % 5 == 4 ? 17 : N;
    float* mine = buf + (i % 3) * N;
    ncclResult_t r;
    if (grouped) ncclGroupStart();
    if (t->rank == sender) {
      for (size_t j = 0; j < n; j++) h[j] = (float)(i * 7 + j);
      mem_put(mine, h, n * sizeof(float));
      r = ncclSend(mine, n, ncclFloat32, 1 - t->rank, c, stream);
    } else {
      r = ncclRecv(mine, n, ncclFloat32, 1 - t->rank, c, stream);
    }
    if (grouped && ncclGroupEnd() != ncclSuccess) r = ncclInternalError;
    if (r != ncclSuccess || !sync_comm(c)) {
      t->bad = 100 + i + 1;
      break;
    }
    if (t->rank != sender) {
      mem_get(h, mine, n * sizeof(float));
      for (size_t j = 0; j < n; j++) {
        if (h[j] != (float)(i * 7 + j)) {
          t->bad = 100 + i + 1;
          break;
        }
      }
    }
  }
  /* An exchange: each rank sends to the other and receives from it in one
   * group, as pipeline stages and all-to-alls made of sends and receives
   * do; a rank's pair is issued from one record after its first. */
  for (int i = 0; i < 30 && !t->bad; i++) {
    size_t n = i % 5 == 4 ? 17 : N;
    float *out = buf + (i % 2) * N, *in = buf + 2 * N + (i % 2) * N;
    for (size_t j = 0; j < n; j++) h[j] = (float)((t->rank + 1) * 1000 + i + j);
    mem_put(out, h, n * sizeof(float));
    int ok = ncclGroupStart() == ncclSuccess;
    if (i % 3 == 2) ok &= ncclRecv(in, n, ncclFloat32, 1 - t->rank, c, stream) == ncclSuccess;
    ok &= ncclSend(out, n, ncclFloat32, 1 - t->rank, c, stream) == ncclSuccess;
    if (i % 3 != 2) ok &= ncclRecv(in, n, ncclFloat32, 1 - t->rank, c, stream) == ncclSuccess;
    ok &= ncclGroupEnd() == ncclSuccess;
    if (!ok || !sync_comm(c)) {
      t->bad = 200 + i + 1;
      break;
    }
    mem_get(h, in, n * sizeof(float));
    for (size_t j = 0; j < n; j++) {
      if (h[j] != (float)((2 - t->rank) * 1000 + i + j)) {
        t->bad = 200 + i + 1;
        break;
      }
    }
  }
  /* An all-gather of uneven parts as vLLM's all_gatherv makes it: a group
   * of one broadcast a rank (rank r's part from root r, n_r elements, into
   * its place), collectives of one type issued from one record. */
  for (int i = 0; i < 20 && !t->bad; i++) {
    size_t n[2] = {i % 3 == 2 ? 17 : N, 5 + (size_t)i}, at[2] = {0, n[0]};
    float *part = buf + (i % 2) * N, *all = buf + 2 * N;
    for (size_t j = 0; j < n[t->rank]; j++) h[j] = (float)((t->rank + 1) * 1000 + i + j);
    mem_put(part, h, n[t->rank] * sizeof(float));
    int ok = ncclGroupStart() == ncclSuccess;
    for (int root = 0; root < 2; root++) {
      ok &= ncclBroadcast(part, all + at[root], n[root], ncclFloat32, root, c, stream) == ncclSuccess;
    }
    ok &= ncclGroupEnd() == ncclSuccess;
    if (!ok || !sync_comm(c)) {
      t->bad = 300 + i + 1;
      break;
    }
    for (int root = 0; root < 2 && !t->bad; root++) {
      mem_get(h, all + at[root], n[root] * sizeof(float));
      for (size_t j = 0; j < n[root]; j++) {
        if (h[j] != (float)((root + 1) * 1000 + i + j)) {
          t->bad = 300 + i + 1;
          break;
        }
      }
    }
  }
  free(h);
  mem_free(buf);
  stream_free(stream);
  ncclCommDestroy(c);
  return NULL;
}

static void test_two_ranks(void) {
  two_ranks_arg t[2] = {{.rank = 0}, {.rank = 1}};
  if (ncclGetUniqueId(&t[0].id) != ncclSuccess) {
    FAILF("GetUniqueId failed");
    return;
  }
  t[1].id = t[0].id;
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, two_ranks_rank, &t[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) EXPECT(t[r].bad == 0, "rank %d: call %d failed or was wrong", r, t[r].bad);
}

int main(void) {
  harness_init("callcache", 240);
  RUN(test_buffers_change);
  RUN(test_bad_buffers_refused);
  RUN(test_allgather_and_broadcast);
  RUN(test_many_shapes);
  RUN(test_premulsum_made_again);
  RUN(test_group);
  RUN(test_sends_and_receives);
  RUN(test_coalesced);
  RUN(test_ended);
  if (gpus() >= 2) {
    RUN(test_two_ranks);
  } else {
    printf("SKIP test_two_ranks: two ranks, one thread each, need two GPUs\n");
  }
  return harness_finish();
}
