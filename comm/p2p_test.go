package comm

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
	"purlin/spec/spectest"
)

// guardBytes follow every receive buffer, to see a transfer write past it.
const guardBytes = 16

// runProgram has every rank post its calls of prog from its own OS thread
// (groups are per thread), in its groups (a group of one call is a plain
// call), then checks every byte received and every collective's output.
func runProgram(t *testing.T, comms []*Comm, prog *spectest.Program, rng *rand.Rand) {
	t.Helper()
	n := len(comms)
	type transfer struct {
		payload    []byte
		send, recv cBuffer // recv has guardBytes more
	}
	type collective struct {
		calls  []spec.Call
		inputs [][]byte
		recv   []cBuffer
	}
	transfers := make([]transfer, len(prog.Events))
	colls := make([]collective, len(prog.Events))
	calls := make([][]spec.Call, n) // per rank, in program order
	for k, e := range prog.Events {
		if e.Calls == nil {
			tr := &transfers[k]
			tr.payload = make([]byte, e.Bytes())
			for i := range tr.payload {
				tr.payload[i] = byte(rng.Uint32())
			}
			tr.send, tr.recv = newBuffer(t, len(tr.payload)), newBuffer(t, len(tr.payload)+guardBytes)
			copy(tr.send.bytes(), tr.payload)
			for i := range tr.recv.bytes() {
				tr.recv.bytes()[i] = 0xa5
			}
			continue
		}
		c := &colls[k]
		c.inputs = spectest.Inputs(rng, e.Calls)
		for r, call := range e.Calls {
			send := newBuffer(t, len(c.inputs[r]))
			copy(send.bytes(), c.inputs[r])
			_, out := call.Extents()
			c.recv = append(c.recv, newBuffer(t, int(out)))
			cp := *call
			cp.Send, cp.Recv = send.addr(), c.recv[r].addr()
			c.calls = append(c.calls, cp)
		}
	}
	for r := range n {
		for _, op := range prog.Ops(r) {
			e := prog.Events[op.Event]
			if e.Calls != nil {
				calls[r] = append(calls[r], colls[op.Event].calls[r])
				continue
			}
			c := e.Call(r, n, op.Send)
			tr := transfers[op.Event]
			if op.Send {
				c.Send = tr.send.addr()
			} else {
				c.Recv = tr.recv.addr()
			}
			calls[r] = append(calls[r], c)
		}
	}
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		groups, err := prog.RankGroups(r)
		require.NoError(t, err)
		wg.Go(func() {
			onThread(func() { errList[r] = postGroups(comms[r], groups, calls[r]) })
		})
	}
	wg.Wait()
	for r, err := range errList {
		require.NoError(t, err, "rank %d posting %s", r, prog)
	}
	for r, c := range comms {
		require.NoError(t, c.Synchronize(), "rank %d of %s", r, prog)
	}
	for k, e := range prog.Events {
		if e.Calls != nil {
			c := colls[k]
			want := spectest.Expected(e.Calls, c.inputs)
			for r := range n {
				_, out := c.calls[r].Extents()
				require.NoError(t, spectest.Compare(c.calls[r].Type, c.recv[r].bytes()[:out], want[r]), "event %d rank %d of %s", k, r, prog)
			}
			continue
		}
		tr := transfers[k]
		got := tr.recv.bytes()
		require.Equal(t, tr.payload, got[:len(tr.payload)], "transfer %d of %s", k, prog)
		for i, b := range got[len(tr.payload) : len(tr.payload)+guardBytes] {
			require.Equal(t, byte(0xa5), b, "transfer %d wrote guard byte %d of %s", k, i, prog)
		}
	}
}

// postGroups posts one rank's calls (in order) in its groups.
func postGroups(c *Comm, groups [][]spectest.Op, calls []spec.Call) error {
	for _, g := range groups {
		grouped := len(g) > 1
		if grouped {
			if err := GroupStart(); err != nil {
				return err
			}
		}
		for range g {
			call := calls[0]
			calls = calls[1:]
			if err := c.Collective(&call, 0); err != nil {
				if grouped {
					_ = GroupEnd()
				}
				return err
			}
		}
		if grouped {
			if err := GroupEnd(); err != nil {
				return err
			}
		}
	}
	return nil
}

