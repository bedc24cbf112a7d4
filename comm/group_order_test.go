package comm

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
