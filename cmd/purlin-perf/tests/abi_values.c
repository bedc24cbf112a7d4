/*
 * abi_values.c: prints the numbers an NCCL client compiles in (enum values,
 * constants, ncclConfig_t layout, the config initializer). Built once with
 * NCCL's own nccl.h (-DUSE_REAL_NCCL) and once with purlin_nccl.h; the two
 * outputs must be identical (make perf-abi-check NCCL_INC=<dir of nccl.h>).
 */
#include <stddef.h>
#include <stdio.h>

#ifdef USE_REAL_NCCL
#include <nccl.h>
#else
#include "purlin_nccl.h"
#endif

#define V(x) printf("%-28s %lld\n", #x, (long long)(x))
#define OFF(f) printf("offsetof(ncclConfig_t, %s) %zu\n", #f, offsetof(ncclConfig_t, f))

int main(void) {
  V(NCCL_MAJOR); V(NCCL_MINOR); V(NCCL_PATCH); V(NCCL_VERSION_CODE); V(NCCL_VERSION(2, 28, 9)); V(NCCL_VERSION(2, 8, 4));
  V(NCCL_UNIQUE_ID_BYTES); V(sizeof(ncclUniqueId)); V(sizeof(ncclComm_t));
  V(ncclSuccess); V(ncclUnhandledCudaError); V(ncclSystemError); V(ncclInternalError); V(ncclInvalidArgument);
  V(ncclInvalidUsage); V(ncclRemoteError); V(ncclInProgress);
  V(ncclInt8); V(ncclChar); V(ncclUint8); V(ncclInt32); V(ncclInt); V(ncclUint32); V(ncclInt64); V(ncclUint64);
  V(ncclFloat16); V(ncclHalf); V(ncclFloat32); V(ncclFloat); V(ncclFloat64); V(ncclDouble); V(ncclBfloat16);
  V(ncclFloat8e4m3); V(ncclFloat8e5m2); V(ncclNumTypes); V(sizeof(ncclDataType_t));
  V(ncclSum); V(ncclProd); V(ncclMax); V(ncclMin); V(ncclAvg); V(ncclNumOps); V(ncclMaxRedOp); V(sizeof(ncclRedOp_t));
  V(ncclScalarDevice); V(ncclScalarHostImmediate);
  V(NCCL_CONFIG_UNDEF_INT); V(NCCL_SPLIT_NOCOLOR); /* the magic: c.magic below */
  V(NCCL_CTA_POLICY_DEFAULT); V(NCCL_CTA_POLICY_EFFICIENCY); V(NCCL_CTA_POLICY_ZERO);
  V(NCCL_SHRINK_DEFAULT); V(NCCL_SHRINK_ABORT);
  V(sizeof(ncclConfig_t));
  OFF(size); OFF(magic); OFF(version); OFF(blocking); OFF(cgaClusterSize); OFF(minCTAs); OFF(maxCTAs);
  OFF(netName); OFF(splitShare); OFF(trafficClass); OFF(commName); OFF(collnetEnable); OFF(CTAPolicy);
  OFF(shrinkShare); OFF(nvlsCTAs); OFF(nChannelsPerNetPeer); OFF(nvlinkCentricSched);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  V(c.size); V(c.magic); V(c.version); V(c.blocking); V(c.cgaClusterSize); V(c.minCTAs); V(c.maxCTAs);
  V(c.netName == NULL); V(c.splitShare); V(c.trafficClass); V(c.commName == NULL); V(c.collnetEnable);
  V(c.CTAPolicy); V(c.shrinkShare); V(c.nvlsCTAs); V(c.nChannelsPerNetPeer); V(c.nvlinkCentricSched);
  return 0;
}
