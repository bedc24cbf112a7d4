package cuda

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
)

// TestGPUStepCosts logs what the kernel's pieces cost in a CUDA graph, the
// ceilings every small-message figure is judged by (it asserts only that the
// Plans ran and copied right): a launch of one block doing one 16-byte copy,
// each further step, a run of 32 waits against 32 single waits, a block
// more, and a flag round trip between two GPUs. Synthetic Plans, 100 launches
// a graph.
func TestGPUStepCosts(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(5*time.Second))
	const perGraph, reps, bytesPerCopy = 100, 20, 16
	send := [2]devicePtr{ranks[0].alloc(t, 4096), ranks[1].alloc(t, 4096)}
	recv := [2]devicePtr{ranks[0].alloc(t, 4096), ranks[1].alloc(t, 4096)}
	input := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, 456)[:4096]
	for r, g := range ranks {
		g.upload(t, send[r], input)
	}
	copyStep := func(k int) snac.Step {
		off := uint64(k * bytesPerCopy)
		return snac.Step{Verb: snac.Copy, Bytes: bytesPerCopy, Dst: snac.Ref{Space: snac.SpaceRecv, Off: off},
			Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: off}}}
	}
	const check = 0x5eed
	notify := func(peer, slot int) snac.Step {
		return snac.Step{Verb: snac.Notify, Peer: uint8(peer), Slot: uint32(slot), Delta: 1, Check: check}
	}
	wait := func(slot int) snac.Step {
		return snac.Step{Verb: snac.Wait, Slot: uint32(slot), Delta: 1, Check: check}
	}
	ready := func(src, k int) int { return int(snac.FlagSlot(snac.Collective, snac.FlagReady, src, k)) }
	copies := func(n int) []snac.Step {
		s := make([]snac.Step, n)
		for k := range s {
			s[k] = copyStep(k)
		}
		return s
	}
	// measure runs plan(r) on each rank r (both ranks every time, so that
	// their epochs stay in step) and checks that each rank's first `copied`
	// bytes of output are its input.
	measure := func(name string, copied int, plan func(r int) *snac.Plan) time.Duration {
		plans := [2]*snac.Plan{plan(0), plan(1)}
		for r, g := range ranks { // uploads the Plans outside capture; the ranks' kernels wait for each other
			require.NoError(t, g.Launch(plans[r], []atom.Buffers{{Send: uintptr(send[r]), Recv: uintptr(recv[r])}}, uintptr(g.stream)), name)
		}
		for r, g := range ranks {
			g.sync(t)
			require.NoError(t, g.AsyncError(), "%s: rank %d", name, r)
		}
		per := perLaunchInGraph(t, ranks, func(r int, g *gpuRank) {
			g.Launch(plans[r], []atom.Buffers{{Send: uintptr(send[r]), Recv: uintptr(recv[r])}}, uintptr(g.stream))
		}, perGraph, reps)
		for r, g := range ranks {
			require.Equal(t, input[:copied], g.download(t, recv[r], copied), "%s: rank %d's output", name, r)
		}
		t.Logf("COST %-44s %v per launch", name, per)
		return per
	}
	// alone is one worker running steps(r) on rank r.
	alone := func(steps func(r int) []snac.Step) func(int) *snac.Plan {
		return func(r int) *snac.Plan { return workersPlan(2, steps(r)) }
	}
	copiesOnly := func(n int) func(int) *snac.Plan { return alone(func(int) []snac.Step { return copies(n) }) }

	one := measure("1 block, 1 copy of 16 B", bytesPerCopy, copiesOnly(1))
	more := measure("1 block, 33 copies of 16 B", 33*bytesPerCopy, copiesOnly(33))
	t.Logf("COST %-44s %v", "a step (the 32 copies more, each)", (more-one)/32)

	// Each rank notifies itself, then waits: as one run, or 32 single waits.
	selfSignals := func(runs bool) func(int) *snac.Plan {
		return alone(func(r int) []snac.Step {
			steps := copies(1)
			for k := range 32 {
				if runs || k == 0 {
					steps = append(steps, notify(r, ready(r, k)))
				}
			}
			for k := range 32 {
				if runs {
					steps = append(steps, wait(ready(r, k)))
				} else {
					steps = append(steps, wait(ready(r, 0)))
				}
			}
			return steps
		})
	}
	runs := measure("1 block, 32 self-notifies, 32 waits (runs)", bytesPerCopy, selfSignals(true))
	singles := measure("1 block, 1 self-notify, 32 waits on it (one by one)", bytesPerCopy, selfSignals(false))
	t.Logf("COST %-44s %v, %v one by one (each)", "32 waits after their notifies, as runs", (runs-one)/32, (singles-one)/32)

	wide := measure("32 blocks, 1 copy of 16 B each", 32*bytesPerCopy, func(int) *snac.Plan {
		blocks := make([][]snac.Step, 32)
		for w := range blocks {
			blocks[w] = []snac.Step{copyStep(w)}
		}
		return workersPlan(2, blocks...)
	})
	t.Logf("COST %-44s %v", "a block (the 31 more, each)", (wide-one)/31)

	// Rank 0 pings and waits for the pong; rank 1 waits for the ping and pongs.
	const trips = 16
	pair := measure("2 GPUs, 16 flag round trips", bytesPerCopy, alone(func(r int) []snac.Step {
		steps := copies(1)
		for k := range trips {
			if r == 0 {
				steps = append(steps, notify(1, ready(0, k)), wait(ready(1, k)))
			} else {
				steps = append(steps, wait(ready(0, k)), notify(0, ready(1, k)))
			}
		}
		return steps
	}))
	t.Logf("COST %-44s %v", "a flag round trip between the GPUs", (pair-one)/trips)
}
