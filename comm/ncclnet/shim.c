/* shim.c: see shim.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

typedef struct { char internal[128]; } pn_unique_id;

static struct {
  const char* (*error_string)(int);
  int (*get_unique_id)(pn_unique_id*);
  int (*comm_init_rank)(void**, int, pn_unique_id, int);
  int (*comm_split)(void*, int, int, void**, void*);
  int (*comm_abort)(void*);
  int (*comm_destroy)(void*);
  int (*comm_async_error)(void*, int*);
  int (*group_start)(void);
  int (*group_end)(void);
  int (*all_reduce)(const void*, void*, size_t, int, int, void*, void*);
  int (*all_gather)(const void*, void*, size_t, int, void*, void*);
  int (*reduce_scatter)(const void*, void*, size_t, int, int, void*, void*);
  int (*broadcast)(const void*, void*, size_t, int, int, void*, void*);
  int (*reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  int (*send)(const void*, size_t, int, int, void*, void*);
  int (*recv)(void*, size_t, int, int, void*, void*);
  int (*mem_alloc)(void**, size_t);  /* optional (NCCL 2.19 and later) */
  int (*mem_free)(void*);
} nccl;

int pn_load(const char* path, char* why, int whylen) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!lib) {
    snprintf(why, whylen, "%s", dlerror());
    return -1;
  }
  if (dlsym(lib, "purlinGetVersion")) {
    snprintf(why, whylen, "%s is Purlin itself, not NCCL", path);
    dlclose(lib);
    return -1;
  }
#define RESOLVE(field, name)                                               \
  if (!(*(void**)&nccl.field = dlsym(lib, name))) {                        \
    snprintf(why, whylen, "%s has no %s: not a usable NCCL", path, name); \
    return -1;                                                             \
  }
  RESOLVE(error_string, "ncclGetErrorString")
  RESOLVE(get_unique_id, "ncclGetUniqueId")
  RESOLVE(comm_init_rank, "ncclCommInitRank")
  RESOLVE(comm_split, "ncclCommSplit")
  RESOLVE(comm_abort, "ncclCommAbort")
  RESOLVE(comm_destroy, "ncclCommDestroy")
  RESOLVE(comm_async_error, "ncclCommGetAsyncError")
  RESOLVE(group_start, "ncclGroupStart")
  RESOLVE(group_end, "ncclGroupEnd")
  RESOLVE(all_reduce, "ncclAllReduce")
  RESOLVE(all_gather, "ncclAllGather")
  RESOLVE(reduce_scatter, "ncclReduceScatter")
  RESOLVE(broadcast, "ncclBroadcast")
  RESOLVE(reduce, "ncclReduce")
  RESOLVE(send, "ncclSend")
  RESOLVE(recv, "ncclRecv")
#undef RESOLVE
  *(void**)&nccl.mem_alloc = dlsym(lib, "ncclMemAlloc");
  *(void**)&nccl.mem_free = dlsym(lib, "ncclMemFree");
  return 0;
}

const char* pn_error_string(int r) { return nccl.error_string ? nccl.error_string(r) : "NCCL not loaded"; }

int pn_get_unique_id(void* id128) { return nccl.get_unique_id((pn_unique_id*)id128); }

int pn_comm_init_rank(void** comm, int nranks, const void* id128, int rank) {
  pn_unique_id id;
  memcpy(&id, id128, sizeof id);
  return nccl.comm_init_rank(comm, nranks, id, rank);
}

int pn_comm_split(void* comm, int color, int key, void** newcomm) { return nccl.comm_split(comm, color, key, newcomm, NULL); }
int pn_comm_abort(void* comm) { return nccl.comm_abort(comm); }
int pn_comm_destroy(void* comm) { return nccl.comm_destroy(comm); }
int pn_comm_async_error(void* comm, int* result) { return nccl.comm_async_error(comm, result); }
int pn_group_start(void) { return nccl.group_start(); }
int pn_group_end(void) { return nccl.group_end(); }
int pn_mem_alloc(void** p, size_t n) { return nccl.mem_alloc && nccl.mem_free ? nccl.mem_alloc(p, n) : -1; }
int pn_mem_free(void* p) { return nccl.mem_free(p); }

int pn_all_reduce(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
  return nccl.all_reduce(s, r, n, t, op, comm, stream);
}
int pn_all_gather(const void* s, void* r, size_t n, int t, void* comm, void* stream) {
  return nccl.all_gather(s, r, n, t, comm, stream);
}
int pn_reduce_scatter(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
  return nccl.reduce_scatter(s, r, n, t, op, comm, stream);
}
int pn_broadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* stream) {
  return nccl.broadcast(s, r, n, t, root, comm, stream);
}
int pn_reduce(const void* s, void* r, size_t n, int t, int op, int root, void* comm, void* stream) {
  return nccl.reduce(s, r, n, t, op, root, comm, stream);
}
int pn_send(const void* s, size_t n, int t, int peer, void* comm, void* stream) {
  return nccl.send(s, n, t, peer, comm, stream);
}
int pn_recv(void* r, size_t n, int t, int peer, void* comm, void* stream) {
  return nccl.recv(r, n, t, peer, comm, stream);
}
