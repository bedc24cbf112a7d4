package comm

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/comm/rendezvous"
)

// TestForkHooksCoverBootstrapSockets: while a communicator lives, every
// bootstrap socket (the rendezvous' listener until all ranks arrived, its
// connection to each rank, each rank's connection and mailbox) is
// registered for closing in a forked child; once it is destroyed, none is.
func TestForkHooksCoverBootstrapSockets(t *testing.T) {
	var mu sync.Mutex
	tracked := map[int]int{}
	SetForkHooks(
		func(fd int) { mu.Lock(); tracked[fd]++; mu.Unlock() },
		func(fd int) { mu.Lock(); tracked[fd]--; mu.Unlock() })
	defer SetForkHooks(nil, nil)
	live := func() []int {
		mu.Lock()
		defer mu.Unlock()
		var fds []int
		for fd, n := range tracked {
			require.LessOrEqual(t, n, 1, "fd %d registered %d times", fd, n)
			require.GreaterOrEqual(t, n, 0, "fd %d unregistered more often than registered", fd)
			if n == 1 {
				fds = append(fds, fd)
			}
		}
		return fds
	}
	const n = 3
	id, err := rendezvous.NewUniqueID(loopbackListener(t), 10*time.Second)
	require.NoError(t, err)
	require.Len(t, live(), 1, "the rendezvous' listener")
	comms, errList := initRanks(n, id, testConfig())
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	fds := live()
	require.Len(t, fds, 3*n, "per rank: its connection and mailbox, and the rendezvous' end of the connection (the listener is closed)")
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(target, "socket:"), "fd %d is %s", fd, target)
	}
	destroyAll(comms)
	require.Eventually(t, func() bool { return len(live()) == 0 }, 5*time.Second, 10*time.Millisecond,
		"registered after destroy: %v", live())
}
