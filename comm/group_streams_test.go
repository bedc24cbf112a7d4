package comm

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// TestGroupJoinsItsStreams: as in NCCL, the operations of one group on
// several streams of a communicator act as one operation posted on every
// one of them. Rank 0 sends on one stream and receives on another in one
// group; rank 1 answers late. Waiting for the receive's stream alone must
// find the data there. (The merged Plan used to run on the send's stream
// only, so that wait returned before the data came.)
func TestGroupJoinsItsStreams(t *testing.T) {
	comms := startComms(t, 2, testConfig())
	s1, s2 := NewHostStream(), NewHostStream()
	t.Cleanup(func() {
		require.NoError(t, DestroyHostStream(s1))
		require.NoError(t, DestroyHostStream(s2))
	})
	const size = 5000
	out := [2]cBuffer{newBuffer(t, size), newBuffer(t, size)}
	in := [2]cBuffer{newBuffer(t, size), newBuffer(t, size)}
	for r := range 2 {
		copy(out[r].bytes(), bytes.Repeat([]byte{byte(r + 1)}, size))
		clear(in[r].bytes())
	}
	call := func(r int, send bool) *spec.Call {
		c := &spec.Call{Coll: spec.SendRecv, Count: size, Type: spec.Uint8, Peer: 1 - r, IsSend: send}
		if send {
			c.Send = out[r].addr()
		} else {
			c.Recv = in[r].addr()
		}
		return c
	}
	onThread(func() {
		require.NoError(t, GroupStart())
		require.NoError(t, comms[0].Collective(call(0, true), s1))
		require.NoError(t, comms[0].Collective(call(0, false), s2))
		require.NoError(t, GroupEnd())
	})
	go func() {
		time.Sleep(200 * time.Millisecond)
		comms[1].Collective(call(1, false), 0)
		comms[1].Collective(call(1, true), 0)
	}()
	require.NoError(t, SynchronizeHostStream(s2))
	require.Equal(t, bytes.Repeat([]byte{2}, size), in[0].bytes(), "the receive's stream waited for the group")
	require.NoError(t, SynchronizeHostStream(s1))
	require.NoError(t, comms[1].Synchronize())
	require.Equal(t, bytes.Repeat([]byte{1}, size), in[1].bytes())
}