// NCCL matches the k-th send from one rank to another with the k-th receive
// there, whatever the grouping on either side (pipeline engines, torch's
// batch_isend_irecv against plain irecv): every mixed grouping, at sizes
// from packets to a ring of chunks, several rounds on the same
// communicators.
func TestP2PMatchesAcrossGroupings(t *testing.T) {
	sizes := []uint64{40, 3000, 14000, 100000}
	for _, tc := range spectest.GroupingCases() {
		t.Run(tc.Name, func(t *testing.T) {
			comms := startComms(t, tc.Program.NRanks, testConfig())
			rng := rand.New(rand.NewPCG(uint64(tc.Program.NRanks), 6))
			switch {
			case tc.Fixed:
				runProgram(t, comms, &tc.Program, rng)
			default:
				for _, size := range sizes {
					if tc.Unblocked && size > testConfig().P2PHalf/2 {
						continue
					}
					p := tc.Program.Resized(size)
					runProgram(t, comms, &p, rng)
				}
			}
		})
	}
}

// Random programs (transfers, to self among them, and collectives), each
// rank cutting its calls into groups at random, at 2, 4 and 8 ranks;
// every byte received is checked.
func TestP2PRandomGroupings(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			comms := startComms(t, n, testConfig())
			rng := rand.New(rand.NewPCG(uint64(n), 9))
			bytes := func() uint64 {
				if rng.IntN(8) == 0 {
					return 0
				}
				return rng.Uint64N([]uint64{1 << 10, 16 << 10, 64 << 10}[rng.IntN(3)])
			}
			coll := randomCollective(rng, n, 2000)
			for range 6 {
				prog := spectest.RandomProgram(rng, n, 2+rng.IntN(3*n), 12, bytes, coll)
				runProgram(t, comms, &prog, rng)
			}
		})
	}
}

// randomCollective gives, at each call, every rank's call of one random
// collective of fewer than most elements (a program's collective for
// spectest.RandomProgram).
func randomCollective(rng *rand.Rand, n int, most uint64) func() []*spec.Call {
	return func() []*spec.Call {
		s := randomShape(rng, collectives[rng.IntN(len(collectives))], n, rng.Uint64N(most))
		calls := make([]*spec.Call, n)
		for r := range n {
			calls[r] = s.call(r, n)
		}
		return calls
	}
}

// TestCopyEngineThroughComm: with the copy engine on (Config.CopyEngine),
// random programs of transfers and collectives, each rank cutting its
// calls into groups at random, and runs of mixed collectives, at 2, 3 and
// 4 ranks on the host Atom, which runs a copy-engine Plan's workers as any
// others: the Plans, their merges in groups and their mix with the other
// regimes, through comm; every byte received is checked.
func TestCopyEngineThroughComm(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			cfg := testConfig()
			cfg.CopyEngine, cfg.CopyEngineChunk = 4<<10, 4<<10
			comms := startComms(t, n, cfg)
			rng := rand.New(rand.NewPCG(uint64(n), 31))
			bytes := func() uint64 { return rng.Uint64N([]uint64{1 << 10, 16 << 10, 64 << 10}[rng.IntN(3)]) }
			coll := randomCollective(rng, n, 20000)
			for range 4 {
				prog := spectest.RandomProgram(rng, n, 2+rng.IntN(3*n), 12, bytes, coll)
				runProgram(t, comms, &prog, rng)
			}
			var shapes []shape
			for range 40 {
				shapes = append(shapes, randomShape(rng, collectives[rng.IntN(len(collectives))], n, []uint64{3, 2000, 20000}[rng.IntN(3)]))
			}
			runShapes(t, comms, shapes, rng, false)
		})
	}
}
