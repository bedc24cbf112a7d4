package comm

import (
	"bytes"
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
	check, err := mpAllReduceIssue(c)
	if err != nil {
		return err
	}
	if err := c.Synchronize(); err != nil {
		return err
	}
	return check()
}

// mpAllReduceIssue issues mpAllReduce's call and returns the check of its
// result, to run once the call finished (it frees the buffer).
func mpAllReduceIssue(c *Comm) (func() error, error) {
	p, err := MemAlloc(mpCount * 4)
	if err != nil {
		return nil, err
	}
	v := unsafe.Slice((*float32)(p), mpCount)
	for i := range v {
		v[i] = float32(c.Rank() + i)
	}
	call := spec.Call{Coll: spec.AllReduce, Send: uintptr(p), Recv: uintptr(p), Count: mpCount, Type: spec.Float32}
	if err := c.Collective(&call, 0); err != nil {
		MemFree(p)
		return nil, err
	}
	return func() error {
		defer MemFree(p)
		n := c.Count()
		for i, x := range v {
			if want := float32(n*i + n*(n-1)/2); x != want {
				return fmt.Errorf("rank %d element %d: %g, want %g", c.Rank(), i, x, want)
			}
		}
		return nil
	}, nil
}

// mpBroadcast broadcasts root's pattern of mpCount bytes on c and checks it arrived.
func mpBroadcast(c *Comm, root int) error {
	check, err := mpBroadcastIssue(c, root)
	if err != nil {
		return err
	}
	if err := c.Synchronize(); err != nil {
		return err
	}
	return check()
}

// mpBroadcastIssue issues mpBroadcast's call and returns the check of its
// result, to run once the call finished (it frees the buffer).
func mpBroadcastIssue(c *Comm, root int) (func() error, error) {
	p, err := MemAlloc(mpCount)
	if err != nil {
		return nil, err
	}
	b := unsafe.Slice((*byte)(p), mpCount)
	clear(b)
	if c.Rank() == root {
		fillRank(b, root)
	}
	call := spec.Call{Coll: spec.Broadcast, Send: uintptr(p), Recv: uintptr(p), Count: mpCount, Type: spec.Uint8, Root: root}
	if err := c.Collective(&call, 0); err != nil {
		MemFree(p)
		return nil, err
	}
	return func() error {
		defer MemFree(p)
		if !bytes.Equal(b, rankPattern(mpCount, root)) {
			return fmt.Errorf("rank %d: rank %d's broadcast did not arrive", c.Rank(), root)
		}
		return nil
	}, nil
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

// A worker that ends right after its last collectives (an AllReduce, then a
// Broadcast from rank 1), without destroying its communicator, as programs
// without destroy_process_group do.
func TestMultiProcessExitWorker(t *testing.T) {
	rank, n, id := workerRank(t)
	c, err := InitRank(n, id, rank, testConfig(), rank)
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, mpAllReduce(c))
	}
	require.NoError(t, mpBroadcast(c, 1))
	os.Exit(0)
}

// Ranks that end right after their last collective without destroying their
// communicator fail no work of a slower rank whose data they all had sent:
// its last AllReduce and a Broadcast from one of them, both still to be
// finished when they exit, succeed, and its communicator stays healthy.
func TestMultiProcessExitWithoutDestroy(t *testing.T) {
	if isWorker() {
		t.Skip("worker")
	}
	const n = 4
	id, err := GetUniqueID()
	require.NoError(t, err)
	cmds := spawnRanks(t, "TestMultiProcessExitWorker", id, 1, n)
	c, err := InitRank(n, id, 0, testConfig(), 0)
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, mpAllReduce(c))
	}
	check, err := mpAllReduceIssue(c)
	require.NoError(t, err)
	checkBroadcast, err := mpBroadcastIssue(c, 1)
	require.NoError(t, err)
	for _, cmd := range cmds {
		require.NoError(t, cmd.Wait())
	}
	require.Eventually(t, func() bool { // every exit has reached this rank
		return c.boot.Gone() == n-1
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Synchronize())
	require.NoError(t, check())
	require.NoError(t, checkBroadcast())
	require.NoError(t, c.AsyncError())
	require.NoError(t, c.Destroy())
}
