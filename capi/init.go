package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"purlin/comm"
	"purlin/config"
	"purlin/errs"
)

//export goGetUniqueId
func goGetUniqueId(out *C.char) (res C.purlinResult_t) {
	defer recovered(&res)
	if out == nil {
		return result(nil, nullArg("GetUniqueId: uniqueId"))
	}
	id, err := comm.GetUniqueID()
	if err != nil {
		return result(nil, err)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(out)), comm.UniqueIDBytes), id[:])
	return C.purlinSuccess
}

//export goCommInitRank
func goCommInitRank(out *C.uintptr_t, nranks C.int, idBytes *C.char, rank C.int, cfg *C.purlinConfig_t) (res C.purlinResult_t) {
	defer recovered(&res)
	if out == nil {
		return callResult(nil, nullArg("CommInitRank: comm"))
	}
	conf, err := readConfig(cfg)
	if err != nil {
		return callResult(nil, err)
	}
	var id comm.UniqueID
	copy(id[:], unsafe.Slice((*byte)(unsafe.Pointer(idBytes)), comm.UniqueIDBytes))
	// The rank is only the fallback device, for the host Atom: comm.InitRank
	// takes the calling thread's current CUDA device, or device 0, as NCCL.
	c, err := comm.InitRank(int(nranks), id, int(rank), conf, int(rank))
	*out = 0
	if c != nil {
		*out = C.uintptr_t(c.Handle())
	}
	return callResult(c, err)
}

//export goCommInitAll
func goCommInitAll(out *C.uintptr_t, ndev C.int, devlist *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	if out == nil {
		return result(nil, nullArg("CommInitAll: comms"))
	}
	var devs []int
	if devlist != nil && ndev > 0 {
		for _, d := range unsafe.Slice(devlist, int(ndev)) {
			devs = append(devs, int(d))
		}
	}
	comms, err := comm.InitAll(int(ndev), devs)
	if err != nil {
		return result(nil, err)
	}
	handles := unsafe.Slice(out, len(comms))
	for i, c := range comms {
		handles[i] = C.uintptr_t(c.Handle())
	}
	return C.purlinSuccess
}

//export goCommFinalize
func goCommFinalize(h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(c, c.Finalize())
}

//export goCommDestroy
func goCommDestroy(h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	if h == 0 {
		return C.purlinSuccess // NCCL accepts destroying NULL
	}
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(nil, c.Destroy())
}

//export goCommAbort
func goCommAbort(h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	if h == 0 {
		return C.purlinSuccess
	}
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(nil, c.Abort())
}

//export goCommSplit
func goCommSplit(h C.uintptr_t, color, key C.int, out *C.uintptr_t, cfg *C.purlinConfig_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return callResult(nil, err)
	}
	if out == nil {
		return callResult(c, nullArg("CommSplit: newcomm"))
	}
	conf, err := optionalConfig(cfg)
	if err != nil {
		return callResult(c, err)
	}
	child, err := c.Split(int(color), int(key), conf)
	*out = 0
	if child != nil {
		*out = C.uintptr_t(child.Handle())
	}
	return callResult(c, err)
}

//export goCommShrink
func goCommShrink(h C.uintptr_t, exclude *C.int, n C.int, out *C.uintptr_t, cfg *C.purlinConfig_t, flags C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return callResult(nil, err)
	}
	if out == nil {
		return callResult(c, nullArg("CommShrink: newcomm"))
	}
	if n < 0 || (n > 0 && exclude == nil) {
		return callResult(c, errs.New(errs.ErrInvalidArgument, "CommShrink: %d excluded ranks at %p", int(n), exclude))
	}
	var list []int
	if n > 0 {
		for _, r := range unsafe.Slice(exclude, int(n)) {
			list = append(list, int(r))
		}
	}
	conf, err := optionalConfig(cfg)
	if err != nil {
		return callResult(c, err)
	}
	child, err := c.Shrink(list, conf, int(flags))
	*out = 0
	if child != nil {
		*out = C.uintptr_t(child.Handle())
	}
	return callResult(c, err)
}

//export goCommCount
func goCommCount(h C.uintptr_t, out *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	return commInt(h, out, "CommCount: count", (*comm.Comm).Count)
}

//export goCommCuDevice
func goCommCuDevice(h C.uintptr_t, out *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	return commInt(h, out, "CommCuDevice: device", (*comm.Comm).Device)
}

//export goCommUserRank
func goCommUserRank(h C.uintptr_t, out *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	return commInt(h, out, "CommUserRank: rank", (*comm.Comm).Rank)
}

// commInt stores get of communicator h at out; what names out in errors.
func commInt(h C.uintptr_t, out *C.int, what string, get func(*comm.Comm) int) C.purlinResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if out == nil {
		return result(c, nullArg(what))
	}
	*out = C.int(get(c))
	return C.purlinSuccess
}

//export goCommGetAsyncError
func goCommGetAsyncError(h C.uintptr_t, out *C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if out == nil {
		return result(c, nullArg("CommGetAsyncError: asyncError"))
	}
	async := c.AsyncError()
	if async != nil && errs.CodeOf(async) != errs.InProgress {
		comm.NoteError(c, async)
	}
	*out = C.int(resultCode(async))
	return C.purlinSuccess
}

//export goCommSynchronize
func goCommSynchronize(h C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(c, c.Synchronize())
}

//export goHostStreamCreate
func goHostStreamCreate(out *C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	if out == nil {
		return result(nil, nullArg("HostStreamCreate: stream"))
	}
	*out = C.uintptr_t(comm.NewHostStream())
	return C.purlinSuccess
}

//export goHostStreamSynchronize
func goHostStreamSynchronize(s C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	return result(nil, comm.SynchronizeHostStream(uintptr(s)))
}

//export goHostStreamDestroy
func goHostStreamDestroy(s C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	return result(nil, comm.DestroyHostStream(uintptr(s)))
}

//export goResetDebugInit
func goResetDebugInit() {
	defer func() { recover() }()
	config.Reload()
}
