package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"
)

// goCommWindowRegister serves purlinCommWindowRegister and
// ncclCommWindowRegister: *win receives the window's registry handle (an
// opaque integer, never a Go pointer), NULL on failure.
//
//export goCommWindowRegister
func goCommWindowRegister(h C.uintptr_t, buff unsafe.Pointer, size C.size_t, win *C.uintptr_t, flags C.int) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if win == nil {
		return result(c, nullArg("CommWindowRegister: win"))
	}
	*win = 0
	handle, err := c.WindowRegister(uintptr(buff), uint64(size), int(flags))
	if err == nil {
		*win = C.uintptr_t(handle)
	}
	return result(c, err)
}

// goCommWindowDeregister serves purlinCommWindowDeregister and
// ncclCommWindowDeregister.
//
//export goCommWindowDeregister
func goCommWindowDeregister(h C.uintptr_t, win C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	return result(c, c.WindowDeregister(uintptr(win)))
}

// goWinGetUserPtr serves ncclWinGetUserPtr (NCCL 2.29): the buffer this
// rank registered as window win.
//
//export goWinGetUserPtr
func goWinGetUserPtr(h C.uintptr_t, win C.uintptr_t, out *C.uintptr_t) (res C.purlinResult_t) {
	defer recovered(&res)
	c, err := lookup(h)
	if err != nil {
		return result(nil, err)
	}
	if out == nil {
		return result(c, nullArg("WinGetUserPtr: outUserPtr"))
	}
	ptr, err := c.WindowUserPtr(uintptr(win))
	if err == nil {
		*out = C.uintptr_t(ptr)
	}
	return result(c, err)
}
