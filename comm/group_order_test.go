package comm

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// TestGroupSendDoesNotWaitForItsCollective: rank 0 posts an AllReduce and a
// Send in one group; rank 1 posts the matching Receive first, then its
// AllReduce, each alone. The group's Send runs beside its AllReduce (one
// merged Plan), as in NCCL, so both ranks finish. It timed out when the
// group's collectives ran before its point-to-point operations: rank 0's
// AllReduce waited for rank 1's, which waited behind rank 1's Receive,
// which waited for rank 0's Send.
func TestGroupSendDoesNotWaitForItsCollective(t *testing.T) {
	cfg := testConfig()
	cfg.Timeout = 3 * time.Second
	comms := startComms(t, 2, cfg)
	const size = 100000
	out, in := newBuffer(t, size), newBuffer(t, size)
	copy(out.bytes(), bytes.Repeat([]byte{7}, size))
	sums := [2]cBuffer{newBuffer(t, 64), newBuffer(t, 64)}
	for r := range 2 {
		copy(sums[r].bytes(), bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 16)) // float32 1.0
	}
	allReduce := func(r int) *spec.Call {
		return &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 16,
			Send: sums[r].addr(), Recv: sums[r].addr()}
	}
	onThread(func() {
		require.NoError(t, GroupStart())
		require.NoError(t, comms[0].Collective(allReduce(0), 0))
		require.NoError(t, comms[0].Collective(&spec.Call{Coll: spec.SendRecv, Count: size, Type: spec.Uint8, Peer: 1, IsSend: true, Send: out.addr()}, 0))
		require.NoError(t, GroupEnd())
	})
	require.NoError(t, comms[1].Collective(&spec.Call{Coll: spec.SendRecv, Count: size, Type: spec.Uint8, Peer: 0, Recv: in.addr()}, 0))
	require.NoError(t, comms[1].Collective(allReduce(1), 0))
	for r := range 2 {
		require.NoError(t, comms[r].Synchronize(), "rank %d", r)
		require.Equal(t, bytes.Repeat([]byte{0, 0, 0, 0x40}, 16), sums[r].bytes(), "rank %d's sum is 2.0", r)
	}
	require.Equal(t, bytes.Repeat([]byte{7}, size), in.bytes())
}

// failingMerges is a rank whose Launch of a merged Plan (more than one
// buffer pair) fails, as a datapath's can after issuing part of it; it
// counts the Launches.
type failingMerges struct {
	atom.Rank
	launches int
}

func (f *failingMerges) Launch(p *snac.Plan, bufs []atom.Buffers, stream uintptr) error {
	f.launches++
	if len(bufs) > 1 {
		return errs.New(errs.ErrCuda, "failingMerges: a merged launch failed part way")
	}
	return f.Rank.Launch(p, bufs, stream)
}

// A group whose merged launch failed returns that error and does not
// launch its calls again one by one: the failed Launch may have issued
// part of the Plan, and its calls would run twice. The communicator stays
// usable.
func TestGroupDoesNotRelaunchAFailedMerge(t *testing.T) {
	runtime.LockOSThread() // a group belongs to its thread
	defer runtime.UnlockOSThread()
	c := startComms(t, 1, testConfig())[0]
	dp := &failingMerges{Rank: c.dp}
	c.dp = dp
	t.Cleanup(func() { c.dp = dp.Rank })
	in, out := newBuffer(t, 1024), newBuffer(t, 1024)
	calls := map[string][]spec.Call{
		"two collectives": {
			{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32},
			{Coll: spec.AllReduce, Send: in.addr() + 256, Recv: out.addr() + 256, Count: 64, Type: spec.Float32},
		},
		"a collective and a send and receive": {
			{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32},
			{Coll: spec.SendRecv, Send: in.addr() + 256, Count: 64, Type: spec.Float32, Peer: 0, IsSend: true},
			{Coll: spec.SendRecv, Recv: out.addr() + 256, Count: 64, Type: spec.Float32, Peer: 0},
		},
	}
	for name, group := range calls {
		dp.launches = 0
		require.NoError(t, GroupStart())
		for i := range group {
			require.NoError(t, c.Collective(&group[i], 0), name)
		}
		err := GroupEnd()
		require.ErrorIs(t, err, errs.ErrCuda, name)
		require.Equal(t, 1, dp.launches, "%s: the merged Plan alone, not its calls again", name)
	}
	single := spec.Call{Coll: spec.AllReduce, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32}
	require.NoError(t, c.Collective(&single, 0))
}

// A call refused inside a group fails the group, as in NCCL: the outermost
// GroupEnd returns its error and launches none of the group's operations,
// on any communicator; the communicators stay usable.
func TestGroupFailsWithARefusedCall(t *testing.T) {
	runtime.LockOSThread() // a group belongs to its thread
	defer runtime.UnlockOSThread()
	comms := startComms(t, 1, testConfig())
	other := startComms(t, 1, testConfig())[0]
	c := comms[0]
	counts := map[*Comm]*failingMerges{}
	for _, x := range []*Comm{c, other} {
		dp := &failingMerges{Rank: x.dp}
		counts[x] = dp
		x.dp = dp
		t.Cleanup(func() { x.dp = dp.Rank })
	}
	in, out := newBuffer(t, 1024), newBuffer(t, 1024)
	good := func() *spec.Call {
		return &spec.Call{Coll: spec.Broadcast, Send: in.addr(), Recv: out.addr(), Count: 64, Type: spec.Float32}
	}
	bad := good()
	bad.Root = 1 // a communicator of one rank
	for name, calls := range map[string][]struct {
		c    *Comm
		call *spec.Call
	}{
		"a bad root after a good call": {{other, good()}, {c, good()}, {c, bad}},
		"a bad root first":             {{c, bad}, {c, good()}, {other, good()}},
	} {
		counts[c].launches, counts[other].launches = 0, 0
		require.NoError(t, GroupStart())
		require.NoError(t, GroupStart()) // nested: only the outermost end acts
		for _, x := range calls {
			err := x.c.Collective(x.call, 0)
			if x.call == bad {
				require.ErrorIs(t, err, errs.ErrInvalidArgument, name)
			} else {
				require.NoError(t, err, name)
			}
		}
		require.NoError(t, GroupEnd(), name)
		require.ErrorIs(t, GroupEnd(), errs.ErrInvalidArgument, name)
		require.Zero(t, counts[c].launches+counts[other].launches, "%s: nothing launched", name)
	}
	require.NoError(t, GroupStart())
	require.NoError(t, c.Collective(good(), 0))
	require.NoError(t, GroupEnd(), "the next group is a group of its own")
	require.Equal(t, 1, counts[c].launches)
	require.NoError(t, c.Synchronize())
}
