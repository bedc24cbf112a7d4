/*
 * bench.c: the per-size loop. For every size: build the shape, check one
 * out-of-place iteration against the host reference, time warmup + iters
 * iterations (or CUDA-graph replays), then the same in place, and print
 * one nccl-tests style line.
 */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

void fail(const char* what, ncclResult_t res, int rank) {
  fprintf(stderr, "purlin-perf: rank %d: %s failed: %s (%s)\n", rank, what, ncclGetErrorString(res),
          ncclGetLastError(NULL));
  exit(2);
}

static void must(int failed) {
  if (failed) exit(2);
}

/* Buffers of the ranks this process drives. */
enum { BUF_SEND, BUF_RECV, BUF_INPLACE, NUM_BUFS };
typedef struct {
  void* buf[NUM_BUFS][PERF_MAX_RANKS];  /* send, recv, in place; NULL where unused */
  ncclWindow_t win[NUM_BUFS][PERF_MAX_RANKS];  /* -R 1: each buffer's window */
  void* residual[PERF_MAX_RANKS];  /* an epilogue's residual and weight; NULL without one */
  void* weight[PERF_MAX_RANKS];
  unsigned char* host;  /* staging for uploads and downloads */
  unsigned char* ref;   /* reference reduction, for reducing collectives */
} buffers_t;

static size_t max_elems(const shape_t* sh, int r) {
  size_t m = sh->send_elems[r] > sh->recv_elems[r] ? sh->send_elems[r] : sh->recv_elems[r];
  return m > sh->inplace_elems[r] ? m : sh->inplace_elems[r];
}

/* elems is how many elements buffer k of rank r holds. */
static size_t elems(const shape_t* sh, int k, int r) {
  return k == BUF_SEND ? sh->send_elems[r] : k == BUF_RECV ? sh->recv_elems[r] : sh->inplace_elems[r];
}

/* alloc_registered gives every local rank's buffers from ncclMemAlloc and
 * registers each as a symmetric window, as serving engines use NCCL: a
 * window has one size on every rank, so each buffer gets the largest any
 * rank needs. Registration is collective: one group for all local ranks. */
static void alloc_registered(session_t* s, buffers_t* b, const shape_t* sh, const dtype_t* t, int kinds) {
  for (int k = 0; k < kinds; k++) {
    size_t bytes = 256;
    for (int r = 0; r < s->opt.nranks; r++)
      if (elems(sh, k, r) * t->size > bytes) bytes = elems(sh, k, r) * t->size;
    for (int r = s->first; r < s->first + s->count; r++) {
      must(backend_select_rank(r));
      NCCLCHECK(ncclMemAlloc(&b->buf[k][r], bytes), r);
    }
    NCCLCHECK(ncclGroupStart(), -1);
    for (int r = s->first; r < s->first + s->count; r++)
      NCCLCHECK(ncclCommWindowRegister(s->comm[r], b->buf[k][r], bytes, &b->win[k][r], NCCL_WIN_COLL_SYMMETRIC), r);
    NCCLCHECK(ncclGroupEnd(), -1);
  }
}

static void alloc_buffers(session_t* s, buffers_t* b, const shape_t* sh, const coll_t* coll, const dtype_t* t) {
  size_t host = 0;
  int kinds = coll->has_inplace ? NUM_BUFS : BUF_INPLACE;
  memset(b, 0, sizeof(*b));
  if (s->opt.registered) alloc_registered(s, b, sh, t, kinds);
  for (int r = s->first; r < s->first + s->count; r++) {
    for (int k = 0; k < kinds && !s->opt.registered; k++) {
      must(backend_select_rank(r));
      must(!(b->buf[k][r] = backend_alloc(r, elems(sh, k, r) * t->size)));
    }
    if (coll->epilogue) {
      must(!(b->residual[r] = backend_alloc(r, sh->recv_elems[r] * t->size)));
      must(!(b->weight[r] = backend_alloc(r, sh->hidden * t->size)));
    }
    if (max_elems(sh, r) > host) host = max_elems(sh, r);
  }
  b->host = malloc(host * t->size + 8);
  b->ref = coll->reduces ? malloc(sh->send_elems[s->first] * t->size + 8) : NULL;
  must(!b->host || (coll->reduces && !b->ref));
}

