/* capi.h: what the C shim and the Go exports share. Internal to capi/. */
#ifndef PURLIN_CAPI_H_
#define PURLIN_CAPI_H_

#include <stddef.h>
#include <stdint.h>
#include "purlin.h"

/* Set in a child process after fork() without exec: the Go runtime does not
 * survive fork, so every entry refuses at once instead of hanging. */
extern volatile int purlinForked;

/* Register (unregister) a descriptor the fork handler closes in the child.
 * Internal: hidden from the library's exports. */
__attribute__((visibility("hidden"))) void purlinForkTrack(int fd);
__attribute__((visibility("hidden"))) void purlinForkUntrack(int fd);

/* Collective kinds for goCollective: equal to Go's spec.Collective. */
enum {
  capiAllReduce = 0, capiAllGather = 1, capiReduceScatter = 2, capiAllToAll = 3,
  capiAllGatherV = 4, capiReduceScatterV = 5, capiAllToAllV = 6, capiBroadcast = 7,
  capiReduce = 8, capiGather = 9, capiScatter = 10, capiSendRecv = 11
};

/* ncclTeam_t of nccl_device.h: returned by value by the device-API stubs. */
typedef struct { int nRanks, rank, stride; } capiTeam;

#endif
