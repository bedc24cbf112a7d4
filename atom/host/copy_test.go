package host

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
)

// AllGather through staging (Notify/Wait) and through packets, 1..4 ranks,
// sizes that are not multiples of 8 and larger than a chunk, several calls
// in a row (alternating halves).
func TestAllGatherStagedAndPackets(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, packets := range []bool{false, true} {
			t.Run(fmt.Sprintf("n%d/packets=%v", n, packets), func(t *testing.T) {
				ranks := newRanks(t, n, 20*time.Second)
				for call, size := range []uint64{13, 8, 1000, 4100, 8 << 10} {
					sends := make([][]byte, n)
					recvs := make([][]byte, n)
					for r, rk := range ranks {
						sends[r] = pattern(r, call, size)
						recvs[r] = make([]byte, uint64(n)*size)
						plan := allGather(rk.topo, size, packets, false, uint64(call+1))
						require.NoError(t, rk.Launch(plan, []atom.Buffers{{Send: addr(sends[r]), Recv: addr(recvs[r])}}, 0))
					}
					for _, err := range syncAll(ranks) {
						require.NoError(t, err)
					}
					for r := range n {
						for q := range n {
							require.Equal(t, sends[q], recvs[r][uint64(q)*size:uint64(q+1)*size], "call %d rank %d from %d", call, r, q)
						}
					}
				}
			})
		}
	}
}

// Consecutive calls use opposite staging halves: after two calls, half 0
// still holds the first call's data and half 1 the second's.
func TestParityHalves(t *testing.T) {
	ranks := newRanks(t, 2, 20*time.Second)
	const size = 64
	for call := range 2 {
		bufs := make([][]byte, 2)
		for r, rk := range ranks {
			bufs[r] = make([]byte, 2*size)
			send := pattern(r, call, size)
			require.NoError(t, rk.Launch(allGather(rk.topo, size, false, false, 7), []atom.Buffers{{Send: addr(send), Recv: addr(bufs[r])}}, 0))
			defer func() { _ = send[0] }() // keep send alive until the calls ran
		}
		for _, err := range syncAll(ranks) {
			require.NoError(t, err)
		}
	}
	for r, rk := range ranks {
		stage := rk.syms[r].stage
		half := rk.topo.StageHalf
		require.Equal(t, pattern(r, 0, size), stage[:size], "rank %d half 0", r)
		require.Equal(t, pattern(r, 1, size), stage[half:half+size], "rank %d half 1", r)
	}
}

// Many calls launched back to back, never synchronized in between: the
// done rule keeps writers out of halves still being read. Run with -race.
func TestManyConsecutivePlans(t *testing.T) {
	const n, calls = 4, 120
	for _, packets := range []bool{false, true} {
		t.Run(fmt.Sprintf("packets=%v", packets), func(t *testing.T) {
			ranks := newRanks(t, n, 30*time.Second)
			size := uint64(24)
			sends := make([][][]byte, n)
			recvs := make([][][]byte, n)
			for r, rk := range ranks {
				for call := range calls {
					sends[r] = append(sends[r], pattern(r, call, size))
					recvs[r] = append(recvs[r], make([]byte, n*size))
				}
				for call := range calls { // Launch never waits for peers: rank 0's calls all queue first
					plan := allGather(rk.topo, size, packets, true, uint64(call%5+1))
					require.NoError(t, rk.Launch(plan, []atom.Buffers{{Send: addr(sends[r][call]), Recv: addr(recvs[r][call])}}, 0))
				}
			}
			for _, err := range syncAll(ranks) {
				require.NoError(t, err)
			}
			for r := range n {
				for call := range calls {
					for q := range n {
						require.Equal(t, sends[q][call], recvs[r][call][uint64(q)*size:uint64(q+1)*size], "call %d rank %d from %d", call, r, q)
					}
				}
			}
		})
	}
}
