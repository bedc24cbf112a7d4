package comm

import (
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Multi-process tests start this test binary again, once per rank they do
// not run themselves, running only a named worker test; these variables tell
// a worker its part.
const (
	workerEnv    = "PURLIN_COMM_TEST_WORKER" // the worker's rank
	workerNEnv   = workerEnv + "_N"          // the number of ranks
	workerIDEnv  = workerEnv + "_ID"         // the unique id, hex
	workerDieEnv = workerEnv + "_DIE"        // set: exit mid-collective
)

// isWorker reports whether this process is a worker of a multi-process test.
func isWorker() bool { return os.Getenv(workerEnv) != "" }

// spawnRanks starts ranks first..n-1 as processes of this binary that run only
// the test named worker, joined by id, with extra environment entries. The
// caller waits for them.
func spawnRanks(t *testing.T, worker string, id UniqueID, first, n int, extra ...string) []*exec.Cmd {
	var cmds []*exec.Cmd
	for r := first; r < n; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+worker+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), workerEnv+"="+strconv.Itoa(r), workerNEnv+"="+strconv.Itoa(n),
			workerIDEnv+"="+hex.EncodeToString(id[:]))
		cmd.Env = append(cmd.Env, extra...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	return cmds
}

// workerRank returns this worker's rank, the number of ranks and the unique
// id; it skips the test in a process that is not a worker.
func workerRank(t *testing.T) (rank, n int, id UniqueID) {
	if !isWorker() {
		t.Skip("started by its multi-process test")
	}
	rank, _ = strconv.Atoi(os.Getenv(workerEnv))
	n, _ = strconv.Atoi(os.Getenv(workerNEnv))
	raw, err := hex.DecodeString(os.Getenv(workerIDEnv))
	require.NoError(t, err)
	copy(id[:], raw)
	return rank, n, id
}

// runWorker joins this worker's rank, runs rounds on it, and destroys it.
func runWorker(t *testing.T, rounds func(*Comm) error) {
	rank, n, id := workerRank(t)
	c, err := InitRank(n, id, rank, testConfig(), rank)
	require.NoError(t, err)
	require.NoError(t, rounds(c))
	require.NoError(t, c.Destroy())
}
