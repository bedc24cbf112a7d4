package main

/*
#include "capi.h"
#include "callcache.h"
*/
import "C"

import (
	"unsafe"

	"purlin/comm"
	"purlin/config"
	"purlin/errs"
	"purlin/spec"
)

// goCollective serves every NCCL-shaped collective that the call cache did
// not (callcache.h): k names the collective and holds every argument but
// the buffers; grouped says Go's group holds it (queued, not launched:
// nothing to record). This is the hot path: no allocation.
//
//export goCollective
func goCollective(k *C.purlinCallKey, send, recv C.uintptr_t, grouped C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(C.uintptr_t(k.comm))
	if err != nil {
		return callResult(nil, err)
	}
	call := callOf(k, send, recv)
	if err := c.Collective(&call, uintptr(k.stream)); err != nil {
		return callResult(c, err)
	}
	if grouped == 0 {
		remember(c, unsafe.Slice(k, 1), unsafe.Slice(&call, 1))
	}
	return C.purlinSuccess
}

// goCollectiveRecord validates n calls of one communicator that a group
// the call cache holds makes (keys[i], with buffers bufs[2i] and
// bufs[2i+1]), without launching them, and with record set records them as
// one launch (remember); *recorded says whether it did, or where record is
// 0 whether they may be held (-1: the cache is off). A communicator that
// is not ready (its init deferred to a group, or not done) is left to
// goCollective: nothing is checked or recorded.
//
//export goCollectiveRecord
func goCollectiveRecord(keys *C.purlinCallKey, bufs *C.uint64_t, n, record C.int, recorded *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	*recorded = 0
	if !config.Get().CallCache {
		*recorded = -1
		return C.purlinSuccess
	}
	if n < 1 || n > C.purlinCallOps {
		return result(nil, errs.New(errs.ErrInternal, "call cache: a record of %d calls", int(n)))
	}
	ks, bs := unsafe.Slice(keys, n), unsafe.Slice(bufs, 2*n)
	c, err := lookup(C.uintptr_t(ks[0].comm))
	if err != nil {
		return result(nil, err)
	}
	if !c.Ready() {
		return C.purlinSuccess
	}
	var calls [C.purlinCallOps]spec.Call
	for i := range ks {
		calls[i] = callOf(&ks[i], C.uintptr_t(bs[2*i]), C.uintptr_t(bs[2*i+1]))
		if err := c.Prepare(&calls[i]); err != nil {
			return result(c, err)
		}
	}
	if record == 0 {
		*recorded = 1
		return C.purlinSuccess
	}
	*recorded = b2i(remember(c, ks, calls[:n]))
	return C.purlinSuccess
}

func callOf(k *C.purlinCallKey, send, recv C.uintptr_t) spec.Call {
	return spec.Call{Coll: spec.Collective(k.coll), Send: uintptr(send), Recv: uintptr(recv), Count: uint64(k.count),
		Type: spec.DataType(k.dtype), Op: spec.Op{Kind: spec.OpKind(k.op)}, Root: int(k.root), Peer: int(k.peer),
		IsSend: k.isSend != 0}
}

// goAllReduceEpilogue is an AllReduce followed by *e (nil: none), on the hot
// path as goCollective is: no allocation.
//
//export goAllReduceEpilogue
func goAllReduceEpilogue(send, recv C.uintptr_t, count C.size_t, dtype, op C.int, e *C.purlinEpilogue_t, h, stream C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return callResult(nil, err)
	}
	call := spec.Call{Coll: spec.AllReduce, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		Type: spec.DataType(dtype), Op: spec.Op{Kind: spec.OpKind(op)}}
	if e != nil {
		if e.kind < 0 || e.kind > C.int(^spec.EpilogueKind(0)) { // past spec.EpilogueKind: bits no epilogue has
			return callResult(c, errs.New(errs.ErrInvalidArgument, "%s: unknown epilogue kind bits %#x", spec.AllReduce, uint32(e.kind)))
		}
		call.Epilogue = spec.Epilogue{Kind: spec.EpilogueKind(e.kind), Hidden: uint64(e.hidden),
			Residual: uintptr(e.residual), Weight: uintptr(e.weight), Quant: uintptr(e.quant), Scales: uintptr(e.scales),
			Eps: float32(e.eps)}
	}
	return callResult(c, c.Collective(&call, uintptr(stream)))
}

