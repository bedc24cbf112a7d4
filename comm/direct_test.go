package comm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// directCase is one call of TestDirectCollectives: a shape, and whether it
// is issued in place (its input inside its output, NCCL's positions).
type directCase struct {
	shape
	inPlace bool
}

// TestDirectCollectives: calls whose output lies in a window registered
// with WindowCollSymmetric, at one offset on every rank, push straight
// into the outputs where the collective copies or all-reduces
// (snac.Topology.Direct; an AllToAll in place saves what it sends first)
// and stage as before where it does not (a Gather; a Scatter, whose
// outputs in place lie at an offset of each rank's own), all in
// one sequence each rank issues from its own goroutine, at sizes from
// packets to many chunks; every output matches the reference. Then, with
// the windows deregistered, the same buffers stage.
func TestDirectCollectives(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			comms := startComms(t, n, testConfig())
			rng := rand.New(rand.NewPCG(uint64(n), 11))
			var cases []directCase
			for _, count := range []uint64{3, 200, 3000, 20000} {
				for _, coll := range []spec.Collective{spec.AllGather, spec.Broadcast, spec.AllReduce, spec.Gather, spec.Scatter, spec.AllGatherV, spec.AllToAll, spec.AllGatherColumns} {
					s := randomShape(rng, coll, n, count)
					cases = append(cases, directCase{s, (coll == spec.AllGather || coll == spec.Broadcast || coll == spec.AllToAll || coll == spec.Scatter) && count%2 == 0})
				}
			}
			const windowBytes = 4 << 20
			bufs := rankBuffers(t, n, windowBytes)
			wins := registerAll(t, comms, bufs, windowBytes)
			directs := runDirect(t, comms, bufs, windowBytes, cases, rng)
			require.Positive(t, directs, "no call went direct")
			for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
				require.NoError(t, err, "rank %d", r)
			}
			require.Zero(t, runDirect(t, comms, bufs, windowBytes, cases, rng), "direct calls without a window")
		})
	}
}

