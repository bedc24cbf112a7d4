package config

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReloadSeesNewValues: Reload rereads the environment (through C
// getenv, so a value set after load is seen) and Get returns what it read.
func TestReloadSeesNewValues(t *testing.T) {
	t.Cleanup(func() { Reload() }) // runs after Setenv's restores
	t.Setenv("PURLIN_TIMEOUT", "7")
	t.Setenv("PURLIN_HOST_WORKERS", "0")
	t.Setenv("PURLIN_PEER_UIDS", "1000, x,1001")
	s := Reload()
	require.Equal(t, []int{1000, 1001}, s.PeerUIDs, "ids that are not numbers are ignored")
	require.Equal(t, 7*time.Second, s.Timeout)
	require.Equal(t, 1, s.HostWorkers, "fewer than one worker is raised to one")
	require.Equal(t, s, Get())
	t.Setenv("PURLIN_TIMEOUT", "")
	require.Equal(t, 300*time.Second, Reload().Timeout)
	t.Setenv("PURLIN_TIMEOUT", "0")
	require.Equal(t, NoTimeout, Reload().Timeout, "0: no limit, as NCCL")
	require.True(t, time.Now().Add(Reload().Timeout).After(time.Now()), "a deadline from it does not overflow")
	t.Setenv("PURLIN_TIMEOUT", "1e30")
	require.Equal(t, NoTimeout, Reload().Timeout, "more than a century is no limit too")
	t.Setenv("PURLIN_TIMEOUT", "-1")
	require.Equal(t, 300*time.Second, Reload().Timeout, "a negative value is ignored")
}

// TestGetDuringReload is for -race: ncclResetDebugInit may reload while
// other threads read the settings.
func TestGetDuringReload(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				require.GreaterOrEqual(t, Get().HostWorkers, 1)
			}
		})
	}
	for range 50 {
		Reload()
	}
	wg.Wait()
}

// TestGoMaxProcs: PURLIN_GOMAXPROCS sets the runtime's GOMAXPROCS when read.
func TestGoMaxProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	t.Cleanup(func() { Reload() }) // runs after Setenv's restore
	t.Setenv("PURLIN_GOMAXPROCS", "1")
	require.Equal(t, 1, Reload().GoMaxProcs)
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
}

// TestDebugLevel: PURLIN_DEBUG sets the log level; when it is unset or
// empty, NCCL_DEBUG does (either case), so NCCL users' habit carries over.
func TestDebugLevel(t *testing.T) {
	cases := []struct{ purlin, nccl, want string }{
		{"", "", ""},
		{"", "INFO", "INFO"},
		{"", "warn", "WARN"},
		{"", "TRACE", "TRACE"},
		{"WARN", "INFO", "WARN"},
		{"info", "", "INFO"},
	}
	t.Cleanup(func() { Reload() }) // runs after Setenv's restores
	for _, tc := range cases {
		t.Setenv("PURLIN_DEBUG", tc.purlin)
		t.Setenv("NCCL_DEBUG", tc.nccl)
		s := Reload()
		require.Equal(t, tc.want, s.Debug, "PURLIN_DEBUG=%q NCCL_DEBUG=%q", tc.purlin, tc.nccl)
		require.Equal(t, tc.want == "INFO" || tc.want == "TRACE", enabled("INFO"))
		require.Equal(t, tc.want != "", enabled("WARN"))
	}
}
