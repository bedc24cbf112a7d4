package comm

// Version is Purlin's version (include/purlin.h PURLIN_MAJOR.MINOR.PATCH).
const Version = "0.1.0"

// NCCLVersion is the NCCL version whose ABI Purlin serves (2.28.9, encoded
// as NCCL_VERSION does); ncclGetVersion returns it.
const NCCLVersion = 22809

// VersionCode is Purlin's own version as an integer (major*10000+minor*100+patch).
const VersionCode = 0*10000 + 1*100 + 0
