package comm_test

import (
	"fmt"
	"sync"
	"unsafe"

	"purlin/comm"
	"purlin/spec"
)

// Two ranks of one communicator, here goroutines of one process (ranks in
// other processes join the same way, with the id sent to them), all-reduce
// four floats. Without a GPU the communicator runs on the host Atom, and
// Synchronize waits for its work, as a stream synchronize does on a GPU.
func ExampleComm_Collective() {
	const nranks, count = 2, 4
	id, err := comm.GetUniqueID() // one rank makes it; every rank passes it to InitRank
	if err != nil {
		fmt.Println(err)
		return
	}
	sums := make([][]float32, nranks)
	var wg sync.WaitGroup
	for rank := range nranks {
		wg.Go(func() {
			c, err := comm.InitRank(nranks, id, rank, comm.DefaultConfig(), rank)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer c.Destroy()
			mem, err := comm.MemAlloc(2 * count * 4) // memory the Atom can reach: send, then recv
			if err != nil {
				fmt.Println(err)
				return
			}
			defer comm.MemFree(mem)
			buf := unsafe.Slice((*float32)(mem), 2*count)
			for i := range count {
				buf[i] = float32(10*rank + i) // rank 0: 0 1 2 3; rank 1: 10 11 12 13
			}
			base := uintptr(mem)
			call := spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum},
				Count: count, Send: base, Recv: base + count*4}
			if err := c.Collective(&call, 0); err != nil { // enqueued on the communicator's stream
				fmt.Println(err)
				return
			}
			if err := c.Synchronize(); err != nil {
				fmt.Println(err)
				return
			}
			sums[rank] = append([]float32(nil), buf[count:]...)
		})
	}
	wg.Wait()
	fmt.Println(sums[0], sums[1])
	// Output: [10 12 14 16] [10 12 14 16]
}
