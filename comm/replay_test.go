package comm

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
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
			n, issue := c.Replay([]spec.Call{call}, 0, unsafe.Pointer(&rec), len(rec))
			require.Equal(t, tc.want, n > 0 && issue != 0, "n %d issue %#x", n, issue)
			require.NoError(t, c.Synchronize())
		})
	}
	require.NoError(t, c.Finalize())
	call := plain
	n, _ := c.Replay([]spec.Call{call}, 0, unsafe.Pointer(&[64]byte{}), 64)
	require.Zero(t, n, "a finalized communicator recorded a call")
}

// Replay records a group's sends and receives on one communicator, or its
// collectives of one type and op, as the one launch the group makes of
// them, and nothing for other mixes (a group orders those otherwise) or for
// more calls than a launch has buffers.
func TestReplayRecordsGroupedCalls(t *testing.T) {
	c := startComms(t, 1, testConfig())[0]
	in, out := newBuffer(t, 4096), newBuffer(t, 4096)
	send := spec.Call{Coll: spec.SendRecv, Send: in.addr(), Count: 64, Type: spec.Float32, Peer: 0, IsSend: true}
	recv := spec.Call{Coll: spec.SendRecv, Recv: out.addr(), Count: 64, Type: spec.Float32, Peer: 0}
	reduce := spec.Call{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32}
	other := reduce
	other.Type = spec.Int32
	for _, call := range []*spec.Call{&send, &recv, &reduce, &other} {
		require.NoError(t, c.Prepare(call))
	}
	many := make([]spec.Call, atom.MaxBuffers+1)
	for i := range many {
		many[i] = send
	}
	cases := []struct {
		name  string
		calls []spec.Call
		want  bool
	}{
		{"a send and a receive", []spec.Call{send, recv}, true},
		{"a receive and a send", []spec.Call{recv, send}, true},
		{"a launch's buffers of sends", many[:atom.MaxBuffers], true},
		{"more", many, false},
		{"with a collective", []spec.Call{send, reduce}, false},
		{"collectives of one type and op", []spec.Call{reduce, reduce}, true},
		{"of two types", []spec.Call{reduce, other}, false},
		{"none", nil, false},
	}
	for _, tc := range cases {
		var rec [64]byte
		n, issue := c.Replay(tc.calls, 0, unsafe.Pointer(&rec), len(rec))
		require.Equal(t, tc.want, n > 0 && issue != 0, "%s: n %d issue %#x", tc.name, n, issue)
	}
}
