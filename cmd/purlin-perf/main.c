/*
 * purlin-perf: the collective benchmark of Purlin, written against the NCCL
 * API in the manner of NCCL's own performance tests, so the same program
 * measures Purlin and NCCL side by side.
 *
 *   purlin-perf <collective|all> [-b minbytes] [-e maxbytes] [-f factor]
 *               [-g nranks] [-d dtype|all] [-o op|all] [-r root] [-n iters]
 *               [-w warmup] [-c 0|1] [-G graph-iters] [-m 0|1] [-R 0|1] [-u 0|1]
 *               [-H hidden]
 *
 * One process drives all -g ranks from one thread (NCCL's -g N pattern), or
 * with -m 1 forks one process per rank (multiproc.c). Exit status: 0 when
 * every checked element was right, 1 when some were wrong, 2 on errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "bench.h"
#include "multiproc.h"

static void usage(void) {
  fprintf(stderr,
          "usage: purlin-perf <collective|all> [-b minbytes] [-e maxbytes] [-f factor] [-g nranks]\n"
          "                   [-d dtype|all] [-o op|all] [-r root] [-n iters] [-w warmup] [-c 0|1]\n"
          "                   [-G graph-iters] [-m 0|1] [-R 0|1] [-u 0|1] [-H hidden]\n"
          "  sizes take K, M, G suffixes (binary units); -m 1 runs one process per rank;\n"
          "  -R 1 takes buffers from ncclMemAlloc, each registered as a symmetric window;\n"
          "  -u 0 splits the V collectives evenly (default 1: uneven, seeded);\n"
          "  -H: the row length, in elements, of allreduce_rmsnorm (default 4096)\n"
          "  collectives:");
  for (int i = 0; i < num_colls; i++) fprintf(stderr, " %s", colls[i]->name);
  fprintf(stderr, "\n  types:");
  for (int i = 0; i < num_dtypes; i++) fprintf(stderr, " %s", dtypes[i].name);
  fprintf(stderr, "\n  ops: sum prod max min avg mulsum\n");
  exit(2);
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'G': case 'g': v *= 1024; /* fall through */
    case 'M': case 'm': v *= 1024; /* fall through */
    case 'K': case 'k': v *= 1024; end++; break;
    case '\0': break;
    default: fprintf(stderr, "purlin-perf: bad size %s\n", s); usage();
  }
  if (*end != '\0' || v < 0) { fprintf(stderr, "purlin-perf: bad size %s\n", s); usage(); }
  return (size_t)v;
}

static int parse_int(const char* s, int min) {
  char* end;
  long v = strtol(s, &end, 10);
  if (*end != '\0' || v < min) { fprintf(stderr, "purlin-perf: bad number %s\n", s); usage(); }
  return (int)v;
}

static void parse(int argc, char** argv, options_t* o, const char** which) {
  *o = (options_t){.min_bytes = 8, .max_bytes = 32 << 20, .factor = 2, .nranks = 2, .type = dtype_by_name("float"),
                   .op = OP_SUM, .root = 0, .iters = 20, .warmup = 1, .check = 1};
  if (argc < 2 || argv[1][0] == '-') usage();
  *which = argv[1];
  optind = 2;
  int c;
  while ((c = getopt(argc, argv, "b:e:f:g:d:o:r:n:w:c:G:m:R:u:H:h")) != -1) {
    switch (c) {
      case 'b': o->min_bytes = parse_size(optarg); break;
      case 'e': o->max_bytes = parse_size(optarg); break;
      case 'f': o->factor = strtod(optarg, NULL); break;
      case 'g': o->nranks = parse_int(optarg, 1); break;
      case 'd':
        o->type = strcmp(optarg, "all") ? dtype_by_name(optarg) : NULL;
        if (strcmp(optarg, "all") && !o->type) { fprintf(stderr, "purlin-perf: unknown type %s\n", optarg); usage(); }
        break;
      case 'o':
        o->op = strcmp(optarg, "all") ? op_by_name(optarg) : -1;
        if (strcmp(optarg, "all") && (o->op < 0 || o->op == OP_NONE)) { fprintf(stderr, "purlin-perf: unknown op %s\n", optarg); usage(); }
        break;
      case 'r': o->root = parse_int(optarg, 0); break;
      case 'n': o->iters = parse_int(optarg, 1); break;
      case 'w': o->warmup = parse_int(optarg, 0); break;
      case 'c': o->check = parse_int(optarg, 0); break;
      case 'G': o->graph_iters = parse_int(optarg, 0); break;
      case 'm': o->multiproc = parse_int(optarg, 0); break;
      case 'R': o->registered = parse_int(optarg, 0); break;
      case 'u': perf_uneven = parse_int(optarg, 0); break;
      case 'H': perf_hidden = (size_t)parse_int(optarg, 1); break;
      default: usage();
    }
  }
  if (optind != argc) usage();
  if (o->nranks > PERF_MAX_RANKS) { fprintf(stderr, "purlin-perf: at most %d ranks\n", PERF_MAX_RANKS); exit(2); }
  if (o->root >= o->nranks) { fprintf(stderr, "purlin-perf: root %d is not one of %d ranks\n", o->root, o->nranks); exit(2); }
  if (o->min_bytes > o->max_bytes) { fprintf(stderr, "purlin-perf: -b is larger than -e\n"); exit(2); }
  if (o->graph_iters > 0 && !backend_graph_supported()) {
    fprintf(stderr, "purlin-perf: -G needs the cuda backend (build with make perf-cuda)\n");
    exit(2);
  }
  if (strcmp(*which, "all") && !coll_by_name(*which)) { fprintf(stderr, "purlin-perf: unknown collective %s\n", *which); usage(); }
}

