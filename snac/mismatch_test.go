package snac_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
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

// runMismatched runs calls whose ranks disagree; the outputs are not checked.
func runMismatched(w *world, calls []*spec.Call) error {
	launches := make([][]*snactest.Launch, w.n)
	for r, c := range calls {
		in, _ := c.Extents()
		l, err := w.launch(c, false, make([]byte, in))
		if err != nil {
			return err
		}
		launches[r] = []*snactest.Launch{l}
	}
	return w.sim.Run(launches)
}
