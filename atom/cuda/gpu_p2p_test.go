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
	"purlin/snac/snactest"
	"purlin/spec/spectest"
)

// TestGPUP2PGroupings runs spectest's mixed groupings on the kernel (one
// rank's sends merged into one Plan against its peer's receives launched
// one by one, and the like) at sizes from packets to a ring of chunks: the
// Advance steps of a merged Plan must give every transfer the epoch,
// staging half and check words it has when launched alone. Where the
// machine has fewer GPUs than a case has ranks, ranks share them in turn
// (every call here is eager, so their kernels may wait for each other).
func TestGPUP2PGroupings(t *testing.T) {
	needGPUs(t, 1)
	half := gpuTopology(2, 0).P2PHalf
	for _, tc := range spectest.GroupingCases() {
		t.Run(tc.Name, func(t *testing.T) {
			ranks := newGPURanksOnDevices(t, tc.Program.NRanks, int64(20*time.Second), gpuTopology, inTurn())
			rng := rand.New(rand.NewPCG(uint64(tc.Program.NRanks), 11))
			if tc.Fixed {
				runGPUProgram(t, ranks, &tc.Program, rng)
				return
			}
			for _, size := range []uint64{100, 40 << 10, half / 2, 3 * half} {
				if tc.Unblocked && size > half/2 {
					continue
				}
				p := tc.Program.Resized(size)
				runGPUProgram(t, ranks, &p, rng)
			}
		})
	}
}

// transfer is one point-to-point event's payload and device buffers.
type transfer struct {
	payload    []byte
	send, recv devicePtr
}

// runGPUProgram launches prog's calls on every rank's stream as comm
// launches its groups (spectest.Program.Launches), then checks every byte
// received and every collective's output.
func runGPUProgram(t *testing.T, ranks []*gpuRank, prog *spectest.Program, rng *rand.Rand) {
	n := len(ranks)
	const guard = 16
	transfers := make([]transfer, len(prog.Events))
	collRecv := make([][]devicePtr, len(prog.Events))
	collWant := make([][]spectest.Output, len(prog.Events))
	for k, e := range prog.Events {
		if e.Calls != nil {
			inputs := spectest.Inputs(rng, e.Calls)
			collWant[k] = spectest.Expected(e.Calls, inputs)
			for r, c := range e.Calls {
				in, out := c.Extents()
				send := ranks[r].alloc(t, int(in))
				ranks[r].upload(t, send, inputs[r])
				collRecv[k] = append(collRecv[k], ranks[r].alloc(t, int(out)))
				c.Send, c.Recv = uintptr(send), uintptr(collRecv[k][r])
			}
			continue
		}
		tr := &transfers[k]
		tr.payload = make([]byte, e.Bytes())
		for i := range tr.payload {
			tr.payload[i] = byte(rng.Uint32())
		}
		tr.send = ranks[e.From].alloc(t, len(tr.payload))
		ranks[e.From].upload(t, tr.send, tr.payload)
		tr.recv = ranks[e.To].alloc(t, len(tr.payload)+guard) // filled with 0xA5
	}
	// One thread issues every rank's calls, as purlin-perf and a
	// single-threaded caller of NCCL do: the ranks' calls interleave, since
	// a stream accepts only so many operations before its next launch
	// blocks the thread (a copy-engine call is a few per chunk), which
	// would then never issue the peer's call that its rank waits for.
	units := make([][][]spectest.Op, n)
	most := 0
	for r := range ranks {
		var err error
		units[r], err = prog.Launches(r)
		require.NoError(t, err)
		units[r], err = snactest.SplitLaunches(prog, units[r], MaxBuffers) // as comm launches a larger group
		require.NoError(t, err)
		most = max(most, len(units[r]))
	}
	for i := range most {
		for r, g := range ranks {
			if i < len(units[r]) {
				launchUnit(t, g, r, prog, units[r][i], transfers)
			}
		}
	}
	var failed []error
	for r, g := range ranks {
		g.sync(t)
		if err := g.AsyncError(); err != nil {
			failed = append(failed, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	require.NoError(t, errors.Join(failed...), "%s", prog)
	for k, e := range prog.Events {
		if e.Calls != nil {
			for r, c := range e.Calls {
				_, out := c.Extents()
				require.NoError(t, spectest.Compare(c.Type, ranks[r].download(t, collRecv[k][r], int(out)), collWant[k][r]), "event %d rank %d of %s", k, r, prog)
			}
			continue
		}
		tr := transfers[k]
		got := ranks[e.To].download(t, tr.recv, len(tr.payload)+guard)
		want := append(bytes.Clone(tr.payload), bytes.Repeat([]byte{0xA5}, guard)...)
		require.True(t, bytes.Equal(want, got), "transfer %d (%d bytes) of %s", k, len(tr.payload), prog)
	}
}

// launchUnit launches one of rank r's launch units of prog (a collective,
// or its grouped transfers merged into one Plan).
func launchUnit(t *testing.T, g *gpuRank, r int, prog *spectest.Program, unit []spectest.Op, transfers []transfer) {
	n := prog.NRanks
	if e := prog.Events[unit[0].Event]; e.Calls != nil {
		c := e.Calls[r]
		plan, err := snac.Build(c, g.topo)
		require.NoError(t, err, "%s", c)
		require.NoError(t, g.Launch(plan, []atom.Buffers{{Send: c.Send, Recv: c.Recv}}, uintptr(g.stream)), "%s", c)
		return
	}
	var plans []*snac.Plan
	var bufs []atom.Buffers
	for _, op := range unit {
		e := prog.Events[op.Event]
		c := e.Call(r, n, op.Send)
		plan, err := snac.Build(&c, g.topo)
		require.NoError(t, err, "%s", &c)
		plans = append(plans, plan)
		if op.Send {
			bufs = append(bufs, atom.Buffers{Send: uintptr(transfers[op.Event].send)})
		} else {
			bufs = append(bufs, atom.Buffers{Recv: uintptr(transfers[op.Event].recv)})
		}
	}
	merged, err := snac.Merge(plans...)
	require.NoError(t, err)
	require.NoError(t, g.Launch(merged, bufs, uintptr(g.stream)), "rank %d of %s", r, prog)
}
