package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/spec"
)

// headerEnums returns, for each `typedef enum { A = 0, B = 1, ... } name;`
// of include/purlin.h, its members and their values (decimal or hex).
func headerEnums(t *testing.T) map[string]map[string]int64 {
	src, err := os.ReadFile("../include/purlin.h")
	require.NoError(t, err)
	enums := map[string]map[string]int64{}
	decl := regexp.MustCompile(`(?s)typedef enum \{(.*?)\} (\w+);`)
	member := regexp.MustCompile(`(\w+) = (0x[0-9a-fA-F]+|\d+)`)
	for _, d := range decl.FindAllStringSubmatch(string(src), -1) {
		m := map[string]int64{}
		for _, kv := range member.FindAllStringSubmatch(d[1], -1) {
			v, err := strconv.ParseInt(kv[2], 0, 64)
			require.NoError(t, err)
			m[kv[1]] = v
		}
		enums[d[2]] = m
	}
	return enums
}

// TestHeaderEnumsMatchGo: the C API's data types, reduction ops, result
// codes and epilogue kinds hold the values of the Go constants capi passes
// them through as, member for member (aliases such as purlinFloat
// included), none missing on either side.
func TestHeaderEnumsMatchGo(t *testing.T) {
	enums := headerEnums(t)
	mirrors := map[string]map[string]int64{
		"purlinDataType_t": {
			"purlinInt8": int64(spec.Int8), "purlinChar": int64(spec.Int8), "purlinUint8": int64(spec.Uint8),
			"purlinInt32": int64(spec.Int32), "purlinInt": int64(spec.Int32), "purlinUint32": int64(spec.Uint32),
			"purlinInt64": int64(spec.Int64), "purlinUint64": int64(spec.Uint64),
			"purlinFloat16": int64(spec.Float16), "purlinHalf": int64(spec.Float16),
			"purlinFloat32": int64(spec.Float32), "purlinFloat": int64(spec.Float32),
			"purlinFloat64": int64(spec.Float64), "purlinDouble": int64(spec.Float64),
			"purlinBfloat16": int64(spec.Bfloat16), "purlinFloat8e4m3": int64(spec.Float8e4m3),
			"purlinFloat8e5m2": int64(spec.Float8e5m2), "purlinNumTypes": int64(spec.NumTypes),
		},
		"purlinRedOp_t": {
			"purlinSum": int64(spec.Sum), "purlinProd": int64(spec.Prod), "purlinMax": int64(spec.Max),
			"purlinMin": int64(spec.Min), "purlinAvg": int64(spec.Avg), "purlinNumOps": int64(spec.NumOps),
			"purlinMaxRedOp": 0x7fffffff,
		},
		"purlinResult_t": {
			"purlinSuccess": int64(errs.Success), "purlinUnhandledCudaError": int64(errs.UnhandledCudaError),
			"purlinSystemError": int64(errs.SystemError), "purlinInternalError": int64(errs.InternalError),
			"purlinInvalidArgument": int64(errs.InvalidArgument), "purlinInvalidUsage": int64(errs.InvalidUsage),
			"purlinRemoteError": int64(errs.RemoteError), "purlinInProgress": int64(errs.InProgress),
			"purlinTimeout": int64(errs.Timeout), "purlinNumResults": int64(errs.Timeout) + 1,
		},
		"purlinEpilogueKind_t": {
			"purlinEpilogueResidualAdd": int64(spec.EpilogueResidualAdd), "purlinEpilogueRMSNorm": int64(spec.EpilogueRMSNorm),
			"purlinEpilogueQuantFP8": int64(spec.EpilogueQuantFP8), "purlinEpilogueRowScale": int64(spec.EpilogueRowScale),
		},
	}
	for name, want := range mirrors {
		require.Equal(t, want, enums[name], "include/purlin.h %s against its Go constants", name)
	}
}
