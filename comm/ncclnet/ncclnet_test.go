package ncclnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// fakeNCCL is a libnccl.so.2 that does nothing but write each call that
// matters here, a line each, to the file $FAKE_NCCL_LOG: "group", "end",
// "send world 3", "recv rail 0", "memalloc 8", "memfree".
const fakeNCCL = `#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct { char internal[128]; } uid;
static void *world, *rail;
static void note(const char* f, ...) {
  FILE* o = fopen(getenv("FAKE_NCCL_LOG"), "a");
  va_list a; va_start(a, f); vfprintf(o, f, a); va_end(a);
  fputc('\n', o); fclose(o);
}
static const char* name(void* c) { return c == world ? "world" : c == rail ? "rail" : "?"; }
const char* ncclGetErrorString(int r) { return "fake"; }
int ncclGetUniqueId(uid* id) { memset(id, 7, sizeof *id); return 0; }
int ncclCommInitRank(void** c, int n, uid id, int r) { *c = world = malloc(1); return 0; }
int ncclCommSplit(void* c, int color, int key, void** out, void* cfg) { *out = rail = malloc(1); return 0; }
int ncclCommAbort(void* c) { return 0; }
int ncclCommDestroy(void* c) { note("destroy %s", name(c)); return 0; }
int ncclCommGetAsyncError(void* c, int* r) { *r = 0; return 0; }
int ncclGroupStart(void) { note("group"); return 0; }
int ncclGroupEnd(void) { note("end"); return 0; }
int ncclAllReduce(void) { return 0; }
int ncclAllGather(void) { return 0; }
int ncclReduceScatter(void) { return 0; }
int ncclBroadcast(void) { return 0; }
int ncclReduce(void) { return 0; }
int ncclSend(const void* b, size_t n, int t, int peer, void* c, void* s) { note("send %s %d", name(c), peer); return 0; }
int ncclRecv(void* b, size_t n, int t, int peer, void* c, void* s) { note("recv %s %d", name(c), peer); return 0; }
int ncclMemAlloc(void** p, size_t n) { *p = malloc(n); note("memalloc %zu", n); return 0; }
int ncclMemFree(void* p) { free(p); note("memfree"); return 0; }
`

// TestPreconnectWhereRanksShareAProcess: a rank with another rank of the
// communicator in its process sends and receives a byte to and from each peer
// of other nodes, in one group at init, so that no later group waits for a
// peer its own thread has not issued; a rank alone in its process does not.
func TestPreconnectWhereRanksShareAProcess(t *testing.T) {
	t.Setenv("PURLIN_NCCL_LIBRARY", so(t, fakeNCCL))
	log := filepath.Join(t.TempDir(), "calls")
	t.Setenv("FAKE_NCCL_LOG", log)
	id := make([]byte, 128)
	job := network.Job{Rank: 2, Nodes: snac.Nodes{Count: 3, Local: 2}, // rank 2: node 1, rail rank 1
		AllGather: func([]byte) ([][]byte, error) { return [][]byte{id}, nil },
		InContext: func(f func() error) error { return f() }}
	calls := func() []string {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		os.Remove(log)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	net, err := New(job)
	require.NoError(t, err)
	require.Empty(t, calls(), "a rank alone in its process connects on first use, as NCCL does")
	net.Close()
	require.Equal(t, []string{"destroy rail", "destroy world"}, calls())

	job.Colocated = true
	net, err = New(job)
	require.NoError(t, err)
	require.Equal(t, []string{"memalloc 12", "group",
		"send world 0", "recv world 0", "send world 1", "recv world 1", "send world 4", "recv world 4", "send world 5", "recv world 5",
		"send rail 0", "recv rail 0", "send rail 2", "recv rail 2", "end"}, calls())
	net.Close()
	require.Equal(t, []string{"destroy rail", "destroy world", "memfree"}, calls())
}
