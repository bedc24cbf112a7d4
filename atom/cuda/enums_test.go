package cuda

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// cEnums returns, for each `enum Name : type { kA = 0, kB = 1, ... };` of
// the CUDA sources, its members and their values.
func cEnums(t *testing.T, files ...string) map[string]map[string]int64 {
	enums := map[string]map[string]int64{}
	decl := regexp.MustCompile(`(?s)enum (\w+) : \w+ \{(.*?)\};`)
	member := regexp.MustCompile(`(\w+) = (\d+)`)
	for _, f := range files {
		src, err := os.ReadFile("../../csrc/" + f)
		require.NoError(t, err)
		for _, d := range decl.FindAllStringSubmatch(string(src), -1) {
			m := map[string]int64{}
			for _, kv := range member.FindAllStringSubmatch(d[2], -1) {
				v, err := strconv.ParseInt(kv[2], 10, 64)
				require.NoError(t, err)
				m[kv[1]] = v
			}
			require.Equal(t, strings.Count(d[2], "="), len(m), "enum %s: every member has an explicit value", d[1])
			enums[d[1]] = m
		}
	}
	return enums
}

// TestEnumsMatchKernels: the enums the kernels switch on hold the values of
// the Go constants they mirror, member for member, none missing on either
// side (a new data type, op, verb, space, epilogue kind or status is added
// to both).
func TestEnumsMatchKernels(t *testing.T) {
	enums := cEnums(t, "numeric.cuh", "reduce.cuh", "plan.cuh", "status.cuh", "epilogue.cuh")
	mirrors := map[string]map[string]int64{
		"DType": {
			"kInt8": int64(spec.Int8), "kUint8": int64(spec.Uint8), "kInt32": int64(spec.Int32), "kUint32": int64(spec.Uint32),
			"kInt64": int64(spec.Int64), "kUint64": int64(spec.Uint64), "kFloat16": int64(spec.Float16), "kFloat32": int64(spec.Float32),
			"kFloat64": int64(spec.Float64), "kBfloat16": int64(spec.Bfloat16), "kFloat8e4m3": int64(spec.Float8e4m3), "kFloat8e5m2": int64(spec.Float8e5m2),
		},
		"OpKind": {
			"kSum": int64(spec.Sum), "kProd": int64(spec.Prod), "kMax": int64(spec.Max), "kMin": int64(spec.Min),
			"kAvg": int64(spec.Avg), "kPreMulSum": int64(spec.PreMulSum),
		},
		"Verb": {
			"kCopy": int64(snac.Copy), "kReduce": int64(snac.Reduce), "kNotify": int64(snac.Notify), "kWait": int64(snac.Wait),
			"kAdvance": int64(snac.Advance), "kEpilogue": int64(snac.Epilogue), "kRepeat": int64(snac.Repeat),
		},
		"Space": {
			"kSpaceSend": int64(snac.SpaceSend), "kSpaceRecv": int64(snac.SpaceRecv), "kSpaceStage": int64(snac.SpaceStage),
			"kSpacePacket": int64(snac.SpacePacket), "kSpacePeerRecv": int64(snac.SpacePeerRecv), "kNumSpaces": int64(snac.NumSpaces),
		},
		"EpilogueKind": {
			"kEpilogueResidualAdd": int64(spec.EpilogueResidualAdd), "kEpilogueRMSNorm": int64(spec.EpilogueRMSNorm),
			"kEpilogueQuantFP8": int64(spec.EpilogueQuantFP8), "kEpilogueRowScale": int64(spec.EpilogueRowScale),
		},
		"StatusCode": {
			"kStatusOK": statusOK, "kStatusTimeout": statusTimeout, "kStatusAborted": statusAborted,
			"kStatusMismatch": statusMismatch, "kStatusStopped": statusStopped, "kStatusBadRef": statusBadRef,
		},
	}
	for name, want := range mirrors {
		require.Equal(t, want, enums[name], "csrc enum %s against its Go constants", name)
	}
	require.Len(t, mirrors["DType"], int(spec.NumTypes), "every data type")
	src, err := os.ReadFile("../../csrc/epilogue.cuh")
	require.NoError(t, err)
	require.Contains(t, string(src), fmt.Sprintf("constexpr float kFP8Max = %d.0f;", spec.FP8Max), "spec.FP8Max")
	require.Len(t, mirrors["OpKind"], int(spec.PreMulSum)+1, "every op")
	plan, err := os.ReadFile("../../csrc/plan.cuh")
	require.NoError(t, err)
	require.Contains(t, string(plan), fmt.Sprintf("constexpr uint64_t kImageHeader = %d;", imageHeader), "imageHeader")
}
