package spec_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/spec"
)

// gatherRows is an AllGatherV with an RMSNorm epilogue over rows of 4
// float32: rank r's part rows 2r and 2r+1 of its 8-row output, in [0x10000,
// +128); the input apart.
func gatherRows() spec.Call {
	return spec.Call{Coll: spec.AllGatherV, Send: 0x1000, Recv: 0x10000, Type: spec.Float32, Rank: 1, NRanks: 4,
		Counts: []uint64{8, 8, 8, 8}, Displs: []uint64{0, 8, 16, 24},
		Epilogue: spec.Epilogue{Kind: spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale, Hidden: 4,
			Weight: 0x20000, Quant: 0x30000, Scales: 0x40000}}
}

// TestEpilogueOnAllGatherV: an AllGatherV takes an epilogue when its parts
// are whole rows that cover its output and its input lies apart; every
// other case is refused with an error that names the rule.
func TestEpilogueOnAllGatherV(t *testing.T) {
	ok := gatherRows()
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name   string
		change func(c *spec.Call)
		says   string
	}{
		{"part not whole rows", func(c *spec.Call) { c.Counts = []uint64{8, 6, 10, 8}; c.Displs = []uint64{0, 8, 14, 24} }, "part 1 (6 elements at 8) is not whole rows of 4"},
		{"part off a row", func(c *spec.Call) { c.Counts = []uint64{8, 8, 4, 8}; c.Displs = []uint64{0, 8, 18, 24} }, "part 2 (4 elements at 18)"},
		{"gap", func(c *spec.Call) { c.Displs = []uint64{0, 8, 16, 28} }, "leave gaps in its output"},
		{"in place", func(c *spec.Call) { c.Send = c.Recv + 32 }, "not in place"},
		{"quant overlaps send", func(c *spec.Call) { c.Epilogue.Quant = c.Send + 16 }, "epilogue quant"},
		{"row scales short of the output's rows", func(c *spec.Call) { c.Epilogue.Scales = c.Epilogue.Quant + 16 }, "overlaps"},
		{"other collective", func(c *spec.Call) {
			c.Coll, c.Count, c.Counts, c.Displs = spec.AllGather, 8, nil, nil
		}, "only AllReduce and AllGatherV"},
	} {
		c := gatherRows()
		tc.change(&c)
		err := c.Validate()
		require.ErrorIs(t, err, errs.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, tc.says, tc.name)
	}
}
