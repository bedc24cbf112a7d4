package comm

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// Replay records a call just launched outside a group, and nothing for the
// calls whose Plan or buffers its record could not carry.
func TestReplayRecordsPlainCalls(t *testing.T) {
	c := startComms(t, 1, testConfig())[0]
	in, out := newBuffer(t, 4096), newBuffer(t, 4096)
	scalar := float32(2)
	user, err := c.RedOpCreatePreMulSum(unsafe.Pointer(&scalar), spec.Float32, 0)
	require.NoError(t, err)
	plain := spec.Call{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32}
	cases := []struct {
		name   string
		change func(*spec.Call)
		want   bool
	}{
		{"plain", func(*spec.Call) {}, true},
		{"in place", func(c *spec.Call) { c.Recv = c.Send }, true},
		{"broadcast", func(c *spec.Call) { c.Coll = spec.Broadcast }, true},
		{"user op", func(c *spec.Call) { c.Op.Kind = spec.OpKind(user) }, false},
		{"epilogue", func(c *spec.Call) {
			c.Type = spec.Bfloat16
			c.Epilogue = spec.Epilogue{Kind: spec.EpilogueResidualAdd, Hidden: 16, Residual: out.addr() + 2048}
		}, false},
		{"vectored", func(c *spec.Call) {
			c.Coll, c.Count, c.Counts, c.Displs = spec.AllGatherV, 0, []uint64{64}, []uint64{0}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := plain
			tc.change(&call)
			require.NoError(t, c.Collective(&call, 0))
			var rec [64]byte
			n, issue := c.Replay(&call, 0, unsafe.Pointer(&rec), len(rec))
			require.Equal(t, tc.want, n > 0 && issue != 0, "n %d issue %#x", n, issue)
			require.NoError(t, c.Synchronize())
		})
	}
	require.NoError(t, c.Finalize())
	call := plain
	n, _ := c.Replay(&call, 0, unsafe.Pointer(&[64]byte{}), 64)
	require.Zero(t, n, "a finalized communicator recorded a call")
}
