package comm

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/spec"
)

// Ranks in separate processes: this test binary re-runs itself as workers
// (PURLIN_COMM_TEST_WORKER=rank), which join the parent's rendezvous, so the
// host Atom's shared memory and the mailboxes' fd passing cross processes.

const mpCount = 3000

// mpAllReduce runs one float32 sum AllReduce of element i = rank+i on c and
// checks the result.
func mpAllReduce(c *Comm) error {
	p, err := MemAlloc(mpCount * 4)
	if err != nil {
		return err
	}
	defer MemFree(p)
	v := unsafe.Slice((*float32)(p), mpCount)
	for i := range v {
		v[i] = float32(c.Rank() + i)
	}
	call := spec.Call{Coll: spec.AllReduce, Send: uintptr(p), Recv: uintptr(p), Count: mpCount, Type: spec.Float32}
	if err := c.Collective(&call, 0); err != nil {
		return err
	}
	if err := c.Synchronize(); err != nil {
		return err
	}
	n := c.Count()
	for i, x := range v {
		if want := float32(n*i + n*(n-1)/2); x != want {
			return fmt.Errorf("rank %d element %d: %g, want %g", c.Rank(), i, x, want)
		}
	}
	return nil
}

func TestMultiProcessWorker(t *testing.T) {
	rank, n, id := workerRank(t)
	c, err := InitRank(n, id, rank, testConfig(), rank)
	require.NoError(t, err)
	require.NoError(t, mpAllReduce(c))
	if os.Getenv(workerDieEnv) != "" {
		// Join a second call, then die without a word mid-collective.
		os.Exit(3)
	}
	require.NoError(t, c.Destroy())
}

func startWorkers(t *testing.T, id UniqueID, n int, die bool) []*exec.Cmd {
	if die {
		return spawnRanks(t, "TestMultiProcessWorker", id, 1, n, workerDieEnv+"=1")
	}
	return spawnRanks(t, "TestMultiProcessWorker", id, 1, n)
}

func TestMultiProcess(t *testing.T) {
	if isWorker() {
		t.Skip("worker")
	}
	const n = 3
	id, err := GetUniqueID()
	require.NoError(t, err)
	cmds := startWorkers(t, id, n, false)
	c, err := InitRank(n, id, 0, testConfig(), 0)
	require.NoError(t, err)
	require.NoError(t, mpAllReduce(c))
	require.NoError(t, c.Destroy())
	for _, cmd := range cmds {
		assert.NoError(t, cmd.Wait())
	}
}

// A rank process that exits mid-collective becomes an error on the others
// long before the timeout.
func TestMultiProcessDeadPeer(t *testing.T) {
	if isWorker() {
		t.Skip("worker")
	}
	const n = 2
	id, err := GetUniqueID()
	require.NoError(t, err)
	cmds := startWorkers(t, id, n, true)
	cfg := testConfig()
	cfg.Timeout = 60 * time.Second
	c, err := InitRank(n, id, 0, cfg, 0)
	require.NoError(t, err)
	defer c.Destroy()
	require.NoError(t, mpAllReduce(c))
	start := time.Now()
	err = mpAllReduce(c) // the worker is gone
	require.Error(t, err)
	assert.ErrorIs(t, c.AsyncError(), errs.ErrRemote)
	assert.Less(t, time.Since(start), 20*time.Second)
	for _, cmd := range cmds {
		cmd.Wait()
	}
}
