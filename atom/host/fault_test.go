package host

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// inaccessible is an address range that faults on any access (mapped
// PROT_NONE, so nothing else is mapped there during the test), standing for
// a buffer the caller freed.
func inaccessible(t *testing.T, n int) uintptr {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(mem) })
	return uintptr(unsafe.Pointer(&mem[0]))
}

// A Plan that touches memory which is not mapped fails with an invalid
// argument and the process lives on: a buffer never valid, or freed while
// the call ran (a program that exits, or frees its buffers, with work
// still queued). Every verb that reads or writes caller memory, on the
// stream's goroutine and on a worker's own, and a PreMulSum factor in memory.
func TestUnmappedBufferFailsTheCall(t *testing.T) {
	const n = 8192 // past one packet chunk
	reduceStep := func(dst snac.Ref, srcs ...snac.Ref) snac.Step {
		s := snac.Step{Verb: snac.Reduce, NSrc: uint8(len(srcs)), Dst: dst, Bytes: n, Delta: 1, Check: 5}
		copy(s.Src[:], srcs)
		return s
	}
	topo := testTopo(1, 0)
	cases := []struct {
		name   string
		steps  []snac.Step
		second bool // the steps run on a second worker (its own goroutine)
		bad    func(good, bad uintptr) atom.Buffers
		op     func(bad uintptr) spec.Op
	}{
		{name: "copy from", steps: []snac.Step{copyStep(recvRef(0), sendRef(0), n, 5)},
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: b, Recv: g} }},
		{name: "copy to", steps: []snac.Step{copyStep(recvRef(0), sendRef(0), n, 5)},
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: g, Recv: b} }},
		{name: "copy to, second worker", steps: []snac.Step{copyStep(recvRef(0), sendRef(0), n, 5)}, second: true,
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: g, Recv: b} }},
		{name: "copy through packets", steps: []snac.Step{copyStep(packetRef(topo, 0, 0), sendRef(0), n, 5)},
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: b, Recv: g} }},
		{name: "reduce from", steps: []snac.Step{reduceStep(recvRef(0), sendRef(0), stageRef(topo, 0, 0))},
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: b, Recv: g} }},
		{name: "reduce into, second worker", steps: []snac.Step{reduceStep(recvRef(0), sendRef(0), stageRef(topo, 0, 0))}, second: true,
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: g, Recv: b} }},
		{name: "premulsum factor", steps: []snac.Step{reduceStep(recvRef(0), sendRef(0), stageRef(topo, 0, 0))},
			bad: func(g, b uintptr) atom.Buffers { return atom.Buffers{Send: g, Recv: g} },
			op:  func(b uintptr) spec.Op { return spec.Op{Kind: spec.PreMulSum, ScalarPtr: b} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rk := newRanks(t, 1, 10*time.Second)[0]
			good := make([]byte, n)
			bad := inaccessible(t, n)
			var b planBuilder
			if tc.second {
				b.worker(snac.Collective, 0)
				b.worker(snac.Collective, 1, tc.steps...)
			} else {
				b.worker(snac.Collective, 0, tc.steps...)
			}
			b.p.NRanks, b.p.Type, b.p.Op = 1, spec.Float32, spec.Op{Kind: spec.Sum}
			if tc.op != nil {
				b.p.Op = tc.op(bad)
			}
			require.NoError(t, rk.Launch(&b.p, []atom.Buffers{tc.bad(addr(good), bad)}, 0))
			err := rk.Synchronize()
			require.ErrorIs(t, err, errs.ErrInvalidArgument)
			require.Contains(t, err.Error(), "memory fault")
			require.ErrorIs(t, rk.AsyncError(), errs.ErrInvalidArgument)
		})
	}
}

// The case the differential test met: a rank waits for its peer, the
// program frees the output meanwhile, then the peer comes. The copy after
// the wait must fail the call, not crash the process.
func TestBufferFreedWhileTheCallWaits(t *testing.T) {
	const n = 4096
	ranks := newRanks(t, 2, 10*time.Second)
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(mem) })
	send := make([]byte, n)
	waiter, notifier := flagPlans(2)
	waiter.Steps = append(waiter.Steps, copyStep(recvRef(0), sendRef(0), n, 5))
	waiter.Workers[0].Count++
	require.NoError(t, ranks[0].Launch(waiter, []atom.Buffers{{Send: addr(send), Recv: addr(mem)}}, 0))
	require.NoError(t, unix.Mprotect(mem, unix.PROT_NONE)) // freed
	require.NoError(t, ranks[1].Launch(notifier, nil, 0))
	require.NoError(t, ranks[1].Synchronize())
	err = ranks[0].Synchronize()
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	require.Contains(t, err.Error(), "memory fault")
}
