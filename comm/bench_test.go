package comm

import (
	"runtime"
	"testing"

	"purlin/spec"
)

// BenchmarkCollectiveCall is the host-side cost of issuing one collective
// outside a group (validate, cached Plan, Launch), without its execution:
// the queue is drained every 256 calls, outside the timer.
func BenchmarkCollectiveCall(b *testing.B) {
	c := startComms(b, 1, testConfig())[0]
	buf := newBuffer(b, 1024)
	call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 64, Type: spec.Float32}
	benchCalls(b, c, func() error {
		call.Coll, call.Count, call.Type = spec.AllReduce, 64, spec.Float32
		return c.Collective(&call, 0)
	})
}

// BenchmarkGroupedSendRecv is the host path of a group holding a send to
// this rank and a receive from it (every rank's part of a SendRecv
// exchange): queueing both, then GroupEnd's merged Plan and Launch. Its
// allocations are the figure to watch (each feeds the collector, whose
// pauses land on callers); its time includes the host Atom running the
// transfer on the same CPUs, unlike a GPU's.
func BenchmarkGroupedSendRecv(b *testing.B) {
	runtime.LockOSThread() // a group belongs to its thread
	defer runtime.UnlockOSThread()
	c := startComms(b, 1, testConfig())[0]
	in, out := newBuffer(b, 1024), newBuffer(b, 1024)
	benchCalls(b, c, func() error {
		send := spec.Call{Coll: spec.SendRecv, Send: in.addr(), Count: 64, Type: spec.Float32, Peer: 0, IsSend: true}
		recv := spec.Call{Coll: spec.SendRecv, Recv: out.addr(), Count: 64, Type: spec.Float32, Peer: 0}
		if err := GroupStart(); err != nil {
			return err
		}
		if err := c.Collective(&send, 0); err != nil {
			return err
		}
		if err := c.Collective(&recv, 0); err != nil {
			return err
		}
		return GroupEnd()
	})
}

// benchCalls times issue, which launches on c, draining c's queue every 256
// issues outside the timer.
func benchCalls(b *testing.B, c *Comm, issue func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := issue(); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			b.StopTimer()
			c.Synchronize()
			b.StartTimer()
		}
	}
	b.StopTimer()
	c.Synchronize()
}