// runDirect issues cases on every rank, each call's output at one offset
// of bufs[r] on every rank (the input beside it, or inside it in place),
// checks every output, and returns how many calls rank 0 launched direct.
func runDirect(t *testing.T, comms []*Comm, bufs []uintptr, size uint64, cases []directCase, rng *rand.Rand) int {
	t.Helper()
	n := len(comms)
	type issued struct {
		calls  []*spec.Call
		inputs [][]byte
	}
	var all []issued
	directs, at := 0, uintptr(0)
	for _, dc := range cases {
		is := issued{calls: make([]*spec.Call, n)}
		for r := range n {
			is.calls[r] = dc.call(r, n)
		}
		is.inputs = spectest.Inputs(rng, is.calls)
		in, out := is.calls[0].Extents()
		for _, c := range is.calls {
			in2, out2 := c.Extents()
			in, out = max(in, in2), max(out, out2)
		}
		need := uintptr(in+out+2*4096) &^ 4095
		if uint64(at+need) > size {
			break // the window is full: these calls are enough
		}
		for r, c := range is.calls {
			c.Recv = bufs[r] + at
			c.Send = c.Recv + uintptr(out+4096)&^4095
			if dc.inPlace {
				c.Send = c.Recv
				switch c.Coll {
				case spec.AllGather:
					c.Send += uintptr(uint64(r) * c.Count * uint64(c.Type.Size()))
				case spec.Scatter: // each rank's output its slice of its input: at an offset of its own
					c.Recv += uintptr(uint64(r) * c.Count * uint64(c.Type.Size()))
				}
			}
			_, o := c.Extents()
			fill(bytesAtAddr(c.Recv, int(o)), 0xa5)
			i, _ := c.Extents()
			copy(bytesAtAddr(c.Send, int(i)), is.inputs[r])
		}
		at += need
		var b atom.Buffers
		if c := is.calls[0]; comms[0].directOf(c, &b) {
			directs++
			require.True(t, snac.Directs(c), "%s", c)
			plan, err := comms[0].plans.get(c, true)
			require.NoError(t, err)
			if plan.Regime != snac.RegimePacket && c.Coll != spec.AllReduce { // an AllReduce stages its scatter
				require.Equal(t, snac.RegimeDirect, plan.Regime, "%s", c)
			}
		}
		all = append(all, is)
	}
	errList := onEveryRank(n, func(r int) error {
		for i := range all {
			call := *all[i].calls[r]
			if err := comms[r].Collective(&call, 0); err != nil {
				return fmt.Errorf("call %d %s: %w", i, call.String(), err)
			}
		}
		return comms[r].Synchronize()
	})
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	for i, is := range all {
		want := spectest.Expected(is.calls, is.inputs)
		for r, c := range is.calls {
			_, out := c.Extents()
			got := bytesAtAddr(c.Recv, int(out))
			require.NoError(t, spectest.Compare(c.Type, got, want[r]), "call %d %s rank %d", i, c.String(), r)
		}
	}
	return directs
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// TestDirectNeedsSymmetricWindows: a window registered without
// WindowCollSymmetric promises no common offset, so calls in it stage; a
// call whose output runs past its window stages too.
func TestDirectNeedsSymmetricWindows(t *testing.T) {
	const n, size = 2, 1 << 20
	comms := startComms(t, n, testConfig())
	bufs := rankBuffers(t, n, size)
	wins := make([]uintptr, n)
	for r, err := range onEveryRank(n, func(r int) (err error) {
		wins[r], err = comms[r].WindowRegister(bufs[r], size, WindowDefault)
		return err
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	call := &spec.Call{Coll: spec.AllGather, Type: spec.Float32, Count: 4096, Rank: 0, NRanks: n, Recv: bufs[0], Send: bufs[0] + size/2}
	var b atom.Buffers
	require.False(t, comms[0].directOf(call, &b), "a default window")
	for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
		require.NoError(t, err, "rank %d", r)
	}
	registerAll(t, comms, bufs, size)
	require.True(t, comms[0].directOf(call, &b), "a symmetric window")
	for q := range n {
		require.Equal(t, bufs[q], b.PeerRecv[q], "rank %d's output", q)
	}
	call.Recv = bufs[0] + size - 4096
	require.False(t, comms[0].directOf(call, &b), "an output past the window's end")
}

// TestDirectLaunchAllocatesNothing: a call into a symmetric window is
// planned and launched without allocating, as any other call of a cached
// shape (allocs_test.go).
func TestDirectLaunchAllocatesNothing(t *testing.T) {
	const n, size = 2, 1 << 20
	comms := startComms(t, n, testConfig())
	bufs := rankBuffers(t, n, size)
	registerAll(t, comms, bufs, size)
	call := &spec.Call{Coll: spec.AllGather, Type: spec.Float32, Count: 8192, Rank: 0, NRanks: n, Recv: bufs[0], Send: bufs[0] + size/2}
	var b atom.Buffers
	require.True(t, comms[0].directOf(call, &b))
	_, err := comms[0].plans.get(call, true)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if !comms[0].directOf(call, &b) {
			t.Fatal("not direct")
		}
		if _, err := comms[0].plans.get(call, true); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled { // the race detector's instrumentation allocates (allocs_test.go)
		require.Zero(t, allocs)
	}
}

// TestDirectHoweverGrouped: a call into a symmetric window pushes into the
// outputs whether its rank launches it alone or merged with a group's
// other calls, so ranks that group the same calls differently, as NCCL
// lets them, agree on every call: rank 0 groups two AllReduces and an
// AllGather with a send to rank 1 (one merged launch), rank 1 issues its
// receive and the collectives outside any group, rank 2 groups only the
// collectives. Every output is checked.
func TestDirectHoweverGrouped(t *testing.T) {
	const n, count, windowBytes = 3, 20000, 4 << 20
	comms := startComms(t, n, testConfig())
	bufs := rankBuffers(t, n, windowBytes)
	registerAll(t, comms, bufs, windowBytes)
	floats := func(p uintptr, k int) []float32 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&bytesAtAddr(p, 4*k)[0])), k)
	}
	in := func(r, i int) float32 { return float32(r*7 + i%13) }
	const arBytes = count * 4
	at := func(r, k int) uintptr { return bufs[r] + uintptr(k)*(1<<20) } // four 1 MiB slices of the window
	for r := range n {
		for k := range 2 {
			for i, x := 0, floats(at(r, k), count); i < count; i++ {
				x[i] = in(r+k, i)
			}
		}
		for i, x := 0, floats(at(r, 3), count); i < count; i++ {
			x[i] = in(r, i)
		}
	}
	sent := make([]float32, 64)
	for i := range sent {
		sent[i] = float32(1000 + i)
	}
	got := make([]float32, 64)
	defer runtime.KeepAlive(sent)
	defer runtime.KeepAlive(got)
	calls := func(r int) []spec.Call {
		ar := func(k int) spec.Call {
			return spec.Call{Coll: spec.AllReduce, Send: at(r, k), Recv: at(r, k), Count: count, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}}
		}
		ag := spec.Call{Coll: spec.AllGather, Send: at(r, 3), Recv: at(r, 2), Count: count / n, Type: spec.Float32}
		return []spec.Call{ar(0), ar(1), ag}
	}
	require.Less(t, uint64(arBytes), uint64(1<<20))
	for r, err := range onEveryRank(n, func(r int) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var b atom.Buffers
		cs := calls(r)
		for i := range cs {
			if err := comms[r].Prepare(&cs[i]); err != nil {
				return err
			}
			if !comms[r].directOf(&cs[i], &b) {
				return fmt.Errorf("%s does not push into the outputs", cs[i].Coll)
			}
		}
		send := spec.Call{Coll: spec.SendRecv, Send: uintptr(unsafe.Pointer(&sent[0])), Count: 64, Type: spec.Float32, Peer: 1, IsSend: true}
		recv := spec.Call{Coll: spec.SendRecv, Recv: uintptr(unsafe.Pointer(&got[0])), Count: 64, Type: spec.Float32, Peer: 0}
		switch r {
		case 0:
			if err := GroupStart(); err != nil {
				return err
			}
			for i := range cs {
				if err := comms[r].Collective(&cs[i], 0); err != nil {
					return err
				}
			}
			if err := comms[r].Collective(&send, 0); err != nil {
				return err
			}
			if err := GroupEnd(); err != nil {
				return err
			}
		case 1:
			if err := comms[r].Collective(&recv, 0); err != nil {
				return err
			}
			for i := range cs {
				if err := comms[r].Collective(&cs[i], 0); err != nil {
					return err
				}
			}
		default:
			if err := GroupStart(); err != nil {
				return err
			}
			for i := range cs {
				if err := comms[r].Collective(&cs[i], 0); err != nil {
					return err
				}
			}
			if err := GroupEnd(); err != nil {
				return err
			}
		}
		return comms[r].Synchronize()
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for r := range n {
		for k := range 2 {
			x := floats(at(r, k), count)
			for i := range count {
				want := float32(0)
				for q := range n {
					want += in(q+k, i)
				}
				require.Equal(t, want, x[i], "rank %d AllReduce %d element %d", r, k, i)
			}
		}
		x := floats(at(r, 2), count/n*n)
		for i := range count / n * n {
			require.Equal(t, in(i/(count/n), i%(count/n)), x[i], "rank %d AllGather element %d", r, i)
		}
	}
	require.Equal(t, sent, got)
}
