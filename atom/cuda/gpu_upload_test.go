package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
)

// TestGPUFreshPlanRunsAsUploaded: the kernel of a Plan seen for the first
// time, launched at once on a non-blocking stream, runs the whole Plan as
// uploaded, its worker table (the image's tail, the last bytes to land)
// included. Each round builds a new Plan of about 1.2 MB (as large as a
// 1 GiB AllReduce's at 2 ranks) whose workers each copy their own pieces of
// the input; a worker table or steps read before they landed leave pieces
// uncopied (or fail the kernel).
func TestGPUFreshPlanRunsAsUploaded(t *testing.T) {
	g := newGPURanks(t, 1, int64(5*time.Second))[0]
	const workers, piece, rounds, fewest = 32, 16, 20, 150
	// Inputs and outputs are set up and awaited first: only the Plans race.
	input, send, recv := copyBuffers(t, g, 5, workers*(fewest+rounds)*piece, rounds)
	require.NoError(t, inContext(g.ctx, func() error { return cuErr(driver.CtxSynchronize(), "cuCtxSynchronize") }))
	for round := range rounds {
		steps := fewest + round // every round's worker table differs from the last one's
		require.NoError(t, g.Launch(copyPlan(workers, steps, piece), []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[round])}}, uintptr(g.stream)))
		g.sync(t)
		require.NoError(t, g.AsyncError(), "round %d", round)
		checkCopied(t, g, input, recv[round], workers, steps, piece, "round %d", round)
	}
}

// copyBuffers uploads size random non-zero bytes (from seed) as the input
// of copyPlan's Plans, and allocates outputs of as many bytes for rounds of them.
func copyBuffers(t *testing.T, g *gpuRank, seed uint64, size, rounds int) (input []byte, send devicePtr, recv []devicePtr) {
	input = make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range input {
		input[i] = byte(1 + rng.IntN(255))
	}
	send, recv = g.alloc(t, size), make([]devicePtr, rounds)
	for round := range recv {
		recv[round] = g.alloc(t, size)
	}
	g.upload(t, send, input)
	return input, send, recv
}

// copyPlan is a one-rank Plan of workers x steps Copy steps, each of piece
// bytes: worker w's step j copies input piece w*steps+j to the output.
func copyPlan(workers, steps, piece int) *snac.Plan {
	lists := make([][]snac.Step, workers)
	for w := range lists {
		for j := range steps {
			off := uint64((w*steps + j) * piece)
			lists[w] = append(lists[w], snac.Step{Verb: snac.Copy, Bytes: uint64(piece),
				Dst: snac.Ref{Space: snac.SpaceRecv, Off: off}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: off}}})
		}
	}
	return workersPlan(1, lists...)
}

// checkCopied fails t unless out holds the first workers*steps*piece bytes
// of input, naming the first worker and step that did not copy its piece.
func checkCopied(t *testing.T, g *gpuRank, input []byte, out devicePtr, workers, steps, piece int, msg string, args ...any) {
	t.Helper()
	size := workers * steps * piece
	got := g.download(t, out, size)
	if bytes.Equal(input[:size], got) {
		return
	}
	i := 0
	for input[i] == got[i] {
		i++
	}
	t.Fatalf("%s: output byte %d (worker %d's step %d) is %#x, want %#x: the kernel did not run the Plan as uploaded",
		fmt.Sprintf(msg, args...), i, i/piece/steps, i/piece%steps, got[i], input[i])
}

// TestGPUPlansFirstSeenDuringCapture: a CUDA graph may hold calls whose
// shapes were never run before, as many as the program likes (PyTorch
// captures in global mode, vLLM a graph per batch size). Each of 12 new Plans
// of about 1.2 MB is uploaded while the stream is being captured; the graph
// then replays all of them, twice. A fixed host-mapped arena for such Plans
// (1 MiB a rank) refused the first one ("run the call once before
// capturing"), and a random program of the GPU suite's differential test
// filled the 2 MiB of a 2-rank communicator with new shapes over 285
// programs. Each Plan's twin is launched after it in the capture: reading the
// copy back to compare invalidated the capture where the thread was not yet
// in relaxed mode (difftest found it with the call cache on).
func TestGPUPlansFirstSeenDuringCapture(t *testing.T) {
	g := newGPURanks(t, 1, int64(5*time.Second))[0]
	const workers, piece, rounds, fewest = 32, 16, 12, 150
	input, send, recv := copyBuffers(t, g, 7, workers*(fewest+rounds)*piece, rounds)
	var exec uintptr
	require.NoError(t, inContext(g.ctx, func() error {
		if err := cuErr(driver.StreamBeginCapture(g.stream, streamCaptureModeGlobal), "cuStreamBeginCapture"); err != nil {
			return err
		}
		var launchErr error
		for round := range rounds {
			// The Plan, then its twin (built again: equal bytes, another
			// Plan), which finds the copy already there by reading it back.
			for _, plan := range []*snac.Plan{copyPlan(workers, fewest+round, piece), copyPlan(workers, fewest+round, piece)} {
				if launchErr = g.Launch(plan, []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[round])}}, uintptr(g.stream)); launchErr != nil {
					launchErr = fmt.Errorf("round %d: %w", round, launchErr)
					break
				}
			}
			if launchErr != nil {
				break
			}
		}
		var graph uintptr
		endErr := cuErr(driver.StreamEndCapture(g.stream, &graph), "cuStreamEndCapture")
		if launchErr != nil || endErr != nil {
			if graph != 0 {
				driver.GraphDestroy(graph)
			}
			return errors.Join(launchErr, endErr)
		}
		defer driver.GraphDestroy(graph)
		return cuErr(driver.GraphInstantiate(&exec, graph, 0), "cuGraphInstantiate")
	}))
	defer inContext(g.ctx, func() error { return cuErr(driver.GraphExecDestroy(exec), "cuGraphExecDestroy") })
	for replay := range 2 {
		require.NoError(t, inContext(g.ctx, func() error { return cuErr(driver.GraphLaunch(exec, g.stream), "cuGraphLaunch") }))
		g.sync(t)
		require.NoError(t, g.AsyncError(), "replay %d", replay)
		for round := range rounds {
			checkCopied(t, g, input, recv[round], workers, fewest+round, piece, "replay %d, Plan %d", replay, round)
		}
	}
}
