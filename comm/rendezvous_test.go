package comm

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/comm/rendezvous"
)

// The rendezvous' lifecycle: its accept loop outlives passing errors, an
// unused id is released, and nothing a communicator owned stays after it.

// flakyListener fails its first fails Accepts as a process out of
// descriptors does.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func loopbackListener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// initRanks runs InitRank for every rank of id, rank r starting after
// delays[r] (none when delays is short), and returns the comms and errors.
func initRanks(n int, id UniqueID, cfg Config, delays ...time.Duration) ([]*Comm, []error) {
	comms := make([]*Comm, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if r < len(delays) {
				time.Sleep(delays[r])
			}
			comms[r], errList[r] = InitRank(n, id, r, cfg, r)
		})
	}
	wg.Wait()
	return comms, errList
}

func TestRendezvousAcceptSurvivesTransientErrors(t *testing.T) {
	ln := &flakyListener{Listener: loopbackListener(t)}
	ln.fails.Store(5)
	id, err := rendezvous.NewUniqueID(ln, 10*time.Second)
	require.NoError(t, err)
	cfg := testConfig()
	cfg.Timeout = 5 * time.Second
	comms, errList := initRanks(2, id, cfg)
	defer destroyAll(comms)
	for r, err := range errList {
		require.NoError(t, err, "rank %d, after the rendezvous' Accept failed with EMFILE 5 times", r)
	}
	require.Less(t, ln.fails.Load(), int32(0), "the failures were not reached")
}

// TestRendezvousSurvivesDescriptorShortage runs itself in a child process
// whose descriptor limit is low, fills it with idle connections to a
// rendezvous, so that its Accept fails with EMFILE, frees them, and then
// inits a communicator at that rendezvous.
func TestRendezvousSurvivesDescriptorShortage(t *testing.T) {
	if os.Getenv("PURLIN_TEST_FD_SHORTAGE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRendezvousSurvivesDescriptorShortage$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PURLIN_TEST_FD_SHORTAGE=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the child:\n%s", out)
		return
	}
	id, err := rendezvous.NewUniqueID(loopbackListener(t), 20*time.Second)
	require.NoError(t, err)
	addr, err := id.Addr()
	require.NoError(t, err)
	limit := uint64(openFDs(t) + 60)
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: limit, Max: old.Max}))
	var idle []net.Conn
	for range 300 { // more than the limit: the rendezvous' Accept meets EMFILE
		c, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err != nil {
			require.True(t, errors.Is(err, syscall.EMFILE), "dial: %v", err)
			break
		}
		idle = append(idle, c)
	}
	time.Sleep(200 * time.Millisecond) // the rendezvous meets the shortage
	for _, c := range idle {
		c.Close()
	}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old))
	cfg := testConfig()
	cfg.Timeout = 5 * time.Second
	comms, errList := initRanks(2, id, cfg)
	defer destroyAll(comms)
	for r, err := range errList {
		require.NoError(t, err, "rank %d, after %d idle connections under a limit of %d descriptors", r, len(idle), limit)
	}
}

// TestUnusedIDReleased: an id no rank uses within the timeout releases its
// listener, its goroutine and its place among rendezvous.LocalServers.
func TestUnusedIDReleased(t *testing.T) {
	const n = 200
	fds0, gs0, servers0 := openFDs(t), runtime.NumGoroutine(), rendezvous.LocalServers()
	for range n {
		_, err := rendezvous.NewUniqueID(loopbackListener(t), 300*time.Millisecond)
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, openFDs(t), fds0+n/2, "the ids hold no listener")
	require.Eventually(t, func() bool {
		return openFDs(t) <= fds0+5 && runtime.NumGoroutine() <= gs0+5 && rendezvous.LocalServers() <= servers0
	}, 5*time.Second, 20*time.Millisecond, "after %d unused ids: descriptors %d -> %d, goroutines %d -> %d, local servers %d -> %d",
		n, fds0, openFDs(t), gs0, runtime.NumGoroutine(), servers0, rendezvous.LocalServers())
}

// TestIDUsedLateWithinTimeout: the idle bound counts from the id's making
// to the first rank; from there, the other ranks have the whole timeout.
func TestIDUsedLateWithinTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	id, err := rendezvous.NewUniqueID(loopbackListener(t), timeout)
	require.NoError(t, err)
	cfg := testConfig()
	comms, errList := initRanks(2, id, cfg, 2*time.Second, 4*time.Second) // rank 1 past the idle bound
	defer destroyAll(comms)
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestInitDestroyCyclesLeakNothing: thousands of create/destroy cycles and
// unused ids leave no descriptor, goroutine or local rendezvous behind.
// PURLIN_LEAK_CYCLES sets the cycles (200 by default, to stay quick).
func TestInitDestroyCyclesLeakNothing(t *testing.T) {
	cycles := 200
	if v, err := strconv.Atoi(os.Getenv("PURLIN_LEAK_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	cfg := testConfig()
	cfg.Timeout = 5 * time.Second
	fds0, gs0, servers0, rss0, heap0 := openFDs(t), runtime.NumGoroutine(), rendezvous.LocalServers(), rssKB(t), liveHeapKB()
	for i := range cycles {
		id, err := rendezvous.NewUniqueID(loopbackListener(t), 500*time.Millisecond)
		require.NoError(t, err)
		if i%2 == 1 {
			continue // unused: released after its timeout
		}
		comms, errList := initRanks(2, id, cfg)
		for r, err := range errList {
			require.NoError(t, err, "cycle %d rank %d", i, r)
		}
		destroyAll(comms)
	}
	ok := func() bool {
		return openFDs(t) <= fds0+5 && runtime.NumGoroutine() <= gs0+5 && rendezvous.LocalServers() <= servers0
	}
	require.Eventually(t, ok, 5*time.Second, 20*time.Millisecond,
		"after %d cycles: descriptors %d -> %d, goroutines %d -> %d, local servers %d -> %d",
		cycles, fds0, openFDs(t), gs0, runtime.NumGoroutine(), servers0, rendezvous.LocalServers())
	t.Logf("%d cycles: descriptors %d -> %d, goroutines %d -> %d, local servers %d -> %d, RSS %d -> %d KB, live heap %d -> %d KB",
		cycles, fds0, openFDs(t), gs0, runtime.NumGoroutine(), servers0, rendezvous.LocalServers(), rss0, rssKB(t), heap0, liveHeapKB())
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// liveHeapKB is the heap in use after a collection: what is still reachable.
func liveHeapKB() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapInuse >> 10)
}

func rssKB(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}
