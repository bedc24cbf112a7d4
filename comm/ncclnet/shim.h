/*
 * shim.h: the few NCCL entry points Purlin's network between nodes calls,
 * through pointers a real libnccl.so.2 (dlopen'ed with RTLD_LOCAL and
 * RTLD_DEEPBIND, so that it binds to itself and never to Purlin's own nccl*
 * symbols) provides. Types are NCCL's ABI: results and enums are int,
 * communicators and streams pointers, the unique id 128 bytes.
 */
#ifndef PURLIN_NCCLNET_SHIM_H
#define PURLIN_NCCLNET_SHIM_H
#include <stddef.h>

/* pn_load opens path and resolves every entry point; 0 on success, else -1
 * with why filled. A library that exports purlinGetVersion is Purlin itself
 * (its drop-in build is also called libnccl.so.2) and is refused. */
int pn_load(const char* path, char* why, int whylen);
const char* pn_error_string(int result);

int pn_get_unique_id(void* id128);
int pn_comm_init_rank(void** comm, int nranks, const void* id128, int rank);
int pn_comm_split(void* comm, int color, int key, void** newcomm);
int pn_comm_abort(void* comm);
int pn_comm_destroy(void* comm);
int pn_comm_async_error(void* comm, int* result);
int pn_group_start(void);
int pn_group_end(void);
/* ncclMemAlloc and ncclMemFree (NCCL 2.19 and later); where the library has
 * none, pn_mem_alloc returns -1 and sets nothing. */
int pn_mem_alloc(void** ptr, size_t bytes);
int pn_mem_free(void* ptr);

int pn_all_reduce(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream);
int pn_all_gather(const void* send, void* recv, size_t count, int type, void* comm, void* stream);
int pn_reduce_scatter(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream);
int pn_broadcast(const void* send, void* recv, size_t count, int type, int root, void* comm, void* stream);
int pn_reduce(const void* send, void* recv, size_t count, int type, int op, int root, void* comm, void* stream);
int pn_send(const void* send, size_t count, int type, int peer, void* comm, void* stream);
int pn_recv(void* recv, size_t count, int type, int peer, void* comm, void* stream);
#endif
