package cuda

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
)

// TestLayoutMatchesHeader checks the Go structs the kernel reads against the
// PURLIN_SIZE/PURLIN_OFFSET lines of csrc/plan.cuh, which nvcc checks the C
// structs against: one set of numbers binds both sides.
func TestLayoutMatchesHeader(t *testing.T) {
	src, err := os.ReadFile("../../csrc/plan.cuh")
	require.NoError(t, err)
	types := map[string]reflect.Type{
		"Ref":    reflect.TypeOf(snac.Ref{}),
		"Step":   reflect.TypeOf(snac.Step{}),
		"Worker": reflect.TypeOf(snac.Worker{}),
		"Peers":  reflect.TypeOf(peers{}),
		"Launch": reflect.TypeOf(launchArgs{}),
	}
	sizes := regexp.MustCompile(`(?m)^PURLIN_SIZE\((\w+), (\d+)\);`).FindAllStringSubmatch(string(src), -1)
	offsets := regexp.MustCompile(`(?m)^PURLIN_OFFSET\((\w+), \w+, (\w+), (\d+)\);`).FindAllStringSubmatch(string(src), -1)
	require.Len(t, sizes, len(types), "one PURLIN_SIZE per mirrored type")
	require.Greater(t, len(offsets), 30)
	for _, m := range sizes {
		typ, ok := types[m[1]]
		require.True(t, ok, "unknown type %s", m[1])
		want, _ := strconv.Atoi(m[2])
		require.Equal(t, want, int(typ.Size()), "sizeof %s", m[1])
	}
	seen := map[string]int{}
	for _, m := range offsets {
		typ := types[m[1]]
		require.NotNil(t, typ, "unknown type %s", m[1])
		f, ok := typ.FieldByName(m[2])
		require.True(t, ok, "%s has no field %s", m[1], m[2])
		want, _ := strconv.Atoi(m[3])
		require.Equal(t, want, int(f.Offset), "offset of %s.%s", m[1], m[2])
		seen[m[1]]++
	}
	// Every named field of the mirrored structs is checked.
	for name, typ := range types {
		named := 0
		for i := 0; i < typ.NumField(); i++ {
			if typ.Field(i).Name != "_" {
				named++
			}
		}
		if name != "Peers" {
			require.Equal(t, named, seen[name], "fields of %s checked", name)
		}
	}
}

func TestHeaderLimitsMatchSnac(t *testing.T) {
	src, err := os.ReadFile("../../csrc/plan.cuh")
	require.NoError(t, err)
	get := func(name string) int {
		m := regexp.MustCompile(`constexpr \w+ ` + name + ` = ([^;]+);`).FindStringSubmatch(string(src))
		require.NotNil(t, m, name)
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return -1
		}
		return n
	}
	require.Equal(t, snac.MaxRanks, get("kMaxRanks"))
	require.Equal(t, snac.MaxWorkers, get("kMaxWorkers"))
	require.Equal(t, MaxBuffers, get("kMaxBuffers"))
	require.Equal(t, snac.MaxPeerSlots, get("kMaxPeerSlots"))
	require.Equal(t, int(snac.DoneCheck), get("kDoneCheck"))
	require.Contains(t, string(src), "kEpochAdvance = (1ull << 20) + 1;")
	require.Equal(t, uint64(1<<20+1), uint64(snac.EpochAdvance))
	require.Contains(t, string(src), "enum FlagKind : uint32_t { kFlagReady = 0, kFlagReduced = 1, kFlagConsumed = 2, kFlagDone = 3, kFlagAgree = 4, kFlagGathered = 5, kFlagJoined = 6, kNumFlagKinds = 7 };")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{snac.FlagReady, snac.FlagReduced, snac.FlagConsumed, snac.FlagDone, snac.FlagAgree, snac.FlagGathered, snac.FlagJoined, int(snac.FlagSlot(1, 0, 0, 0)) / (snac.MaxRanks * snac.MaxWorkers)}, "flag kinds")
}
