package snac_test

import (
	"fmt"

	"purlin/snac"
	"purlin/spec"
)

// Build derives one rank's Plan from its call and the topology: workers, each
// a list of Copy, Reduce, Notify and Wait steps, in the regime the size
// calls for. Plans hold no pointers, so one Plan serves every call of its
// shape (snac.Cache keeps them).
func ExampleBuild() {
	topo := snac.Topology{NRanks: 2, Rank: 0, Workers: 32, StageHalf: 64 << 20, P2PHalf: 1 << 20,
		PacketMax: 16 << 10, ChunkMax: 1 << 20}
	for _, count := range []uint64{2, 8192, 1 << 20} {
		call := spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: count,
			Rank: 0, NRanks: 2, Send: 1 << 40, Recv: 2 << 40}
		plan, err := snac.Build(&call, topo)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d B: %s, %d workers\n", count*4, plan.Regime, len(plan.Workers))
	}
	// Output:
	// 8 B: packet, 1 workers
	// 32768 B: staged, 2 workers
	// 4194304 B: staged, 32 workers
}
