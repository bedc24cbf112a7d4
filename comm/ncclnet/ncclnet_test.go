package ncclnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/comm/network"
	"purlin/errs"
	"purlin/snac"
)

func TestCandidates(t *testing.T) {
	t.Setenv("PURLIN_NCCL_LIBRARY", "/opt/nccl/libnccl.so.2")
	require.Equal(t, []string{"/opt/nccl/libnccl.so.2"}, Candidates())

	t.Setenv("PURLIN_NCCL_LIBRARY", "")
	venv := t.TempDir()
	pip := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "nccl", "lib", "libnccl.so.2")
	require.NoError(t, os.MkdirAll(filepath.Dir(pip), 0o755))
	require.NoError(t, os.WriteFile(pip, nil, 0o644))
	t.Setenv("VIRTUAL_ENV", venv)
	c := Candidates()
	require.Equal(t, pip, c[0], "the pip package first")
	require.Contains(t, c, "libnccl.so.2", "then the system's, by name")
}

// so builds a shared library from C source, or skips without a compiler.
func so(t *testing.T, src string) string {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	c, lib := filepath.Join(dir, "x.c"), filepath.Join(dir, "libnccl.so.2")
	require.NoError(t, os.WriteFile(c, []byte(src), 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, c).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return lib
}

func TestLoadRefusesWhatIsNotNCCL(t *testing.T) {
	purlin := so(t, "int purlinGetVersion(int* v) { *v = 1; return 0; }\nint ncclGetUniqueId(void* id) { return 0; }\n")
	_, err := load([]string{purlin})
	require.ErrorContains(t, err, "is Purlin itself")

	empty := so(t, "int somethingElse(void) { return 0; }\n")
	_, err = load([]string{empty, "/no/such/libnccl.so.2"})
	require.ErrorContains(t, err, "not a usable NCCL")
	require.ErrorContains(t, err, "/no/such/libnccl.so.2")
	require.ErrorContains(t, err, "PURLIN_NCCL_LIBRARY")
}

func TestNewNeedsTheCUDAAtom(t *testing.T) {
	_, err := New(network.Job{Nodes: snac.Nodes{Count: 2, Local: 1}})
	require.ErrorIs(t, err, errs.ErrUnsupported)
	require.ErrorContains(t, err, "CUDA Atom")
}

func TestConnectAtInitKeepsTheUsersChoice(t *testing.T) {
	t.Setenv("NCCL_RUNTIME_CONNECT", "1")
	connectAtInit()
	require.Equal(t, "1", os.Getenv("NCCL_RUNTIME_CONNECT"))
	os.Unsetenv("NCCL_RUNTIME_CONNECT")
	connectAtInit()
	require.Equal(t, "0", os.Getenv("NCCL_RUNTIME_CONNECT"))
}
