/*
 * tests/nccltests/mpi.h: the few MPI calls NVIDIA's nccl-tests make, so its
 * programs run as several processes on one machine without an MPI install.
 *
 * Written by the Purlin project against the MPI standard's signatures; it
 * is not an MPI implementation. Every collective is an all-gather of each
 * process's bytes through a hub (a thread of world rank 0 on a Unix socket),
 * after which each process computes its own result. Processes are started
 * by tests/nccltests/run.sh, which sets MINIMPI_RANK, MINIMPI_SIZE and
 * MINIMPI_HUB; without them a program is a world of one.
 */
#ifndef PURLIN_MINIMPI_H_
#define PURLIN_MINIMPI_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;

#define MPI_SUCCESS 0
#define MPI_UNDEFINED (-32766)
#define MPI_COMM_NULL (-1)
#define MPI_COMM_WORLD 0
#define MPI_IN_PLACE ((void *)1)

/* Datatypes; 0 is MPI_DATATYPE_NULL, which is also what MPI_Datatype() makes. */
#define MPI_DATATYPE_NULL 0
#define MPI_BYTE 1
#define MPI_CHAR 2
#define MPI_INT 3
#define MPI_UNSIGNED 4
#define MPI_LONG 5
#define MPI_UNSIGNED_LONG 6
#define MPI_LONG_LONG 7
#define MPI_INT64_T 8
#define MPI_UINT64_T 9
#define MPI_FLOAT 10
#define MPI_DOUBLE 11

/* Reduction operators; 0 is MPI_OP_NULL. */
#define MPI_OP_NULL 0
#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_MINIMPI_H_ */
