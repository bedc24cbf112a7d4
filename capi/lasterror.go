package main

/*
#include <stdlib.h>
#include <string.h>
#include "capi.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"purlin/comm"
)

// lastErrorTexts keeps the C copy of each thread's and communicator's last
// error text: a pointer handed to C stays valid until the next
// GetLastError on the same thread (comm NULL) or communicator.
var lastErrorTexts struct {
	sync.Mutex
	byKey map[lastErrorKey]*C.char
}

type lastErrorKey struct {
	comm uintptr // 0: a thread's text
	tid  int
}

//export goGetLastError
func goGetLastError(h C.uintptr_t) (text *C.char) {
	defer func() {
		if recover() != nil {
			text = nil
		}
	}()
	var s string
	key := lastErrorKey{comm: uintptr(h)}
	if h == 0 {
		key.tid = unix.Gettid()
		s = comm.ThreadLastError()
	} else if c, err := comm.Lookup(uintptr(h)); err != nil {
		s = err.Error()
	} else {
		s = c.LastError()
	}
	return keepText(key, s)
}

func keepText(key lastErrorKey, s string) *C.char {
	lastErrorTexts.Lock()
	defer lastErrorTexts.Unlock()
	if lastErrorTexts.byKey == nil {
		lastErrorTexts.byKey = map[lastErrorKey]*C.char{}
	}
	old := lastErrorTexts.byKey[key]
	if old != nil && C.GoString(old) == s {
		return old
	}
	text := C.CString(s)
	lastErrorTexts.byKey[key] = text
	if old != nil {
		C.free(unsafe.Pointer(old))
	}
	return text
}
