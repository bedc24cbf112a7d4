package main

/*
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"purlin/comm"
)

// lastErrorBytes is one last-error buffer: a longer text is cut short.
const lastErrorBytes = 2048

// lastErrorBufs are the C buffers GetLastError hands out: one per
// communicator slot of the registry and one per thread, the thread's by
// its id modulo len(thread). A buffer, once made, lives as long as the
// process, so a pointer a caller holds never dangles, whatever other
// threads ask meanwhile; like NCCL's own buffer, its text is rewritten by
// the next GetLastError of its communicator (or of a thread that shares
// the slot).
var lastErrorBufs struct {
	sync.Mutex
	thread [256]*C.char
	comm   [comm.MaxComms]*C.char
}

//export goGetLastError
func goGetLastError(h C.uintptr_t) (text *C.char) {
	defer func() {
		if recover() != nil {
			text = nil
		}
	}()
	lastErrorBufs.Lock()
	defer lastErrorBufs.Unlock()
	buf, s := &lastErrorBufs.thread[unix.Gettid()%len(lastErrorBufs.thread)], comm.ThreadLastError()
	if h != 0 {
		if c, err := comm.Lookup(uintptr(h)); err != nil {
			s = err.Error()
		} else {
			buf, s = &lastErrorBufs.comm[c.Slot()], c.LastError()
		}
	}
	return keepText(buf, s)
}

// keepText writes s into *buf, made on first use, NUL-terminated and cut
// at lastErrorBytes-1 bytes, and returns it. lastErrorBufs is locked.
func keepText(buf **C.char, s string) *C.char {
	if *buf == nil {
		*buf = (*C.char)(C.calloc(1, lastErrorBytes))
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(*buf)), lastErrorBytes)
	n := copy(b[:lastErrorBytes-1], s)
	b[n] = 0
	return *buf
}