static void free_buffers(session_t* s, buffers_t* b) {
  if (s->opt.registered) {
    NCCLCHECK(ncclGroupStart(), -1);
    for (int k = 0; k < NUM_BUFS; k++)
      for (int r = s->first; r < s->first + s->count; r++)
        if (b->buf[k][r]) NCCLCHECK(ncclCommWindowDeregister(s->comm[r], b->win[k][r]), r);
    NCCLCHECK(ncclGroupEnd(), -1);
  }
  for (int k = 0; k < NUM_BUFS; k++)
    for (int r = s->first; r < s->first + s->count; r++) {
      if (!b->buf[k][r]) continue;
      if (s->opt.registered) NCCLCHECK(ncclMemFree(b->buf[k][r]), r);
      else backend_free(r, b->buf[k][r]);
    }
  for (int r = s->first; r < s->first + s->count; r++) {
    if (b->residual[r]) backend_free(r, b->residual[r]);
    if (b->weight[r]) backend_free(r, b->weight[r]);
  }
  free(b->host);
  free(b->ref);
}

/* run_once issues one iteration for every local rank inside one group. */
static void run_once(session_t* s, const coll_t* coll, const call_t* c) {
  NCCLCHECK(ncclGroupStart(), -1);
  for (int r = s->first; r < s->first + s->count; r++) NCCLCHECK(coll->issue(c, r), r);
  NCCLCHECK(ncclGroupEnd(), -1);
}

static void sync_all(session_t* s) {
  for (int r = s->first; r < s->first + s->count; r++) must(backend_sync(r, s->comm[r]));
}

/* stage_inputs writes every local rank's input (and sentinels over its output; an
 * epilogue's residual and weight). */
static void stage_inputs(session_t* s, const valuegen_t* g, const shape_t* sh, buffers_t* b, const call_t* c) {
  const dtype_t* t = g->type;
  for (int r = s->first; r < s->first + s->count; r++) {
    if (b->residual[r]) {
      for (size_t j = 0; j < sh->recv_elems[r]; j++) store_float(t, b->host, j, residual_value(g, r, j));
      must(backend_upload(r, b->residual[r], b->host, sh->recv_elems[r] * t->size));
      for (size_t j = 0; j < sh->hidden; j++) store_float(t, b->host, j, weight_value(g, j));
      must(backend_upload(r, b->weight[r], b->host, sh->hidden * t->size));
    }
    if (c->inplace) {
      fill_sentinel(t, b->host, sh->inplace_elems[r]);
      fill_input(g, r, b->host + sh->send_off[r] * t->size, sh->send_elems[r]);
      must(backend_upload(r, b->buf[BUF_INPLACE][r], b->host, sh->inplace_elems[r] * t->size));
    } else {
      fill_input(g, r, b->host, sh->send_elems[r]);
      must(backend_upload(r, b->buf[BUF_SEND][r], b->host, sh->send_elems[r] * t->size));
      fill_sentinel(t, b->host, sh->recv_elems[r]);
      must(backend_upload(r, b->buf[BUF_RECV][r], b->host, sh->recv_elems[r] * t->size));
    }
  }
}

/* count_wrong_epilogue checks an AllReduce epilogue (residual add and RMSNorm) on every
 * local rank: the residual it left must be the reduction plus the initial residual, rounded
 * once (as exact as the reduction: element_matches), and each output row RMSNorm of that
 * residual row times the weight (epilogue_matches). */
static long long count_wrong_epilogue(session_t* s, const coll_t* coll, const valuegen_t* g, const shape_t* sh,
                                      buffers_t* b, const call_t* c) {
  const dtype_t* t = g->type;
  const size_t hidden = sh->hidden;
  unsigned char* res = malloc(sh->count * t->size + 8);
  must(!res);
  long long wrong = 0;
  for (int r = s->first; r < s->first + s->count; r++) {
    must(backend_download(r, b->host, c->recv[r], sh->recv_elems[r] * t->size));
    must(backend_download(r, res, b->residual[r], sh->recv_elems[r] * t->size));
    for (size_t row = 0; row < sh->recv_elems[r] / hidden; row++) {
      double ss = 0;
      for (size_t j = 0; j < hidden; j++) {
        size_t i = row * hidden + j;
        unsigned char want[8];
        store_float(t, want, 0, load_float(t, b->ref, i) + residual_value(g, r, i));
        uint64_t got_bits = load_bits(t, res, i), want_bits = load_bits(t, want, 0);
        if (!element_matches(g, got_bits, want_bits, 1) && wrong++ < 3)
          fprintf(stderr, "# %s %s %s: rank %d residual %zu: got %#llx, want %#llx\n", coll->name, t->name,
                  c->inplace ? "in-place" : "out-of-place", r, i, (unsigned long long)got_bits,
                  (unsigned long long)want_bits);
        double z = load_float(t, res, i);
        ss += z * z;
      }
      double inv = 1 / sqrt(ss / (double)hidden + (double)EPILOGUE_EPS);
      for (size_t j = 0; j < hidden; j++) {
        size_t i = row * hidden + j;
        double want = round_float(t, load_float(t, res, i) * inv * weight_value(g, j)), got = load_float(t, b->host, i);
        if (!epilogue_matches(t, hidden, got, want) && wrong++ < 3)
          fprintf(stderr, "# %s %s %s: rank %d element %zu: got %.9g, want %.9g (rmsnorm)\n", coll->name, t->name,
                  c->inplace ? "in-place" : "out-of-place", r, i, got, want);
      }
    }
  }
  free(res);
  return wrong;
}

