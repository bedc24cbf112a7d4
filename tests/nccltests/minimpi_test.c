/*
 * tests/nccltests/minimpi_test.c: checks minimpi's calls the way nccl-tests
 * uses them, in a world of any size: launch.sh N build/.../minimpi_test.
 * Prints "minimpi_test: PASS (N ranks)" on rank 0, or a failure and exits 1.
 * With an argument the last rank exits at once: every rank must then stop.
 */
#include "mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "minimpi_test rank %d: %s:%d: %s\n", rank, __FILE__, __LINE__, #cond); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && rank == size - 1) return 3; /* "die": the others must stop, not wait */

  /* nccl-tests' host hashes: an in-place all-gather of bytes. */
  uint64_t *hashes = calloc((size_t)size, sizeof *hashes);
  hashes[rank] = 1000u + (uint64_t)rank * 7u;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD);
  for (int i = 0; i < size; i++) CHECK(hashes[i] == 1000u + (uint64_t)i * 7u);

  /* Split by parity, keys reversed: rank order inside a color follows the key. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hrank, hsize;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  CHECK(hsize == (size - rank % 2 + 1) / 2);
  CHECK(hrank == hsize - 1 - rank / 2);

  /* A broadcast inside each half, from its rank 0 (the highest world rank of the color). */
  char id[128];
  for (int i = 0; i < 128; i++) id[i] = (char)(hrank == 0 ? rank * 3 + i : -1);
  MPI_Bcast(id, sizeof id, MPI_BYTE, 0, half);
  int top = (size - 1) % 2 == rank % 2 ? size - 1 : size - 2;
  for (int i = 0; i < 128; i++) CHECK(id[i] == (char)(top * 3 + i));
  MPI_Barrier(MPI_COMM_WORLD);

  /* Reductions in place and apart. */
  int ones = 1, minr = rank, n = 0;
  MPI_Allreduce(MPI_IN_PLACE, &ones, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &minr, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&rank, &n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(ones == size && minr == 0 && n == size - 1);
  double d[2] = {0.5 * rank, -1.0 * rank};
  MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(d[0] == 0.25 * size * (size - 1) && d[1] == -0.5 * size * (size - 1));
  int64_t big = (int64_t)1 << (40 + rank % 3);
  MPI_Allreduce(MPI_IN_PLACE, &big, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(big == (int64_t)1 << (40 + (size >= 3 ? 2 : size - 1)));
  long long sum = rank;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG_LONG, MPI_SUM, half);
  long long want = 0;
  for (int r = rank % 2; r < size; r += 2) want += r;
  CHECK(sum == want);

  /* nccl-tests' per-iteration times: a gather of doubles to rank 0. */
  double mine[3] = {rank + 0.1, rank + 0.2, rank + 0.3}, *all = NULL;
  if (rank == 0) all = calloc((size_t)size * 3, sizeof *all);
  MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; r++) CHECK(all[3 * r + 2] == r + 0.3);
  }

  MPI_Comm_free(&half);
  CHECK(half == MPI_COMM_NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("minimpi_test: PASS (%d ranks)\n", size);
  MPI_Finalize();
  free(hashes);
  free(all);
  return 0;
}
