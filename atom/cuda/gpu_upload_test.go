package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
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
	most := workers * (fewest + rounds) * piece
	input := make([]byte, most)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range input {
		input[i] = byte(1 + rng.IntN(255))
	}
	// Inputs and outputs are set up and awaited first: only the Plans race.
	send, recv := g.alloc(t, most), make([]devicePtr, rounds)
	for round := range recv {
		recv[round] = g.alloc(t, most)
	}
	g.upload(t, send, input)
	require.NoError(t, inContext(g.ctx, func() error { return cuErr(driver.CtxSynchronize(), "cuCtxSynchronize") }))
	for round := range rounds {
		steps := fewest + round // every round's worker table differs from the last one's
		size := workers * steps * piece
		plan := &snac.Plan{Type: spec.Uint8, Op: spec.Op{Kind: spec.Sum}, NRanks: 1, Regime: snac.RegimeStaged}
		for w := range workers {
			plan.Workers = append(plan.Workers, snac.Worker{Channel: snac.Collective, Index: uint16(w), First: uint32(len(plan.Steps)), Count: uint32(steps)})
			for j := range steps {
				off := uint64((w*steps + j) * piece)
				plan.Steps = append(plan.Steps, snac.Step{Verb: snac.Copy, Bytes: piece,
					Dst: snac.Ref{Space: snac.SpaceRecv, Off: off}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: off}}})
			}
		}
		require.NoError(t, g.Launch(plan, []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv[round])}}, uintptr(g.stream)))
		g.sync(t)
		require.NoError(t, g.AsyncError(), "round %d", round)
		got := g.download(t, recv[round], size)
		if !bytes.Equal(input[:size], got) {
			i := 0
			for input[i] == got[i] {
				i++
			}
			t.Fatalf("round %d: output byte %d (worker %d's step %d) is %#x, want %#x: the kernel ran before its Plan had landed",
				round, i, i/piece/steps, i/piece%steps, got[i], input[i])
		}
	}
}
