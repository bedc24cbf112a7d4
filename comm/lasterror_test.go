package comm

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
)

// A thread's last error is its own: another thread does not read it.
func TestThreadLastErrorIsTheThreads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	NoteError(nil, errs.New(errs.ErrInvalidArgument, "this thread's error"))
	other := make(chan string)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other <- ThreadLastError()
	}()
	require.NotContains(t, <-other, "this thread's error")
	require.Contains(t, ThreadLastError(), "this thread's error")
}
