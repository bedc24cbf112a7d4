package comm

import (
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
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		call.Coll, call.Count, call.Type = spec.AllReduce, 64, spec.Float32
		if err := c.Collective(&call, 0); err != nil {
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