/* count_wrong compares every local rank's output with its source. */
static long long count_wrong(session_t* s, const coll_t* coll, const valuegen_t* g, const shape_t* sh,
                             buffers_t* b, const call_t* c) {
  const dtype_t* t = g->type;
  long long wrong = 0;
  if (coll->epilogue) return count_wrong_epilogue(s, coll, g, sh, b, c);
  for (int r = s->first; r < s->first + s->count; r++) {
    must(backend_download(r, b->host, c->recv[r], sh->recv_elems[r] * t->size));
    for (size_t i = 0; i < sh->recv_elems[r]; i++) {
      int src_rank = 0;
      size_t src_index = 0;
      int kind = coll->source(sh, r, i, &src_rank, &src_index);
      if (kind == SRC_NONE) continue;
      uint64_t want = kind == SRC_COPY ? g->bits[value_index(g, src_rank, src_index)] : load_bits(t, b->ref, src_index);
      uint64_t got = load_bits(t, b->host, i);
      if (element_matches(g, got, want, kind == SRC_REDUCE)) continue;
      if (wrong++ < 3)
        fprintf(stderr, "# %s %s %s: rank %d element %zu: got %#llx, want %#llx%s\n", coll->name, t->name,
                c->inplace ? "in-place" : "out-of-place", r, i, (unsigned long long)got, (unsigned long long)want,
                kind == SRC_REDUCE ? " (reduced)" : "");
    }
  }
  return wrong;
}

/* time_iters returns microseconds per iteration, after warmup. */
static double time_iters(session_t* s, const coll_t* coll, const call_t* c) {
  const options_t* o = &s->opt;
  for (int w = 0; w < o->warmup; w++) run_once(s, coll, c);
  sync_all(s);
  if (o->graph_iters > 0) {
    for (int r = s->first; r < s->first + s->count; r++) must(backend_capture_begin(r));
    for (int i = 0; i < o->iters; i++) run_once(s, coll, c);
    for (int r = s->first; r < s->first + s->count; r++) must(backend_capture_end(r));
    for (int r = s->first; r < s->first + s->count; r++) must(backend_graph_instantiate(r));
    for (int r = s->first; r < s->first + s->count; r++) must(backend_graph_launch(r)); /* warm the graph */
    sync_all(s);
    double t0 = backend_now_us();
    for (int g = 0; g < o->graph_iters; g++)
      for (int r = s->first; r < s->first + s->count; r++) must(backend_graph_launch(r));
    sync_all(s);
    double t1 = backend_now_us();
    for (int r = s->first; r < s->first + s->count; r++) backend_graph_destroy(r);
    return (t1 - t0) / ((double)o->graph_iters * o->iters);
  }
  double t0 = backend_now_us();
  for (int i = 0; i < o->iters; i++) run_once(s, coll, c);
  sync_all(s);
  return (backend_now_us() - t0) / o->iters;
}

static void format_time(char* buf, size_t len, double us) {
  if (us < 1e4) snprintf(buf, len, "%7.2f", us);
  else if (us < 1e5) snprintf(buf, len, "%7.1f", us);
  else snprintf(buf, len, "%7.0f", us);
}

