package comm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/spec"
)

func TestHandlesOfDestroyedComms(t *testing.T) {
	comms := startComms(t, 1, testConfig())
	c := comms[0]
	h := c.Handle()
	got, err := Lookup(h)
	require.NoError(t, err)
	assert.Same(t, c, got)
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 1, c.Count())

	require.NoError(t, c.Destroy())
	_, err = Lookup(h)
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
	assert.Contains(t, err.Error(), "was destroyed")
	err = c.Collective(&spec.Call{Coll: spec.AllReduce, Type: spec.Float32}, 0)
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
	assert.ErrorIs(t, c.Destroy(), errs.ErrInvalidUsage)

	for _, bogus := range []uintptr{0xdeadbeef, 1 << 40, 12345 << 32} {
		_, err = Lookup(bogus)
		assert.ErrorIs(t, err, errs.ErrInvalidUsage)
		assert.Contains(t, err.Error(), "is not a Purlin communicator")
	}
	_, err = Lookup(0)
	assert.ErrorIs(t, err, errs.ErrInvalidArgument)
}

func TestInvalidArgumentsLeaveCommUsable(t *testing.T) {
	comms := startComms(t, 2, testConfig())
	buf := newBuffer(t, 64)
	bad := []spec.Call{
		{Coll: spec.AllReduce, Send: 0, Recv: buf.addr(), Count: 4, Type: spec.Float32},
		{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 4, Type: 99},
		{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 4, Type: spec.Float32, Op: spec.Op{Kind: 77}},
		{Coll: spec.Broadcast, Send: buf.addr(), Recv: buf.addr(), Count: 4, Type: spec.Float32, Root: 5},
		{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 1 << 50, Type: spec.Float32},
	}
	for i := range bad {
		err := comms[0].Collective(&bad[i], 0)
		assert.ErrorIs(t, err, errs.ErrInvalidArgument, "call %d", i)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	runShapes(t, comms, []shape{randomShape(rng, spec.AllReduce, 2, 100)}, rng, false)
}

// TestFloat8AvgAndPreMulSumOnOneRank: as NCCL, a one-rank communicator
// rejects a reduction of float8 elements with avg or a PreMulSum op (its
// one-rank path has no float8 PreMulSum) and stays usable; on two ranks
// avg on float8 computes (and TestPreMulSumScalarPerRank covers PreMulSum).
func TestFloat8AvgAndPreMulSumOnOneRank(t *testing.T) {
	one := startComms(t, 1, testConfig())
	buf := newBuffer(t, 64)
	reducing := []spec.Collective{spec.AllReduce, spec.Reduce, spec.ReduceScatter, spec.ReduceScatterV}
	for _, typ := range []spec.DataType{spec.Float8e4m3, spec.Float8e5m2} {
		for _, residence := range []int{ScalarHostImmediate, ScalarDevice} {
			premul := premulOps(t, one, typ, residence)[0]
			for _, kind := range []spec.OpKind{spec.Avg, spec.OpKind(premul)} {
				for _, coll := range reducing {
					call := spec.Call{Coll: coll, Send: buf.addr(), Recv: buf.addr(), Count: 4, Type: typ, Op: spec.Op{Kind: kind}}
					if coll == spec.ReduceScatterV {
						call.Counts, call.Displs = []uint64{4}, []uint64{0}
					}
					err := one[0].Collective(&call, 0)
					require.ErrorIs(t, err, errs.ErrInvalidArgument, "%s %s op %d", coll, typ, kind)
					require.Contains(t, err.Error(), "is not supported on a one-rank communicator")
				}
			}
			require.NoError(t, one[0].RedOpDestroy(premul))
		}
	}
	rng := rand.New(rand.NewPCG(5, 5))
	runShapes(t, one, []shape{randomShape(rng, spec.AllReduce, 1, 100)}, rng, false)

	two := startComms(t, 2, testConfig())
	var shapes []shape
	for _, typ := range []spec.DataType{spec.Float8e4m3, spec.Float8e5m2} {
		for _, coll := range reducing {
			for _, count := range []uint64{1, 77, 3000} {
				s := randomShape(rng, coll, 2, count)
				s.dtype, s.op = typ, spec.Avg
				shapes = append(shapes, s)
			}
		}
	}
	runShapes(t, two, shapes, rng, false)
}

func TestNonBlockingInitAndAbortWhilePeerNeverArrives(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	cfg := testConfig()
	cfg.Blocking = false
	c, err := InitRank(2, id, 0, cfg, 0)
	require.ErrorIs(t, err, errs.ErrInProgress)
	require.NotNil(t, c)
	assert.ErrorIs(t, c.AsyncError(), errs.ErrInProgress)
	err = c.Collective(&spec.Call{Coll: spec.AllReduce, Type: spec.Float32}, 0)
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
	start := time.Now()
	require.NoError(t, c.Abort())
	assert.Less(t, time.Since(start), 3*time.Second, "abort must not wait for the missing peer")
	_, err = Lookup(c.Handle())
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
}

func TestNonBlockingInitCompletes(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	cfg := testConfig()
	cfg.Blocking = false
	comms := make([]*Comm, 2)
	for r := range 2 {
		comms[r], err = InitRank(2, id, r, cfg, r)
		require.ErrorIs(t, err, errs.ErrInProgress)
	}
	t.Cleanup(func() { destroyAll(comms) })
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range comms {
		for c.AsyncError() != nil {
			require.ErrorIs(t, c.AsyncError(), errs.ErrInProgress)
			require.True(t, time.Now().Before(deadline))
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestInitTimeout(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	cfg := testConfig()
	cfg.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = InitRank(2, id, 0, cfg, 0)
	assert.ErrorIs(t, err, errs.ErrTimeout)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A peer that disappears mid-collective turns into a remote error on the
// others well before the timeout.
func TestDeadPeerAbortsWaits(t *testing.T) {
	cfg := testConfig()
	cfg.Timeout = 30 * time.Second
	comms := startComms(t, 2, cfg)
	buf := newBuffer(t, 4096)
	call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 1024, Type: spec.Float32}
	require.NoError(t, comms[0].Collective(&call, 0)) // rank 1 never joins
	start := time.Now()
	comms[1].boot.Sever() // as if rank 1's process died
	err := comms[0].Synchronize()
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.ErrorIs(t, err, errs.ErrRemote, "Synchronize names the cause, not only the datapath's abort")
	assert.ErrorIs(t, comms[0].AsyncError(), errs.ErrRemote)
	assert.Contains(t, comms[0].LastError()+comms[0].AsyncError().Error(), "rank 1")
}

// A rank whose process is gone is an error only for work that still needs
// it: a Broadcast whose root sent everything before it went succeeds on
// another rank whose copy finishes only after the news, and so does a
// Send/Recv between two live ranks issued after it; an AllReduce, which
// needs the gone rank, fails promptly with a remote error naming it.
// (Every rank takes part in a rooted collective's agreement on the call, so
// rank 0 issues its Broadcast before rank 1 goes.)
func TestGonePeerFailsOnlyWorkThatNeedsIt(t *testing.T) {
	const n = 3
	cfg := testConfig()
	cfg.Timeout = time.Minute
	for _, size := range []int{100, 4000, 40000} { // packets, staged, chunked
		t.Run(fmt.Sprint(size, "B"), func(t *testing.T) {
			comms := startComms(t, n, cfg)
			bufs := rankBuffers(t, n, size)
			for r := range n {
				bcast := spec.Call{Coll: spec.Broadcast, Send: bufs[r], Recv: bufs[r], Count: uint64(size), Type: spec.Uint8, Root: 1}
				require.NoError(t, comms[r].Collective(&bcast, 0))
			}
			for _, r := range []int{1, 2} {
				require.NoError(t, comms[r].Synchronize())
			}
			comms[1].boot.Sever() // as if rank 1's process died after its Broadcast
			require.Eventually(t, func() bool { return comms[0].boot.Failure() != nil }, 10*time.Second, time.Millisecond)
			require.NoError(t, comms[0].Synchronize())
			require.NoError(t, comms[0].AsyncError())
			assert.Equal(t, rankPattern(size, 1), bytesAtAddr(bufs[0], size))

			p2p := rankBuffers(t, n, size)
			recv := spec.Call{Coll: spec.SendRecv, Recv: p2p[0], Count: uint64(size), Type: spec.Uint8, Peer: 2}
			send := spec.Call{Coll: spec.SendRecv, Send: p2p[2], Count: uint64(size), Type: spec.Uint8, Peer: 0, IsSend: true}
			require.NoError(t, comms[0].Collective(&recv, 0))
			require.NoError(t, comms[2].Collective(&send, 0))
			require.NoError(t, comms[2].Synchronize())
			require.NoError(t, comms[0].Synchronize(), "a Send/Recv between live ranks")
			assert.Equal(t, rankPattern(size, 2), bytesAtAddr(p2p[0], size))

			start := time.Now()
			sum := spec.Call{Coll: spec.AllReduce, Send: bufs[0], Recv: bufs[0], Count: uint64(size / 4), Type: spec.Float32}
			require.NoError(t, comms[0].Collective(&sum, 0))
			err := comms[0].Synchronize()
			assert.Less(t, time.Since(start), 10*time.Second)
			require.ErrorIs(t, err, errs.ErrRemote)
			assert.Contains(t, err.Error(), "rank 1's process exited")
			assert.ErrorIs(t, comms[0].AsyncError(), errs.ErrRemote)
		})
	}
}

// A wait for a peer that never issues the call ends with a timeout.
func TestCollectiveTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond
	comms := startComms(t, 2, cfg)
	buf := newBuffer(t, 4096)
	call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 1024, Type: spec.Float32}
	require.NoError(t, comms[0].Collective(&call, 0))
	err := comms[0].Synchronize()
	assert.ErrorIs(t, err, errs.ErrTimeout)
	assert.ErrorIs(t, comms[0].AsyncError(), errs.ErrTimeout)
}

// warnWorkerEnv marks the process TestFirstAsyncErrorIsLogged starts.
const warnWorkerEnv = "PURLIN_COMM_TEST_WARN_WORKER"

// The worker of TestFirstAsyncErrorIsLogged: two ranks disagree on a call;
// each rank's error is read several times.
func TestFirstAsyncErrorIsLoggedWorker(t *testing.T) {
	if os.Getenv(warnWorkerEnv) == "" {
		t.Skip("started by TestFirstAsyncErrorIsLogged")
	}
	cfg := testConfig()
	cfg.Timeout = 2 * time.Second
	comms := startComms(t, 2, cfg)
	for r, typ := range []spec.DataType{spec.Float32, spec.Int32} {
		buf := newBuffer(t, 1024)
		call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 256, Type: typ}
		require.NoError(t, comms[r].Collective(&call, 0))
	}
	failed := 0
	for _, c := range comms {
		if c.Synchronize() != nil {
			failed++
		}
		c.AsyncError()
		c.AsyncError()
	}
	require.Positive(t, failed)
}

// A communicator's first asynchronous error is logged at WARN, once, where
// it is first seen: a program that aborts on it (nccl-tests does) may never
// say it, and the departure its abort causes is all the log would show.
func TestFirstAsyncErrorIsLogged(t *testing.T) {
	if os.Getenv(warnWorkerEnv) != "" {
		t.Skip("worker")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFirstAsyncErrorIsLoggedWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), warnWorkerEnv+"=1", "PURLIN_DEBUG=WARN")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	logged := regexp.MustCompile(`purlin WARN comm 0x[0-9a-f]+ rank (\d): asynchronous error: .*ranks disagree`).FindAllStringSubmatch(string(out), -1)
	require.NotEmpty(t, logged, "%s", out)
	seen := map[string]bool{}
	for _, m := range logged {
		require.False(t, seen[m[1]], "rank %s logged its error twice:\n%s", m[1], out)
		seen[m[1]] = true
	}
}

