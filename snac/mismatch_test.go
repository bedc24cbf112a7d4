package snac_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
)

// TestMismatchedCallsAreDetected: when one rank's call differs from the
// others', the Plans fail with a mismatch (or, when the shapes differ so much
// that a flag is never raised, a timeout), never with wrong data.
func TestMismatchedCallsAreDetected(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *spec.Call)
	}{
		{"count", func(c *spec.Call) { c.Count++ }},
		{"dtype", func(c *spec.Call) { c.Type = spec.Int32 }},
		{"op", func(c *spec.Call) { c.Op.Kind = spec.Max }},
		{"root", func(c *spec.Call) { c.Root = 0 }},
		{"collective", func(c *spec.Call) { c.Coll = spec.AllReduce }},
	}
	for _, coll := range []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.Reduce, spec.Broadcast, spec.AllGather} {
		for _, count := range []uint64{16, 3000, 20000} {
			for _, tc := range cases {
				w := newWorld(t, 3, count)
				calls := callsFor(3, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 1)
				// Warm up with a matching call, so the mismatch meets live state.
				require.NoError(t, w.run(calls, false))
				bad := callsFor(3, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 1)
				tc.change(bad[2])
				if bad[2].String() == calls[2].String() || (tc.name == "op" && !coll.Reduces()) || (tc.name == "root" && !coll.Rooted()) {
					continue
				}
				err := runMismatched(w, bad)
				require.Error(t, err, "%s with a different %s", coll, tc.name)
				require.True(t, errors.Is(err, errs.ErrMismatch) || errors.Is(err, errs.ErrTimeout), "%s with a different %s: %v", coll, tc.name, err)
			}
		}
	}
}

// TestTopologyDisagreementIsDetected: ranks whose topologies differ (a
// PURLIN_* setting that shapes Plans, set differently in one process) split
// the same call differently among workers, chunks and regimes. Every such
// call fails, with a mismatch or (when a flag is never raised) a timeout,
// whether or not the Plans happen to line up: never wrong data, never a
// success that depends on the sizes.
func TestTopologyDisagreementIsDetected(t *testing.T) {
	alters := []struct {
		name   string
		change func(t *snac.Topology)
		engine bool // every rank has engineTopo's copy engine
	}{
		{"staging half", func(t *snac.Topology) { t.StageHalf /= 2 }, false},
		{"packet limit", func(t *snac.Topology) { t.PacketMax /= 2 }, false},
		{"chunk limit", func(t *snac.Topology) { t.ChunkMax /= 2 }, false},
		{"workers", func(t *snac.Topology) { t.Workers-- }, false},
		{"point-to-point half", func(t *snac.Topology) { t.P2PHalf /= 2 }, false},
		{"copy engine (the others have none)", func(t *snac.Topology) { *t = t.WithEngine(6<<10, 2, 4<<10) }, false},
		{"no copy engine", func(t *snac.Topology) { *t = t.WithEngine(0, 0, 0) }, true},
		{"copy engine's workers", func(t *snac.Topology) { t.EngineWorkers++ }, true},
		{"copy engine's chunk", func(t *snac.Topology) { t.EngineChunk *= 2 }, true},
	}
	for _, coll := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.Broadcast, spec.AllToAll} {
		for _, count := range []uint64{16, 300, 3000, 20000} {
			for _, a := range alters {
				w := newWorld(t, 3, count)
				if a.engine {
					w.topo = engineTopo(3)
					w.sim = snactest.New(w.topo, count)
				}
				w.alter = func(r int, t *snac.Topology) {
					if r == 2 {
						a.change(t)
					}
				}
				err := runMismatched(w, callsFor(3, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 1))
				require.Error(t, err, "%s of %d elements, rank 2 with another %s", coll, count, a.name)
				require.True(t, errors.Is(err, errs.ErrMismatch) || errors.Is(err, errs.ErrTimeout), "%s of %d, %s: %v", coll, count, a.name, err)
			}
		}
	}
}

// runMismatched runs calls whose ranks disagree; the outputs are not checked.
func runMismatched(w *world, calls []*spec.Call) error {
	launches, err := mismatchedLaunches(w, calls)
	if err != nil {
		return err
	}
	return w.sim.Run(launches)
}

func mismatchedLaunches(w *world, calls []*spec.Call) ([][]*snactest.Launch, error) {
	launches := make([][]*snactest.Launch, w.n)
	for r, c := range calls {
		in, _ := c.Extents()
		l, err := w.launch(c, false, make([]byte, in))
		if err != nil {
			return nil, err
		}
		launches[r] = []*snactest.Launch{l}
	}
	return launches, nil
}

// TestRootDisagreementFailsEveryRank: when ranks name different roots of a
// rooted collective, every rank fails with a mismatch, whichever ranks
// disagree, in every regime and at 2, 4 and 8 ranks: never success with
// diverging data, never a timeout.
func TestRootDisagreementFailsEveryRank(t *testing.T) {
	patterns := []struct {
		name string
		root func(n, r int) int
	}{
		{"each names itself", func(n, r int) int { return r }},
		{"two halves", func(n, r int) int {
			if r < n/2 {
				return 0
			}
			return n - 1
		}},
		{"the last names itself", func(n, r int) int {
			if r == n-1 {
				return r
			}
			return 0
		}},
		{"rank 1 names a rank that is no root", func(n, r int) int {
			if r == 1 {
				return n - 1
			}
			return 0
		}},
	}
	seen := map[snac.Regime]bool{} // by the root's Plan (Scatter's is never chunked in testTopo)
	for _, coll := range []spec.Collective{spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, n := range []int{2, 4, 8} {
			for _, bytes := range regimeLadder[1:] {
				for _, p := range patterns {
					w := newWorld(t, n, bytes+uint64(n))
					require.NoError(t, w.run(ladderCalls(n, coll, spec.Float32, spec.Op{Kind: spec.Sum}, bytes, 0), false))
					bad := ladderCalls(n, coll, spec.Float32, spec.Op{Kind: spec.Sum}, bytes, 0)
					for r, c := range bad {
						c.Root = p.root(n, r)
					}
					launches, err := mismatchedLaunches(w, bad)
					require.NoError(t, err)
					seen[launches[bad[0].Root][0].Plan.Regime] = true
					for r, err := range w.sim.RunEach(launches) {
						require.ErrorIs(t, err, errs.ErrMismatch, "%s of %d bytes at %d ranks, %s: rank %d", coll, bytes, n, p.name, r)
					}
				}
			}
		}
	}
	for r := snac.RegimePacket; r <= snac.RegimeRing; r++ {
		require.True(t, seen[r], "regime %s never reached", r)
	}
}
