/*
 * tests/gpu/configprobe.c: what a library does with each ncclConfig_t field
 * value: one rank inits with a config changed in one field (NCCL_CONFIG_INITIALIZER
 * otherwise), runs an all-reduce if it got a communicator, and prints the
 * init's result, the all-reduce's and ncclGetLastError. Built against NCCL's
 * nccl.h and run once on each library, the two outputs side by side are how
 * capi/config.go's checks were taken from NCCL 2.28:
 *   gcc -O1 -DREAL_NCCL -I<nccl include> -I<cuda include> -o configprobe tests/gpu/configprobe.c \
 *     <libcudart.so> -L<dir> -l:libnccl.so.2
 * (or -Iinclude in place of -DREAL_NCCL and NCCL's include: Purlin's header)
 *   LD_LIBRARY_PATH=<nccl lib> ./configprobe; LD_LIBRARY_PATH=build/nccl-so ./configprobe
 * Needs a machine with an NVIDIA GPU and a CUDA driver.
 */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime.h>
#ifdef REAL_NCCL
#include <nccl.h>
#else
#include "purlin_nccl.h" /* the same ABI: one binary serves both libraries */
#endif
typedef void (*setter)(ncclConfig_t*);
#define P(name, body) static void name(ncclConfig_t* c) { body; }
P(dflt, (void)c)
P(blocking2, c->blocking = 2) P(blockingNeg, c->blocking = -1) P(blocking0, c->blocking = 0)
P(cga9, c->cgaClusterSize = 9) P(cgaNeg, c->cgaClusterSize = -1) P(cga0, c->cgaClusterSize = 0)
P(min0, c->minCTAs = 0) P(minNeg, c->minCTAs = -1) P(minHuge, c->minCTAs = 100000)
P(max0, c->maxCTAs = 0) P(maxNeg, c->maxCTAs = -1) P(maxHuge, c->maxCTAs = 100000) P(minGtMax, c->minCTAs = 64; c->maxCTAs = 2)
P(split2, c->splitShare = 2) P(splitNeg, c->splitShare = -1) P(split1, c->splitShare = 1)
P(cta3, c->CTAPolicy = 3) P(ctaNeg, c->CTAPolicy = -1) P(cta2, c->CTAPolicy = 2) P(cta1, c->CTAPolicy = 1)
P(collnet2, c->collnetEnable = 2) P(collnetNeg, c->collnetEnable = -1)
P(tcNeg, c->trafficClass = -5) P(tc7, c->trafficClass = 7)
P(shrink2, c->shrinkShare = 2) P(shrinkNeg, c->shrinkShare = -1)
P(nvls0, c->nvlsCTAs = 0) P(nvlsHuge, c->nvlsCTAs = 1000) P(nvlsNeg, c->nvlsCTAs = -1)
P(perPeer0, c->nChannelsPerNetPeer = 0) P(perPeerNeg, c->nChannelsPerNetPeer = -3) P(perPeerHuge, c->nChannelsPerNetPeer = 1000)
P(nvsched2, c->nvlinkCentricSched = 2) P(nvschedNeg, c->nvlinkCentricSched = -1)
P(netBogus, c->netName = "bogus") P(commName, c->commName = "hello")
P(size8, c->size = 8) P(size16, c->size = 16) P(sizeBig, c->size = 4096) P(magicBad, c->magic = 0x1234)
P(version0, c->version = 0) P(versionFuture, c->version = 99999)
P(min1, c->minCTAs = 1)
P(min16, c->minCTAs = 16)
P(min32, c->minCTAs = 32)
P(min33, c->minCTAs = 33)
P(min64, c->minCTAs = 64)
P(min65, c->minCTAs = 65)
P(max1, c->maxCTAs = 1)
P(max64, c->maxCTAs = 64)
P(max65, c->maxCTAs = 65)
P(min2max2, c->minCTAs = 2; c->maxCTAs = 2)
P(min100max200, c->minCTAs = 100; c->maxCTAs = 200)
P(min40max50, c->minCTAs = 40; c->maxCTAs = 50)
P(cga8, c->cgaClusterSize = 8)
P(cga100, c->cgaClusterSize = 100)
P(nvls1, c->nvlsCTAs = 1)
P(nvls64, c->nvlsCTAs = 64)
P(peer1, c->nChannelsPerNetPeer = 1)
P(peer2, c->nChannelsPerNetPeer = 2)
P(peer32, c->nChannelsPerNetPeer = 32)
P(peer64, c->nChannelsPerNetPeer = 64)
P(peer65, c->nChannelsPerNetPeer = 65)
P(peer128, c->nChannelsPerNetPeer = 128)
P(peer3, c->nChannelsPerNetPeer = 3)
P(netSocket, c->netName = "Socket")
P(netIB, c->netName = "IB")
P(netEmpty, c->netName = "")
P(split0, c->splitShare = 0)
P(collnet1, c->collnetEnable = 1)
P(nvsched1, c->nvlinkCentricSched = 1)
P(shrink1, c->shrinkShare = 1)
P(cta0, c->CTAPolicy = 0)
P(size24, c->size = 24)
P(size12, c->size = 12)
#undef P
static const struct { const char* name; setter set; } probes[] = {
#define E(n) {#n, n},
E(dflt) E(blocking2) E(blockingNeg) E(blocking0) E(cga9) E(cgaNeg) E(cga0) E(min0) E(minNeg) E(minHuge) E(max0) E(maxNeg) E(maxHuge) E(minGtMax)
E(split2) E(splitNeg) E(split1) E(cta3) E(ctaNeg) E(cta2) E(cta1) E(collnet2) E(collnetNeg) E(tcNeg) E(tc7) E(shrink2) E(shrinkNeg)
E(nvls0) E(nvlsHuge) E(nvlsNeg) E(perPeer0) E(perPeerNeg) E(perPeerHuge) E(nvsched2) E(nvschedNeg) E(netBogus) E(commName)
E(size8) E(size16) E(sizeBig) E(magicBad) E(version0) E(versionFuture)
E(min1) E(min16) E(min32) E(min33) E(min64) E(min65) E(max1) E(max64) E(max65) E(min2max2) E(min100max200) E(min40max50) E(cga8) E(cga100) E(nvls1) E(nvls64) E(peer1) E(peer2) E(peer32) E(peer64) E(peer65) E(peer128) E(peer3) E(netSocket) E(netIB) E(netEmpty) E(split0) E(collnet1) E(nvsched1) E(shrink1) E(cta0) E(size24) E(size12)
};
int main(void) {
  if (cudaSetDevice(0) != cudaSuccess) return 1;
  int v; ncclGetVersion(&v); printf("version %d\n", v);
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    ncclUniqueId id; ncclGetUniqueId(&id);
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    probes[i].set(&c);
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &c);
    ncclResult_t a = ncclSuccess;
    if (r == ncclInProgress || (r == ncclSuccess && comm)) {
      do { ncclCommGetAsyncError(comm, &a); } while (a == ncclInProgress);
    }
    float* buf = NULL;
    if (cudaMalloc((void**)&buf, 64) != cudaSuccess) return 1;
    int ar = comm ? (int)ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, 0) : -1; /* -1: no communicator */
    cudaDeviceSynchronize();
    if (comm) { ncclResult_t as; do { ncclCommGetAsyncError(comm, &as); } while (as == ncclInProgress); }
    printf("%-14s init=%d async=%d allreduce=%d last='%s'\n", probes[i].name, r, a, ar, ncclGetLastError(comm));
    fflush(stdout);
    if (comm) ncclCommDestroy(comm);
    cudaFree(buf);
  }
  return 0;
}
