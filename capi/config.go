package main

/*
#include <string.h>
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"purlin/comm"
	"purlin/errs"
)

// apiMagic is NCCL_API_MAGIC: a config not made by NCCL_CONFIG_INITIALIZER
// lacks it.
const apiMagic = 0xcafebeef

// configUndefInt is NCCL_CONFIG_UNDEF_INT: "use the default".
const configUndefInt = -2147483648

// readConfig reads an ncclConfig_t by content, as NCCL does: its size
// first, then min(size, ours) bytes, so configs from older or newer headers
// both work; fields beyond size keep their defaults. Only blocking is
// honoured; tuning fields are ignored. NULL is the default config.
func readConfig(cfg *C.purlinConfig_t) (comm.Config, error) {
	conf := comm.DefaultConfig()
	if cfg == nil {
		return conf, nil
	}
	size := uintptr(*(*C.size_t)(unsafe.Pointer(cfg)))
	var local C.purlinConfig_t
	n := min(size, unsafe.Sizeof(local))
	if n < unsafe.Offsetof(local.magic)+4 {
		return conf, errs.New(errs.ErrInvalidArgument, "config: size %d is too small to hold the magic; initialize it with NCCL_CONFIG_INITIALIZER", size)
	}
	C.memcpy(unsafe.Pointer(&local), unsafe.Pointer(cfg), C.size_t(n))
	if uint32(local.magic) != apiMagic {
		return conf, errs.New(errs.ErrInvalidArgument, "config: magic %#x is not %#x: initialize it with NCCL_CONFIG_INITIALIZER", uint32(local.magic), apiMagic)
	}
	if n >= unsafe.Offsetof(local.blocking)+4 && local.blocking != configUndefInt {
		if local.blocking != 0 && local.blocking != 1 { // NCCL accepts only 0 and 1
			return conf, errs.New(errs.ErrInvalidArgument, "config: blocking is %d; it must be 0 or 1", int32(local.blocking))
		}
		conf.Blocking = local.blocking != 0
	}
	return conf, nil
}

// optionalConfig is readConfig for calls where NULL means "inherit".
func optionalConfig(cfg *C.purlinConfig_t) (*comm.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	conf, err := readConfig(cfg)
	return &conf, err
}
