package host

import "unsafe"

// bytesAt is n bytes of plain memory at addr (a caller's buffer).
func bytesAt(addr uintptr, n uint64) []byte {
	if n == 0 {
		return nil
	}
	// addr is memory the caller owns and keeps alive for the call (C memory,
	// or a pinned Go buffer in tests); it is never a Go pointer we made.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// wordsOf views b (8-byte aligned, a multiple of 8 long) as uint64 words.
func wordsOf(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}
