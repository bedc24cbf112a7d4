package cuda

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
)

// TestGPUPlanImagesReclaimed: a rank that launches a new Plan at every call,
// waiting for the calls before only every ten, holds about its budget of Plan
// images: idle ones are freed and their room holds the next, while images
// still queued or running on the stream, and the images of CUDA graphs (one
// first seen in the capture, one launched before it), stay. Every call
// copies its pieces whole, and the graphs replay whole after the churn.
func TestGPUPlanImagesReclaimed(t *testing.T) {
	g := newGPURanks(t, 1, int64(5*time.Second))[0]
	const workers, piece, rounds, fewest, budget, batch = 2, 16, 300, 1, 512 << 10, 10
	g.plans.mu.Lock()
	g.plans.budget = budget // images of 0.5-150 KB, 23 MB in all; a block reads its steps at once up to 32
	g.plans.mu.Unlock()
	input, send, recv := copyBuffers(t, g, 7, workers*(fewest+rounds+2)*piece, rounds+2)

	graphs, pinned := make([]uintptr, 2), make([]*devicePlan, 2)
	for i, warm := range []bool{false, true} {
		p := copyPlan(workers, fewest+rounds+i, piece) // steps no round's Plan has
		bufs := []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[rounds+i])}}
		if warm {
			require.NoError(t, g.Launch(p, bufs, uintptr(g.stream)))
		}
		graphs[i] = g.captureLaunch(t, p, bufs)
		pinned[i] = g.plans.lookup(p)
		require.NotNil(t, pinned[i])
		require.Equal(t, uint64(imagePinned), pinned[i].counts.status().Load(), "a graph's image (warm %v)", warm)
	}
	g.sync(t)

	chunks := len(g.plans.chunks)
	for round := range rounds {
		p := copyPlan(workers, fewest+round, piece)
		require.NoError(t, g.Launch(p, []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[round])}}, uintptr(g.stream)))
		if round%batch == batch-1 {
			g.sync(t) // at most a batch of launches in flight, whatever the GPU's pace (a sanitizer's)
		}
	}
	g.sync(t)
	require.NoError(t, g.AsyncError())
	for round := range rounds {
		checkCopied(t, g, input, recv[round], workers, fewest+round, piece, "round %d", round)
	}
	g.plans.mu.Lock()
	held, grown := placed(&g.plans), len(g.plans.chunks)-chunks
	g.plans.mu.Unlock()
	t.Logf("%d Plans launched, %d bytes of images held, %d chunks more", rounds, held, grown)
	// Images still queued when an upload looks stay (a batch of 175 KB at
	// most), and the room freed may be too fragmented for the next.
	require.LessOrEqual(t, held, uintptr(budget+batch*180<<10), "images held")
	require.LessOrEqual(t, grown, 2, "new images in freed room")

	// A twin of a graph's Plan (built again: another pointer) finds its
	// copy by content, checked against the device's bytes.
	twin := copyPlan(workers, fewest+rounds, piece)
	require.NoError(t, g.Launch(twin, []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[rounds])}}, uintptr(g.stream)))
	require.Same(t, pinned[0], g.plans.lookup(twin), "the graph's copy")
	g.sync(t)

	for i := range graphs {
		g.upload(t, recv[rounds+i], make([]byte, len(input))) // what the graph writes, cleared
		require.NoError(t, inContext(g.ctx, func() error {
			defer driver.GraphExecDestroy(graphs[i])
			return cuErr(driver.GraphLaunch(graphs[i], g.stream), "cuGraphLaunch")
		}))
		g.sync(t)
		checkCopied(t, g, input, recv[rounds+i], workers, fewest+rounds+i, piece, "graph %d after the churn", i)
	}
}
