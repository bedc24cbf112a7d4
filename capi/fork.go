package main

/*
#include "capi.h"
*/
import "C"

import "purlin/comm"

// The bootstrap's sockets are closed in a child forked without exec
// (guard.c), so a parent's death reaches its peers while the child lives.
func init() {
	comm.SetForkHooks(
		func(fd int) { C.purlinForkTrack(C.int(fd)) },
		func(fd int) { C.purlinForkUntrack(C.int(fd)) })
}
