package comm

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// stressEnv sets how many rounds TestOneProcessStress runs per rank count
// (a few by default, seconds in CI; 200 to hunt a rare race).
const stressEnv = "PURLIN_STRESS_ITERS"

func stressIters(t *testing.T) int {
	v := os.Getenv(stressEnv)
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, stressEnv)
	return n
}

// One process drives all ranks from one thread, as nccl-tests' -g N does,
// round after round: init in a group, grouped AllReduces of every regime (a
// warm-up at the largest size, then sizes x4, out of place then in place,
// launched back to back), the thread polling every rank's AsyncError while
// the work runs, then destroy. No call may fail and no rank may ever be
// taken for gone: every rank lives in this process until it is destroyed.
func TestOneProcessStress(t *testing.T) {
	const maxCount = 1 << 16 // floats: past the staging area, so the ring regime too
	iters := stressIters(t)
	for _, n := range []int{2, 4, 8} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			send, recv := make([]cBuffer, n), make([]cBuffer, n)
			for r := range n {
				send[r], recv[r] = newBuffer(t, maxCount*4), newBuffer(t, maxCount*4)
			}
			for it := range iters {
				onThread(func() { stressRound(t, it, send, recv, maxCount) })
				if t.Failed() {
					return
				}
			}
		})
	}
}

// stressRound is one round of TestOneProcessStress on the calling thread.
func stressRound(t *testing.T, it int, send, recv []cBuffer, maxCount uint64) {
	n := len(send)
	id, err := GetUniqueID()
	require.NoError(t, err)
	comms := make([]*Comm, n)
	require.NoError(t, GroupStart())
	for r := range n {
		comms[r], err = InitRank(n, id, r, testConfig(), r)
		require.NoError(t, err)
	}
	require.NoError(t, GroupEnd(), "round %d: init", it)
	defer destroyAll(comms) // on failure; a round that passes destroyed them

	values := func(r int) []float32 { return unsafe.Slice((*float32)(send[r].ptr), maxCount) }
	out := func(r int, inPlace bool) []float32 {
		if inPlace {
			return values(r)
		}
		return unsafe.Slice((*float32)(recv[r].ptr), maxCount)
	}
	// calls issues reps grouped AllReduces of count floats back to back
	// (in place, reps is 1: a second call would sum sums), then waits.
	calls := func(count uint64, inPlace bool, reps int) {
		for r := range n {
			for i, v := 0, values(r); i < int(count); i++ {
				v[i] = float32(r + i%7)
			}
		}
		for range reps {
			require.NoError(t, GroupStart())
			for r, c := range comms {
				call := spec.Call{Coll: spec.AllReduce, Send: send[r].addr(), Recv: recv[r].addr(), Count: count, Type: spec.Float32}
				if inPlace {
					call.Recv = call.Send
				}
				require.NoError(t, c.Collective(&call, 0))
			}
			require.NoError(t, GroupEnd())
		}
		done := make(chan error, n)
		for _, c := range comms {
			go func() { done <- c.Synchronize() }()
		}
		for finished := 0; finished < n; {
			select {
			case err := <-done:
				require.NoError(t, err, "round %d: %d floats", it, count)
				finished++
			default:
				for r, c := range comms {
					require.NoError(t, c.AsyncError(), "round %d rank %d: %d floats", it, r, count)
				}
				runtime.Gosched()
			}
		}
		for r := range n {
			for i, got := range out(r, inPlace)[:count] {
				if want := float32(n*(i%7) + n*(n-1)/2); got != want {
					t.Fatalf("round %d rank %d: %d floats: element %d is %g, want %g", it, r, count, i, got, want)
				}
			}
		}
	}
	calls(maxCount, false, 5) // warm-up
	for count := uint64(2); count <= maxCount; count *= 4 {
		calls(count, false, 4)
		calls(count, true, 1)
	}
	for r, c := range comms {
		require.NoError(t, c.boot.Failure(), "round %d: rank %d was taken for gone", it, r)
		require.NoError(t, c.AsyncError(), "round %d rank %d", it, r)
	}
	for r, c := range comms {
		require.NoError(t, c.Destroy(), "round %d rank %d", it, r)
	}
}
