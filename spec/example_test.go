package spec_test

import (
	"fmt"

	"purlin/spec"
)

// A collective is named by how its data is laid out before and after, and
// whether ranks' data is copied or reduced on the way.
func ExampleFromLayouts() {
	c, err := spec.FromLayouts(spec.ConsumeReduce, spec.Layout{Shape: spec.Scattered}, spec.Layout{Shape: spec.Packed})
	fmt.Println(c, err)
	d := spec.AllGather.Definition()
	fmt.Println(d.Consume, d.In, "->", d.Out)
	// Output:
	// ReduceScatter <nil>
	// copy packed -> scattered
}

// A call is one rank's view of a collective; Extents says how many bytes
// it reads and writes.
func ExampleCall_Extents() {
	call := spec.Call{Coll: spec.AllGather, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 1024,
		Rank: 1, NRanks: 4, Send: 1 << 20, Recv: 2 << 20}
	fmt.Println(call.Validate())
	fmt.Println(call.Extents())
	// Output:
	// <nil>
	// 4096 16384
}