// Ranks that disagree on count or type get an error, never wrong data
// presented as success.
func TestMismatchedCallsAreErrors(t *testing.T) {
	cases := []struct {
		name  string
		count [2]uint64
		dtype [2]spec.DataType
	}{
		{"count", [2]uint64{256, 200}, [2]spec.DataType{spec.Float32, spec.Float32}},
		{"dtype", [2]uint64{256, 256}, [2]spec.DataType{spec.Float32, spec.Int32}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Timeout = 2 * time.Second
			comms := startComms(t, 2, cfg)
			var wg sync.WaitGroup
			for r := range 2 {
				buf := newBuffer(t, 4096)
				call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: tc.count[r], Type: tc.dtype[r]}
				require.NoError(t, comms[r].Collective(&call, 0))
			}
			failed := 0
			var mu sync.Mutex
			for r := range 2 {
				wg.Go(func() {
					if comms[r].Synchronize() != nil {
						mu.Lock()
						failed++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			assert.Positive(t, failed, "mismatched calls must fail on at least one rank")
		})
	}
}

// Ranks that name different roots fail on every rank with a mismatch, at
// once: every rooted collective, in the packet, staged and ring regimes of
// testConfig, at 2 and 4 ranks, each rank naming itself.
func TestRootDisagreementFailsEveryRank(t *testing.T) {
	for _, coll := range []spec.Collective{spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, n := range []int{2, 4} {
			for _, count := range []uint64{100, 3000, 40000} {
				cfg := testConfig()
				cfg.Timeout = 5 * time.Second
				comms := startComms(t, n, cfg)
				start := time.Now()
				for r, c := range comms {
					call := spec.Call{Coll: coll, Count: count, Type: spec.Float32, Root: r, Rank: r, NRanks: n}
					in, out := call.Extents()
					call.Send, call.Recv = newBuffer(t, int(in)).addr(), newBuffer(t, int(out)).addr()
					require.NoError(t, c.Collective(&call, 0))
				}
				for r, err := range onEveryRank(n, func(r int) error { return comms[r].Synchronize() }) {
					require.ErrorIs(t, err, errs.ErrMismatch, "%s of %d at %d ranks: rank %d", coll, count, n, r)
					assert.Contains(t, err.Error(), "disagree")
				}
				assert.Less(t, time.Since(start), cfg.Timeout, "%s of %d at %d ranks: the mismatch must not wait for the timeout", coll, count, n)
				destroyAll(comms)
			}
		}
	}
}

func TestPreMulSum(t *testing.T) {
	comms := startComms(t, 2, testConfig())
	scalar := float32(0.5)
	ops := make([]int32, 2)
	for r, c := range comms {
		op, err := c.RedOpCreatePreMulSum(unsafe.Pointer(&scalar), spec.Float32, ScalarHostImmediate)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, op, int32(spec.NumOps))
		ops[r] = op
	}
	bufs := make([]cBuffer, 2)
	for r, c := range comms {
		bufs[r] = newBuffer(t, 16)
		v := unsafe.Slice((*float32)(bufs[r].ptr), 4)
		for i := range v {
			v[i] = float32(r + 1 + i)
		}
		call := spec.Call{Coll: spec.AllReduce, Send: bufs[r].addr(), Recv: bufs[r].addr(), Count: 4, Type: spec.Float32, Op: spec.Op{Kind: spec.OpKind(ops[r])}}
		require.NoError(t, c.Collective(&call, 0))
	}
	for r, c := range comms {
		require.NoError(t, c.Synchronize())
		v := unsafe.Slice((*float32)(bufs[r].ptr), 4)
		for i := range v {
			assert.Equal(t, 0.5*float32(1+i)+0.5*float32(2+i), v[i])
		}
		require.NoError(t, c.RedOpDestroy(ops[r]))
		assert.ErrorIs(t, c.RedOpDestroy(ops[r]), errs.ErrInvalidArgument)
		call := spec.Call{Coll: spec.AllReduce, Send: bufs[r].addr(), Recv: bufs[r].addr(), Count: 4, Type: spec.Float32, Op: spec.Op{Kind: spec.OpKind(ops[r])}}
		assert.ErrorIs(t, c.Collective(&call, 0), errs.ErrInvalidArgument)
	}
}

func TestMemoryAndRegistration(t *testing.T) {
	p, err := MemAlloc(1000)
	require.NoError(t, err)
	assert.Zero(t, uintptr(p)%memAlign)
	require.NoError(t, MemFree(p))
	assert.ErrorIs(t, MemFree(p), errs.ErrInvalidArgument)
	p, err = MemAlloc(0)
	assert.NoError(t, err, "size 0: NULL, as in NCCL")
	assert.Nil(t, p)
	assert.NoError(t, MemFree(nil), "NULL: nothing to free, as in NCCL")

	c := startComms(t, 1, testConfig())[0]
	h, err := c.Register(0x1000, 64)
	require.NoError(t, err)
	require.NoError(t, c.Deregister(h))
	assert.ErrorIs(t, c.Deregister(h), errs.ErrInvalidArgument)
	_, err = c.WindowRegister(0x1001, 64, 0) // windows: window_test.go
	assert.ErrorIs(t, err, errs.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "not aligned")
}

func TestFinalizeThenDestroy(t *testing.T) {
	comms := startComms(t, 2, testConfig())
	rng := rand.New(rand.NewPCG(9, 9))
	runShapes(t, comms, []shape{randomShape(rng, spec.AllGather, 2, 500)}, rng, false)
	for _, c := range comms {
		require.NoError(t, c.Finalize())
		err := c.Collective(&spec.Call{Coll: spec.AllReduce, Type: spec.Float32}, 0)
		assert.ErrorIs(t, err, errs.ErrInvalidUsage)
	}
	for _, c := range comms {
		require.NoError(t, c.Destroy())
	}
}

func TestGroupsNestAndBalance(t *testing.T) {
	onThread(func() {
		assert.ErrorIs(t, GroupEnd(), errs.ErrInvalidUsage)
		require.NoError(t, GroupStart())
		require.NoError(t, GroupStart())
		assert.NotNil(t, currentGroup())
		require.NoError(t, GroupEnd())
		assert.NotNil(t, currentGroup(), "the outer group is still open")
		require.NoError(t, GroupEnd())
		assert.Nil(t, currentGroup())
	})
}

func TestLastErrorPerThreadAndComm(t *testing.T) {
	c := startComms(t, 1, testConfig())[0]
	onThread(func() {
		err := errs.New(errs.ErrInvalidArgument, "the text")
		NoteError(c, err)
		assert.Equal(t, "purlin: the text", ThreadLastError())
		assert.Equal(t, "purlin: the text", c.LastError())
	})
}

// Aborts issued inside a group (as torch does for several communicators)
// act at once; the aborted rank's peers see a remote error.
func TestGroupedAbort(t *testing.T) {
	cfg := testConfig()
	cfg.Timeout = 30 * time.Second
	a := startComms(t, 2, cfg)
	b := startComms(t, 2, cfg)
	buf := newBuffer(t, 4096)
	call := spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr(), Count: 1024, Type: spec.Float32}
	require.NoError(t, a[1].Collective(&call, 0)) // waits for rank 0, which aborts
	onThread(func() {
		require.NoError(t, GroupStart())
		require.NoError(t, a[0].Abort())
		require.NoError(t, b[0].Abort())
		require.NoError(t, GroupEnd())
	})
	start := time.Now()
	assert.Error(t, a[1].Synchronize())
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.ErrorIs(t, a[1].AsyncError(), errs.ErrRemote)
	assert.Contains(t, a[1].AsyncError().Error(), "rank 0 aborted its communicator", "an abort is told as one, not as a death")
	_, err := Lookup(b[0].Handle())
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
}
