package cuda

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// A gone rank fails only the kernel waits that what it wrote does not
// satisfy: a Broadcast whose root finished before it went completes on the
// other rank, whose kernel may still run when the news comes (packets and
// staged), own workers' waits included; an AllReduce it never joined fails
// promptly with its cause. (Every rank takes part in a rooted collective's
// agreement on the call, so rank 0 launches before rank 1 goes.)
func TestGPUPeerGone(t *testing.T) {
	cause := errs.New(errs.ErrRemote, "rank 1's process exited (test)")
	rng := rand.New(rand.NewPCG(11, 12))
	for _, count := range []uint64{16, 1 << 16} {
		ranks := newGPURanks(t, 2, int64(60*time.Second))
		c := newCall(t, ranks, spec.Broadcast, spec.Float32, spec.Op{}, count, rng)
		for r, g := range ranks { // from root 1
			c.calls[r].Root = 1
			plan, err := snac.Build(c.calls[r], g.topo)
			require.NoError(t, err)
			c.plans[r] = plan
		}
		launchOne(t, ranks[0], c, 0)
		launchOne(t, ranks[1], c, 1)
		ranks[1].sync(t)
		require.NoError(t, ranks[1].AsyncError())
		ranks[0].PeerGone(1, cause)
		ranks[0].sync(t)
		require.NoError(t, ranks[0].AsyncError(), "count %d", count)
		require.True(t, bytes.Equal(c.inputs[1], ranks[0].download(t, c.recv[0], c.out[0])), "count %d: the root's data", count)
	}

	ranks := newGPURanks(t, 2, int64(60*time.Second))
	c := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, 1<<16, rng)
	start := time.Now()
	launchOne(t, ranks[0], c, 0)
	time.AfterFunc(100*time.Millisecond, func() { ranks[0].PeerGone(1, cause) })
	ranks[0].sync(t)
	err := ranks[0].AsyncError()
	require.True(t, errors.Is(err, cause), "got %v", err)
	require.Equal(t, errs.RemoteError, errs.CodeOf(err))
	require.Less(t, time.Since(start), 10*time.Second)
}

// A rank broken by a failed wait runs nothing of its later launches: with
// its epoch not advanced, they would raise a peer's flags of the failed
// call with another call's check words, and the peer, still in that call,
// would report a mismatch (ErrInvalidUsage) instead of its own outcome.
func TestGPUBrokenRankRunsNothing(t *testing.T) {
	cause := errs.New(errs.ErrRemote, "rank 1's process exited (test)")
	rng := rand.New(rand.NewPCG(13, 14))
	ranks := newGPURanks(t, 2, int64(time.Second))
	a := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, 1<<16, rng)
	b := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, 1<<16+64, rng)
	ranks[0].PeerGone(1, cause) // rank 1 is alive: rank 0 only believes it gone
	launchOne(t, ranks[0], a, 0)
	ranks[0].sync(t)
	require.True(t, errors.Is(ranks[0].AsyncError(), cause), "got %v", ranks[0].AsyncError())
	launchOne(t, ranks[0], b, 0)
	ranks[0].sync(t)
	launchOne(t, ranks[1], a, 1)
	ranks[1].sync(t)
	err := ranks[1].AsyncError()
	require.True(t, errors.Is(err, errs.ErrTimeout), "rank 1 waits for rank 0's part it never gets; got %v", err)
}

// launchOne launches c's plan of rank r on its stream.
func launchOne(t *testing.T, g *gpuRank, c *call, r int) {
	t.Helper()
	require.NoError(t, g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(g.stream)))
}