static void print_result(session_t* s, const coll_t* coll, const shape_t* sh, const dtype_t* t, int op,
                         const result_t* res) {
  char line[256];
  int n = snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6d", sh->bytes, sh->count, t->name,
                   coll->reduces ? op_names[op] : "none", coll->rooted ? sh->root : -1);
  for (int k = 0; k < 2; k++) {
    if (res->time_us[k] < 0) {
      n += snprintf(line + n, sizeof(line) - n, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    char tbuf[32], wbuf[32];
    format_time(tbuf, sizeof(tbuf), res->time_us[k]);
    double algbw = (double)sh->bytes / res->time_us[k] / 1e3;
    double busbw = algbw * coll->busbw_factor(sh->n);
    if (res->wrong[k] < 0) snprintf(wbuf, sizeof(wbuf), "N/A");
    else snprintf(wbuf, sizeof(wbuf), "%lld", res->wrong[k]);
    n += snprintf(line + n, sizeof(line) - n, "  %s  %6.2f  %6.2f  %6s", tbuf, algbw, busbw, wbuf);
    s->busbw_sum += busbw;
    s->busbw_count++;
    if (res->wrong[k] > 0) s->wrong_total += res->wrong[k];
  }
  if (s->printer) {
    printf("%s\n", line);
    fflush(stdout);
  }
}

/* bench_size runs one size, out of place then in place. */
static void bench_size(session_t* s, const coll_t* coll, const dtype_t* t, int op, size_t bytes, uint64_t seed) {
  shape_t* sh = calloc(1, sizeof(*sh));
  must(!sh);
  if (!coll->shape(sh, bytes, t, s->opt.nranks, s->opt.root)) { free(sh); return; }
  valuegen_t g;
  valuegen_init(&g, t, coll->reduces ? op : OP_NONE, s->opt.nranks, seed ^ bytes);
  buffers_t b;
  alloc_buffers(s, &b, sh, coll, t);
  if (coll->reduces) reference_reduce(&g, b.ref, sh->send_elems[s->first]);

  call_t c;
  memset(&c, 0, sizeof(c));
  c.shape = sh;
  c.type = t;
  for (int r = s->first; r < s->first + s->count; r++) {
    c.comm[r] = s->comm[r];
    c.stream[r] = backend_stream(r);
    c.residual[r] = b.residual[r];
    c.weight[r] = b.weight[r];
    c.op[r] = (ncclRedOp_t)(op < OP_MULSUM ? op : 0);
    if (coll->reduces && op == OP_MULSUM) {
      unsigned char scalar[8];
      if (t->kind == KIND_FLOAT) store_float(t, scalar, 0, mulsum_scalar(r));
      else store_bits(t, scalar, 0, (uint64_t)mulsum_scalar(r));
      NCCLCHECK(ncclRedOpCreatePreMulSum(&c.op[r], scalar, (ncclDataType_t)t->nccl, ncclScalarHostImmediate, s->comm[r]), r);
    }
  }

  result_t res = {{-1, -1}, {-1, -1}};
  for (int k = 0; k < 2; k++) {
    c.inplace = k;
    if (k == 1 && !coll->has_inplace) break;
    for (int r = s->first; r < s->first + s->count; r++) {
      c.send[r] = k ? (char*)b.buf[BUF_INPLACE][r] + sh->send_off[r] * t->size : b.buf[BUF_SEND][r];
      c.recv[r] = k ? (char*)b.buf[BUF_INPLACE][r] + sh->recv_off[r] * t->size : b.buf[BUF_RECV][r];
    }
    if (s->opt.check) {
      stage_inputs(s, &g, sh, &b, &c);
      run_once(s, coll, &c);
      sync_all(s);
      res.wrong[k] = count_wrong(s, coll, &g, sh, &b, &c);
    }
    res.time_us[k] = time_iters(s, coll, &c);
  }
  if (s->combine) s->combine(s, &res);
  print_result(s, coll, sh, t, op, &res);

  if (coll->reduces && op == OP_MULSUM)
    for (int r = s->first; r < s->first + s->count; r++) NCCLCHECK(ncclRedOpDestroy(c.op[r], s->comm[r]), r);
  free_buffers(s, &b);
  free(sh);
}

void print_columns(session_t* s, const coll_t* coll) {
  if (!s->printer) return;
  printf("#\n# Collective: %s\n#\n", coll->name);
  printf("# %74s %31s\n", "out-of-place", "in-place");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

int bench_collective(session_t* s, const coll_t* coll, const dtype_t* t, int op) {
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(t->nccl + 1) + 0x632be59bd9b4e019ull * (uint64_t)(op + 1);
  for (const char* p = coll->name; *p; p++) seed = seed * 31 + (unsigned char)*p;
  for (size_t bytes = s->opt.min_bytes; bytes <= s->opt.max_bytes;) {
    bench_size(s, coll, t, op, bytes, seed);
    size_t next = s->opt.factor > 1 ? (size_t)(bytes * s->opt.factor) : bytes + 1;
    if (next <= bytes) next = bytes + 1;
    bytes = next;
  }
  return 0;
}
