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
// other rank, launched after the news (packets and staged), own workers'
// waits included; an AllReduce it never joined fails promptly with its cause.
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
		launchOne(t, ranks[1], c, 1)
		ranks[1].sync(t)
		require.NoError(t, ranks[1].AsyncError())
		ranks[0].PeerGone(1, cause)
		launchOne(t, ranks[0], c, 0)
		ranks[0].sync(t)
		require.NoError(t, ranks[0].AsyncError(), "count %d", count)
		require.True(t, bytes.Equal(c.inputs[1], ranks[0].download(t, c.recv[0], c.out)), "count %d: the root's data", count)
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

// launchOne launches c's plan of rank r on its stream.
func launchOne(t *testing.T, g *gpuRank, c *call, r int) {
	t.Helper()
	require.NoError(t, g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(g.stream)))
}
