package main

/*
#include <string.h>
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"purlin/comm"
	"purlin/errs"
)

// apiMagic is NCCL_API_MAGIC: a config not made by NCCL_CONFIG_INITIALIZER
// lacks it.
const apiMagic = 0xcafebeef

// configUndefInt is NCCL_CONFIG_UNDEF_INT: "use the default".
const configUndefInt = -2147483648

// ncclMaxChannels is NCCL's MAXCHANNELS, the most nChannelsPerNetPeer takes.
const ncclMaxChannels = 64

// readConfig reads an ncclConfig_t by content, as NCCL does: its size
// first, then min(size, ours) bytes, so configs from older or newer headers
// both work; fields beyond size keep their defaults. Only blocking is
// honoured; the tuning fields are checked as NCCL 2.28 checks them (the
// same values refused with ncclInvalidArgument, measured on it) and then
// ignored, netName and trafficClass unchecked. NULL is the default config.
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
	// field is an int field at offset off, NCCL_CONFIG_UNDEF_INT where the
	// client's size does not hold it.
	field := func(v C.int, off uintptr) int32 {
		if n < off+4 {
			return configUndefInt
		}
		return int32(v)
	}
	set := func(v int32) bool { return v != configUndefInt }
	blocking := field(local.blocking, unsafe.Offsetof(local.blocking))
	for _, f := range []struct {
		name, takes string
		v           int32
		ok          func(int32) bool
	}{
		{"blocking", "0 or 1", blocking, zeroOrOne},
		{"cgaClusterSize", "0 or more", field(local.cgaClusterSize, unsafe.Offsetof(local.cgaClusterSize)), func(v int32) bool { return v >= 0 }},
		{"splitShare", "0 or 1", field(local.splitShare, unsafe.Offsetof(local.splitShare)), zeroOrOne},
		{"collnetEnable", "0 or 1", field(local.collnetEnable, unsafe.Offsetof(local.collnetEnable)), zeroOrOne},
		{"CTAPolicy", "NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO (0 to 2)", field(local.CTAPolicy, unsafe.Offsetof(local.CTAPolicy)), func(v int32) bool { return v >= 0 && v <= 2 }},
		{"shrinkShare", "0 or 1", field(local.shrinkShare, unsafe.Offsetof(local.shrinkShare)), zeroOrOne},
		{"nvlsCTAs", "1 or more", field(local.nvlsCTAs, unsafe.Offsetof(local.nvlsCTAs)), func(v int32) bool { return v > 0 }},
		{"nChannelsPerNetPeer", fmt.Sprint("1 to ", ncclMaxChannels), field(local.nChannelsPerNetPeer, unsafe.Offsetof(local.nChannelsPerNetPeer)), func(v int32) bool { return v > 0 && v <= ncclMaxChannels }},
		{"nvlinkCentricSched", "0 or 1", field(local.nvlinkCentricSched, unsafe.Offsetof(local.nvlinkCentricSched)), zeroOrOne},
	} {
		if set(f.v) && !f.ok(f.v) {
			return conf, errs.New(errs.ErrInvalidArgument, "config: %s is %d; NCCL takes %s", f.name, f.v, f.takes)
		}
	}
	// NCCL compares minCTAs and maxCTAs as they are, an unset one INT_MIN:
	// minCTAs set without maxCTAs is refused too.
	lo, hi := field(local.minCTAs, unsafe.Offsetof(local.minCTAs)), field(local.maxCTAs, unsafe.Offsetof(local.maxCTAs))
	if (set(lo) && lo <= 0) || (set(hi) && hi <= 0) || lo > hi {
		return conf, errs.New(errs.ErrInvalidArgument, "config: minCTAs %d and maxCTAs %d; NCCL takes each unset or at least 1, minCTAs only with maxCTAs, and minCTAs <= maxCTAs", lo, hi)
	}
	if set(blocking) {
		conf.Blocking = blocking != 0
	}
	return conf, nil
}

func zeroOrOne(v int32) bool { return v == 0 || v == 1 }

// optionalConfig is readConfig for calls where NULL means "inherit".
func optionalConfig(cfg *C.purlinConfig_t) (*comm.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	conf, err := readConfig(cfg)
	return &conf, err
}