//export goCollectiveV
func goCollectiveV(coll C.int, send, recv C.uintptr_t, counts, displs, sendCounts, sendDispls, recvCounts, recvDispls *C.size_t, dtype, op C.int, h, stream C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return callResult(nil, err)
	}
	n := c.Count()
	call := spec.Call{Coll: spec.Collective(coll), Send: uintptr(send), Recv: uintptr(recv),
		Type: spec.DataType(dtype), Op: spec.Op{Kind: spec.OpKind(op)},
		Counts: vector(counts, n), Displs: vector(displs, n),
		SendCounts: vector(sendCounts, n), SendDispls: vector(sendDispls, n),
		RecvCounts: vector(recvCounts, n), RecvDispls: vector(recvDispls, n)}
	return callResult(c, c.Collective(&call, uintptr(stream)))
}

// vector copies n size_t values from C; NULL gives nil (Validate names it).
func vector(p *C.size_t, n int) []uint64 {
	if p == nil {
		return nil
	}
	out := make([]uint64, n)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = uint64(v)
	}
	return out
}

// goCollectiveDesc runs a collective named only by its layouts.
//
//export goCollectiveDesc
func goCollectiveDesc(d *C.purlinCollectiveDesc_t, h, stream C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return callResult(nil, err)
	}
	if d == nil {
		return callResult(c, nullArg("Collective: desc"))
	}
	layout := func(l C.purlinLayout_t) spec.Layout {
		return spec.Layout{Shape: spec.Shape(l.shape), V: l.varying != 0, Rooted: l.rooted != 0, Columns: l.columns != 0,
			Matrix: l.matrix != 0}
	}
	coll, err := spec.FromLayouts(spec.Consume(d.consume), layout(d.in), layout(d.out))
	if err != nil {
		return callResult(c, errs.New(errs.ErrInvalidArgument, "Collective: %v", err))
	}
	n, vn := c.Count(), c.Count()
	if coll.Matrix() {
		vn = n * n // one count and one offset per pair
	}
	call := spec.Call{Coll: coll, Send: uintptr(unsafe.Pointer(d.sendbuff)), Recv: uintptr(d.recvbuff), Count: uint64(d.count),
		Type: spec.DataType(d.datatype), Op: spec.Op{Kind: spec.OpKind(d.op)}, Root: int(d.root), Rows: uint64(d.rows),
		Counts: vector(d.counts, vn), Displs: vector(d.displs, vn),
		SendCounts: vector(d.sendcounts, n), SendDispls: vector(d.sdispls, n),
		RecvCounts: vector(d.recvcounts, n), RecvDispls: vector(d.rdispls, n)}
	return callResult(c, c.Collective(&call, uintptr(stream)))
}

//export goGroup
func goGroup(start C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	if start != 0 {
		return result(nil, comm.GroupStart())
	}
	return result(nil, comm.GroupEnd())
}

//export goRedOpCreatePreMulSum
func goRedOpCreatePreMulSum(out *C.int, scalar unsafe.Pointer, dtype, residence C.int, h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if out == nil {
		return result(c, nullArg("RedOpCreatePreMulSum: op"))
	}
	op, err := c.RedOpCreatePreMulSum(scalar, spec.DataType(dtype), int(residence))
	if err == nil {
		*out = C.int(op)
	}
	return result(c, err)
}

//export goRedOpDestroy
func goRedOpDestroy(op C.int, h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(c, c.RedOpDestroy(int32(op)))
}
