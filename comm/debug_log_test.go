package comm

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// infoWorkerEnv marks the process TestInitLogLine starts.
const infoWorkerEnv = "PURLIN_COMM_TEST_INFO_WORKER"

// The worker of TestInitLogLine: two host ranks join and leave.
func TestInitLogLineWorker(t *testing.T) {
	if os.Getenv(infoWorkerEnv) == "" {
		t.Skip("started by TestInitLogLine")
	}
	startComms(t, 2, testConfig())
}

// With PURLIN_DEBUG unset, NCCL_DEBUG=INFO logs, for every rank, a line that
// names Purlin, its version, the NCCL version it serves and the Atom chosen
// (so a user of the drop-in sees at once that the swap took);
// NCCL_DEBUG=WARN logs no INFO line.
func TestInitLogLine(t *testing.T) {
	if os.Getenv(infoWorkerEnv) != "" {
		t.Skip("worker")
	}
	line := regexp.MustCompile(`purlin INFO Purlin ` + regexp.QuoteMeta(Version) + ` \(NCCL 22809\) comm 0x[0-9a-f]+ rank (\d) of 2, device \d+, host Atom`)
	for _, level := range []string{"INFO", "WARN"} {
		t.Run(level, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestInitLogLineWorker$", "-test.count=1")
			cmd.Env = append(os.Environ(), infoWorkerEnv+"=1", "PURLIN_DEBUG=", "NCCL_DEBUG="+level, "PURLIN_ATOM=host")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			ranks := map[string]bool{}
			for _, m := range line.FindAllStringSubmatch(string(out), -1) {
				ranks[m[1]] = true
			}
			if level == "INFO" {
				require.Equal(t, map[string]bool{"0": true, "1": true}, ranks, "%s", out)
			} else {
				require.Empty(t, ranks, "%s", out)
				require.NotContains(t, string(out), " INFO ")
			}
		})
	}
}
