package host

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
)

// A recorded AllGather issued again with other buffers gathers into them;
// a rank keeps its latest records, and a closed rank's are declined.
func TestReplay(t *testing.T) {
	const size = 1000
	ranks := newRanks(t, 2, 10*time.Second)
	plans := make([]*snac.Plan, 2)
	recs := make([]uint64, 2)
	for r, rk := range ranks {
		plans[r] = allGather(rk.topo, size, false, false, 0)
	}
	issue := func(r int, send, recv []byte) int {
		return issueReplay(recs[r], []atom.Buffers{{Send: addr(send), Recv: addr(recv)}}, 0)
	}
	for call := range 3 {
		sends := [][]byte{pattern(0, call, size), pattern(1, call, size)}
		recvs := [][]byte{make([]byte, 2*size), make([]byte, 2*size)}
		for r, rk := range ranks {
			if call == 0 {
				require.NoError(t, rk.Launch(plans[r], []atom.Buffers{{Send: addr(sends[r]), Recv: addr(recvs[r])}}, 0))
				n, fn := rk.Replay(plans[r], 0, unsafe.Pointer(&recs[r]), 8)
				require.Equal(t, 8, n)
				require.NotZero(t, fn)
				continue
			}
			require.Zero(t, issue(r, sends[r], recvs[r]), "call %d rank %d", call, r)
		}
		require.Equal(t, []error{nil, nil}, syncAll(ranks))
		for r := range ranks {
			require.Equal(t, append(append([]byte{}, sends[0]...), sends[1]...), recvs[r], "call %d rank %d", call, r)
		}
	}

	var scratch uint64
	for range keptReplays {
		_, _ = ranks[0].Replay(plans[0], 0, unsafe.Pointer(&scratch), 8)
	}
	buf := make([]byte, 2*size)
	require.Equal(t, -1, issue(0, buf, buf), "a record the rank dropped was issued")
	n, _ := ranks[0].Replay(plans[0], 0, unsafe.Pointer(&scratch), 4)
	require.Zero(t, n, "a record in too little room")
	ranks[1].Abort()
	require.NoError(t, ranks[1].Close())
	require.Equal(t, -1, issue(1, buf, buf), "a closed rank's record was issued")
}