/* init_comms creates this process's communicators: all ranks in one group, as nccl-tests does. */
static void init_comms(session_t* s, ncclUniqueId id) {
  NCCLCHECK(ncclGroupStart(), -1);
  for (int r = s->first; r < s->first + s->count; r++) {
    if (backend_select_rank(r)) exit(2);
    NCCLCHECK(ncclCommInitRank(&s->comm[r], s->opt.nranks, id, r), r);
  }
  NCCLCHECK(ncclGroupEnd(), -1);
}

static void print_header(session_t* s, const char* which) {
  const options_t* o = &s->opt;
  int version = 0;
  ncclGetVersion(&version);
  printf("# purlin-perf %s: backend %s, NCCL API version %d, %s\n", which, backend_name, version,
         o->multiproc ? "one process per rank" : "one process, one thread");
  printf("# nranks %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d validation: %d graph: %d"
         " registered: %d\n",
         o->nranks, o->min_bytes, o->max_bytes, o->factor, o->warmup, o->iters, o->check, o->graph_iters, o->registered);
  printf("#\n# Using devices\n");
}

/* run benchmarks every selected collective, type and op; returns the exit status. */
static int run(session_t* s, const char* which) {
  for (int ci = 0; ci < num_colls; ci++) {
    const coll_t* coll = colls[ci];
    if (strcmp(which, "all") && strcmp(which, coll->name)) continue;
    print_columns(s, coll);
    for (int ti = 0; ti < num_dtypes; ti++) {
      const dtype_t* t = &dtypes[ti];
      if (s->opt.type && s->opt.type != t) continue;
      if (coll->epilogue && !epilogue_type(t)) {
        if (s->printer && s->opt.type == t)
          printf("# %s %s: skipped, epilogues run on float, half and bfloat16 only\n", coll->name, t->name);
        continue;
      }
      for (int op = 0; op < OP_NONE; op++) {
        if (coll->reduces && s->opt.op >= 0 && op != s->opt.op) continue;
        if (coll->reduces && !op_defined(t, op, s->opt.nranks)) {
          if (s->printer && s->opt.op == op)
            printf("# %s %s %s: skipped, NCCL does not run %s on %s on one rank\n", coll->name, t->name, op_names[op],
                   op_names[op], t->name);
          continue;
        }
        bench_collective(s, coll, t, coll->reduces ? op : OP_NONE);
        if (!coll->reduces) break;
      }
    }
  }
  if (s->printer) {
    printf("# Out of bounds values : %lld %s\n", s->wrong_total, s->wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", s->busbw_count ? s->busbw_sum / s->busbw_count : 0.0);
    printf("# Collective test concluded: %s\n#\n", which);
  }
  return s->wrong_total ? 1 : 0;
}

/* run_ranks is the body of one process driving ranks [first, first+count). */
int run_ranks(const options_t* o, const char* which, int first, int count, ncclUniqueId* id, multiproc_t* mp) {
  session_t* s = calloc(1, sizeof(*s));
  if (!s) return 2;
  s->opt = *o;
  s->first = first;
  s->count = count;
  s->printer = first == 0;
  if (backend_init(first, count, o->nranks)) return 2;
  if (mp) multiproc_attach(mp, s, id);
  else NCCLCHECK(ncclGetUniqueId(id), -1);
  if (s->printer) print_header(s, which);
  if (mp) multiproc_describe(mp, s);
  else for (int r = first; r < first + count; r++) backend_describe(stdout, r);
  init_comms(s, *id);
  int status = run(s, which);
  for (int r = first; r < first + count; r++) NCCLCHECK(ncclCommDestroy(s->comm[r]), r);
  backend_fini();
  free(s);
  return status;
}

int main(int argc, char** argv) {
  options_t o;
  const char* which;
  parse(argc, argv, &o, &which);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int child = multiproc_child(&o, which);
  if (child >= 0) return child;
  if (o.multiproc) return multiproc_run(&o, argv);
  ncclUniqueId id;
  return run_ranks(&o, which, 0, o.nranks, &id, NULL);
}
