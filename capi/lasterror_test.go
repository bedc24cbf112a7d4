package main

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// cText reads the NUL-terminated text at p (at most lastErrorBytes).
func cText(p unsafe.Pointer) string {
	b := unsafe.Slice((*byte)(p), lastErrorBytes)
	return string(b[:bytes.IndexByte(b, 0)])
}

// A text GetLastError handed out stays readable whatever other calls ask
// meanwhile: a thread's buffer is rewritten in place, never freed (two
// threads reading one communicator's error read freed memory when each new
// text replaced the last). A text past the buffer is cut short.
func TestLastErrorBuffersStay(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	first := unsafe.Pointer(goGetLastError(0xdead0001))
	require.Contains(t, cText(first), "0xdead0001")
	second := unsafe.Pointer(goGetLastError(0xdead0002))
	require.Equal(t, first, second, "the thread's one buffer")
	require.Contains(t, cText(first), "0xdead0002")

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				p := unsafe.Pointer(goGetLastError(0xdead0003))
				require.True(t, strings.HasPrefix(cText(p), "purlin: ") || cText(p) == "", "a readable text")
			}
		})
	}
	wg.Wait()

	var buf [1]*_Ctype_char
	long := strings.Repeat("x", 3*lastErrorBytes)
	require.Equal(t, strings.Repeat("x", lastErrorBytes-1), cText(unsafe.Pointer(keepText(&buf[0], long))))
}
