package comm

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
)

// launchless is a rank whose Launch does nothing: what is left of a call is
// comm's own host path.
type launchless struct{ atom.Rank }

func (launchless) Launch(*snac.Plan, []atom.Buffers, uintptr) error { return nil }

// The hot paths allocate nothing once warm, as a caller from C makes them:
// a collective outside a group, and a group of a send and a receive
// (GroupStart, both calls, GroupEnd's merged Plan). An allocation a call
// makes feeds the collector, whose pauses land on the caller.
func TestHotPathsAllocateNothing(t *testing.T) {
	runtime.LockOSThread() // a group belongs to its thread
	defer runtime.UnlockOSThread()
	c := startComms(t, 1, testConfig())[0]
	dp := c.dp
	c.dp = launchless{dp}
	t.Cleanup(func() { c.dp = dp })
	in, out := newBuffer(t, 1024), newBuffer(t, 1024)

	single := func() {
		call := spec.Call{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32}
		require.NoError(t, c.Collective(&call, 0))
	}
	grouped := func() {
		send := spec.Call{Coll: spec.SendRecv, Send: in.addr(), Count: 64, Type: spec.Float32, Peer: 0, IsSend: true}
		recv := spec.Call{Coll: spec.SendRecv, Recv: out.addr(), Count: 64, Type: spec.Float32, Peer: 0}
		require.NoError(t, GroupStart())
		require.NoError(t, c.Collective(&send, 0))
		require.NoError(t, c.Collective(&recv, 0))
		require.NoError(t, GroupEnd())
	}
	for name, f := range map[string]func(){"collective": single, "group of a send and a receive": grouped} {
		f() // warm: the Plans, the merged Plan, a pooled group
		allocs := testing.AllocsPerRun(100, f)
		if !raceEnabled {
			require.Zero(t, allocs, name)
		}
	}
}
