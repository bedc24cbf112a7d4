package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"purlin/comm"
)

//export goMemAlloc
func goMemAlloc(out *unsafe.Pointer, size C.size_t) (res C.purlinResult_t) {
	defer recovered(&res)
	if out == nil {
		return result(nil, nullArg("MemAlloc: ptr"))
	}
	*out = nil
	p, err := comm.MemAlloc(uint64(size))
	if err == nil {
		*out = p
	}
	return result(nil, err)
}

//export goMemFree
func goMemFree(p unsafe.Pointer) (res C.purlinResult_t) {
	defer recovered(&res)
	return result(nil, comm.MemFree(p))
}

//export goCommRegister
func goCommRegister(h C.uintptr_t, buff unsafe.Pointer, size C.size_t, out *C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if out == nil {
		return result(c, nullArg("CommRegister: handle"))
	}
	handle, err := c.Register(uintptr(buff), uint64(size))
	if err == nil {
		*out = C.uintptr_t(handle)
	}
	return result(c, err)
}

//export goCommDeregister
func goCommDeregister(h C.uintptr_t, handle C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(c, c.Deregister(uintptr(handle)))
}
