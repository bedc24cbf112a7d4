// Package spec says WHAT a collective is: a consume op (copy or reduce) that
// takes an input layout to an output layout. It knows neither SNAC nor any
// hardware.
//
// A Call names one collective with its buffers, counts, data type and
// reduction op; Validate checks it and returns a clear error, so nothing below
// spec ever sees a bad argument:
//
//	call := spec.Call{Coll: spec.AllReduce, Send: s, Recv: r, Count: n,
//		Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Rank: 0, NRanks: 4}
//	if err := call.Validate(); err != nil { ... }
//
// FromLayouts names a collective by its layouts alone (what NCCL cannot do):
// reduce, scattered -> packed is ReduceScatter.
package spec
