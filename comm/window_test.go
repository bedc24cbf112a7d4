package comm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/errs"
)

// onEveryRank runs f(rank) on every rank concurrently, as collective calls are.
func onEveryRank(n int, f func(r int) error) []error {
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errList[r] = f(r) })
	}
	wg.Wait()
	return errList
}

// fillRank writes rank r's pattern into b.
func fillRank(b []byte, r int) {
	for i := range b {
		b[i] = byte(r*37 + i*7 + 1)
	}
}

func rankPattern(n, r int) []byte {
	b := make([]byte, n)
	fillRank(b, r)
	return b
}

// bytesAtAddr views n bytes at a host address of a window peer.
func bytesAtAddr(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n)
}

// registerAll registers bufs[r] on comms[r] concurrently and returns the handles.
func registerAll(t *testing.T, comms []*Comm, bufs []uintptr, size uint64) []uintptr {
	t.Helper()
	wins := make([]uintptr, len(comms))
	errList := onEveryRank(len(comms), func(r int) (err error) {
		wins[r], err = comms[r].WindowRegister(bufs[r], size, WindowCollSymmetric)
		return err
	})
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
		require.NotZero(t, wins[r])
	}
	return wins
}

// checkWindows checks every rank sees every rank's data through its
// window, and that a write through one rank's view shows in another's.
func checkWindows(t *testing.T, comms []*Comm, wins []uintptr, size int) {
	t.Helper()
	n := len(comms)
	views := make([][]uintptr, n)
	for r, c := range comms {
		peers, err := c.WindowPeers(wins[r])
		require.NoError(t, err)
		require.Len(t, peers, n)
		views[r] = peers
		for q := range n {
			assert.True(t, bytes.Equal(rankPattern(size, q), bytesAtAddr(peers[q], size)), "rank %d's view of rank %d", r, q)
		}
	}
	// Rank 0 writes into the last rank's buffer; rank 1 reads it there.
	last := n - 1
	copy(bytesAtAddr(views[0][last], size), rankPattern(size, 99))
	assert.True(t, bytes.Equal(rankPattern(size, 99), bytesAtAddr(views[1][last], size)), "rank 1 sees rank 0's write")
	assert.True(t, bytes.Equal(rankPattern(size, 99), bytesAtAddr(views[last][last], size)), "the owner sees rank 0's write")
}

func TestWindowRegisterSeesPeersData(t *testing.T) {
	for _, n := range []int{2, 3} {
		comms := startComms(t, n, testConfig())
		const size = 3 * 4096
		bufs := make([]uintptr, n)
		for r := range n {
			b := newBuffer(t, size)
			fillRank(b.bytes(), r)
			bufs[r] = b.addr()
		}
		wins := registerAll(t, comms, bufs, size)
		checkWindows(t, comms, wins, size)
		for r, c := range comms {
			user, err := c.WindowUserPtr(wins[r])
			require.NoError(t, err)
			assert.Equal(t, bufs[r], user)
		}
		for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
			require.NoError(t, err, "rank %d", r)
		}
		for r, c := range comms {
			_, err := c.WindowPeers(wins[r])
			assert.ErrorIs(t, err, errs.ErrInvalidArgument, "a deregistered handle is dead")
			assert.ErrorIs(t, c.WindowDeregister(wins[r]), errs.ErrInvalidArgument)
		}
	}
}

// A window registered inside a sub-buffer of a larger allocation, several
// windows at once, deregistered in another order than registered.
func TestWindowSeveralWindows(t *testing.T) {
	const n, size = 2, 4096
	comms := startComms(t, n, testConfig())
	var sets [3][]uintptr
	for i := range sets {
		bufs := make([]uintptr, n)
		for r := range n {
			b := newBuffer(t, 4*size)
			fillRank(b.bytes()[size:2*size], r)
			bufs[r] = b.addr() + size
		}
		sets[i] = registerAll(t, comms, bufs, size)
	}
	for _, i := range []int{1, 0, 2} {
		checkWindows(t, comms, sets[i], size)
		for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(sets[i][r]) }) {
			require.NoError(t, err, "rank %d", r)
		}
	}
}

// One thread drives every rank inside a group (NCCL's -g N pattern): the
// registrations run at GroupEnd, even on communicators created in the group.
func TestWindowInGroup(t *testing.T) {
	const n, size = 3, 8192
	id, err := GetUniqueID()
	require.NoError(t, err)
	comms := make([]*Comm, n)
	wins := make([]uintptr, n)
	bufs := rankBuffers(t, n, size)
	onThread(func() {
		require.NoError(t, GroupStart())
		for r := range n {
			comms[r], err = InitRank(n, id, r, testConfig(), r)
			require.NoError(t, err)
			wins[r], err = comms[r].WindowRegister(bufs[r], size, WindowDefault)
			require.NoError(t, err)
			_, err = comms[r].WindowPeers(wins[r])
			assert.ErrorIs(t, err, errs.ErrInvalidUsage, "not registered before GroupEnd")
		}
		require.NoError(t, GroupEnd())
	})
	t.Cleanup(func() { destroyAll(comms) })
	checkWindows(t, comms, wins, size)
	onThread(func() {
		require.NoError(t, GroupStart())
		for r := range n {
			require.NoError(t, comms[r].WindowDeregister(wins[r]))
		}
		require.NoError(t, GroupEnd())
	})
	for r := range n {
		_, err := comms[r].WindowPeers(wins[r])
		assert.Error(t, err)
	}
}

// NCCL's one-thread pattern: windows (two per communicator) and buffer
// registrations made in a group, then released without a group, one
// communicator after the other. Deregistration is local, as NCCL's is, so
// each call returns at once although the other rank has not deregistered
// yet, and the bootstrap stays in step for the next registration.
func TestDeregisterOneCommunicatorAtATime(t *testing.T) {
	const n, size = 2, 4096
	cfg := testConfig()
	cfg.Timeout = 2 * time.Second
	comms := startComms(t, n, cfg)
	bufs := rankBuffers(t, n, 2*size)
	wins := make([][2]uintptr, n)
	regs := make([]uintptr, n)
	onThread(func() {
		require.NoError(t, GroupStart())
		for r, c := range comms {
			for i := range wins[r] {
				var err error
				wins[r][i], err = c.WindowRegister(bufs[r]+uintptr(i*size), size, WindowCollSymmetric)
				require.NoError(t, err)
			}
			var err error
			regs[r], err = c.Register(bufs[r], 2*size)
			require.NoError(t, err)
		}
		require.NoError(t, GroupEnd())
		checkWindows(t, comms, []uintptr{wins[0][0], wins[1][0]}, size)
		for r, c := range comms {
			start := time.Now()
			for _, h := range wins[r] {
				require.NoError(t, c.WindowDeregister(h), "rank %d", r)
			}
			require.NoError(t, c.Deregister(regs[r]), "rank %d", r)
			assert.Less(t, time.Since(start), cfg.Timeout/4, "rank %d's deregistrations waited for rank %d", r, 1-r)
			assert.Zero(t, liveWindows(comms[r:r+1]), "rank %d", r)
		}
	})
	for r, b := range bufs {
		fillRank(bytesAtAddr(b, size), r) // checkWindows wrote into the last rank's
	}
	again := registerAll(t, comms, bufs, size)
	checkWindows(t, comms, again, size)
}

// A buffer one rank gets wrong fails the registration on every rank, and
// the error names the rank; no rank keeps a window.
func TestWindowRefusals(t *testing.T) {
	const n, size = 3, 8192
	comms := startComms(t, n, testConfig())
	bufs := make([]uintptr, n)
	for r := range n {
		bufs[r] = newBuffer(t, 2*size).addr()
	}
	cases := []struct {
		name    string
		bad     func(r int) (uintptr, uint64, int)
		badRank int
		want    string
		local   *errs.Error // the bad rank's own error
	}{
		{"sizes differ", func(r int) (uintptr, uint64, int) { return bufs[r], size - 4096*uint64(r/2), 0 }, 2, "rank 2 registers 4096 bytes, rank 0 8192 bytes", errs.ErrInvalidArgument},
		{"misaligned", func(r int) (uintptr, uint64, int) { return bufs[r] + 64*uintptr(r/2), size, 0 }, 2, "not aligned to NCCL_WIN_REQUIRED_ALIGNMENT", errs.ErrInvalidArgument},
		{"null on one rank", func(r int) (uintptr, uint64, int) { return bufs[r] * uintptr(min(r, 1)), size, 0 }, 1, "only where every rank does", errs.ErrInvalidArgument},
		{"zero size on one rank", func(r int) (uintptr, uint64, int) { return bufs[r], size * uint64(1-r%2), 0 }, 1, "only where every rank does", errs.ErrInvalidArgument},
		{"flags differ", func(r int) (uintptr, uint64, int) { return bufs[r], size, r % 2 }, 1, "rank 1 passes window flags 0x1", errs.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wins := make([]uintptr, n)
			errList := onEveryRank(n, func(r int) (err error) {
				buf, sz, flags := tc.bad(r)
				wins[r], err = comms[r].WindowRegister(buf, sz, flags)
				return err
			})
			for r, err := range errList {
				require.Error(t, err, "rank %d", r)
				assert.Contains(t, err.Error(), tc.want, "rank %d", r)
				assert.Zero(t, wins[r])
				if r == tc.badRank || strings.Contains(tc.want, "rank") {
					assert.ErrorIs(t, err, tc.local)
				} else {
					assert.Equal(t, errs.CodeOf(tc.local), errs.CodeOf(err), "the refusing rank's code on rank %d", r)
					assert.Contains(t, err.Error(), fmt.Sprintf("rank %d refused", tc.badRank))
				}
			}
			assert.Equal(t, 0, liveWindows(comms), "no rank keeps a window")
		})
	}
	// A NULL buffer or a size of 0 on every rank registers nothing, as in
	// NCCL: handle 0, which deregisters as nothing; flags NCCL does not
	// know are ignored.
	for _, empty := range []func(r int) (uintptr, uint64){
		func(r int) (uintptr, uint64) { return 0, size },
		func(r int) (uintptr, uint64) { return bufs[r], 0 },
	} {
		for r, err := range onEveryRank(n, func(r int) error {
			buf, sz := empty(r)
			h, err := comms[r].WindowRegister(buf, sz, 0)
			if err == nil && h != 0 {
				err = fmt.Errorf("handle %#x", h)
			}
			if err == nil {
				err = comms[r].WindowDeregister(0)
			}
			return err
		}) {
			require.NoError(t, err, "rank %d", r)
		}
		assert.Equal(t, 0, liveWindows(comms))
	}
	wins := registerAll(t, comms, bufs, size) // the communicators still work
	for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
		require.NoError(t, err, "rank %d", r)
	}
	flagged := make([]uintptr, n)
	for r, err := range onEveryRank(n, func(r int) (err error) {
		flagged[r], err = comms[r].WindowRegister(bufs[r], size, 8|WindowCollSymmetric)
		return err
	}) {
		require.NoError(t, err, "rank %d: a flag NCCL does not know", r)
	}
	wins = flagged
	for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
		require.NoError(t, err, "rank %d", r)
	}
}

func liveWindows(comms []*Comm) int {
	windows.Lock()
	defer windows.Unlock()
	count := 0
	for _, w := range windows.m {
		for _, c := range comms {
			if w.c == c {
				count++
			}
		}
	}
	return count
}

// Bad handles are errors, never crashes; Destroy releases every window;
// a destroyed communicator refuses.
func TestWindowHandlesAndDestroy(t *testing.T) {
	const n, size = 2, 4096
	comms := startComms(t, n, testConfig())
	others := startComms(t, n, testConfig())
	bufs := []uintptr{newBuffer(t, size).addr(), newBuffer(t, size).addr()}
	wins := registerAll(t, comms, bufs, size)
	otherWins := registerAll(t, others, bufs, size)

	for _, h := range []uintptr{0, 1, wins[0] + 1000, ^uintptr(0), comms[0].Handle()} {
		_, err := comms[0].WindowPeers(h)
		assert.ErrorIs(t, err, errs.ErrInvalidArgument, "handle %#x", h)
		if h != 0 {
			assert.ErrorIs(t, comms[0].WindowDeregister(h), errs.ErrInvalidArgument, "handle %#x", h)
		}
	}
	assert.NoError(t, comms[0].WindowDeregister(0), "no window: nothing to do, as in NCCL")
	_, err := comms[0].WindowPeers(otherWins[0])
	assert.ErrorContains(t, err, "belongs to communicator")
	assert.ErrorContains(t, comms[0].WindowDeregister(otherWins[0]), "belongs to communicator")

	destroyAll(comms)
	assert.Equal(t, 0, liveWindows(comms), "Destroy released the windows")
	_, err = comms[0].WindowPeers(wins[0])
	assert.Error(t, err)
	_, err = comms[0].WindowRegister(bufs[0], size, 0)
	assert.ErrorIs(t, err, errs.ErrInvalidUsage)
	assert.ErrorContains(t, err, "destroyed")
	// The other communicator's windows are untouched.
	for r, b := range bufs {
		fillRank(bytesAtAddr(b, size), r)
	}
	checkWindows(t, others, otherWins, size)
}

// Property: for random clique sizes, window sizes, offsets inside an
// allocation and flags, every rank sees every rank's bytes through its
// window, and one bad rank (drawn at random, or none) fails every rank.
func TestWindowProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for iter := range 12 {
		n := 2 + rng.IntN(3)
		pages := 1 + rng.IntN(3)
		size := uint64(pages) * WindowAlignment
		flags := rng.IntN(2)
		bad := rng.IntN(n + 1) // n: no bad rank
		t.Logf("iteration %d: %d ranks, %d bytes, flags %d, bad rank %d", iter, n, size, flags, bad)
		comms := startComms(t, n, testConfig())
		bufs := make([]uintptr, n)
		for r := range n {
			lead := rng.IntN(3) * WindowAlignment
			b := newBuffer(t, lead+int(size)+rng.IntN(3)*WindowAlignment)
			bufs[r] = b.addr() + uintptr(lead)
			fillRank(bytesAtAddr(bufs[r], int(size)), r)
		}
		if bad < n {
			bufs[bad] += uintptr(8 << rng.IntN(8)) // misaligned by 8..1024 bytes
		}
		wins := make([]uintptr, n)
		errList := onEveryRank(n, func(r int) (err error) {
			wins[r], err = comms[r].WindowRegister(bufs[r], size, flags)
			return err
		})
		if bad < n {
			for r, err := range errList {
				require.Error(t, err, "iteration %d rank %d", iter, r)
				assert.Equal(t, errs.InvalidArgument, errs.CodeOf(err))
			}
			assert.Zero(t, liveWindows(comms))
			continue
		}
		for r, err := range errList {
			require.NoError(t, err, "iteration %d rank %d", iter, r)
		}
		checkWindows(t, comms, wins, int(size))
		for r, err := range onEveryRank(n, func(r int) error { return comms[r].WindowDeregister(wins[r]) }) {
			require.NoError(t, err, "iteration %d rank %d", iter, r)
		}
		assert.Zero(t, liveWindows(comms))
	}
}

// A communicator's window operations of one group run in the order issued:
// two registrations and a deregistration of the first, all in one group.
func TestWindowGroupOrder(t *testing.T) {
	const n, size = 2, 4096
	comms := startComms(t, n, testConfig())
	first, second := make([]uintptr, n), make([]uintptr, n)
	bufs := rankBuffers(t, n, size)
	onThread(func() {
		require.NoError(t, GroupStart())
		for r := range n {
			var err error
			first[r], err = comms[r].WindowRegister(bufs[r], size, 0)
			require.NoError(t, err)
			second[r], err = comms[r].WindowRegister(bufs[r], size, WindowCollSymmetric)
			require.NoError(t, err)
			require.NoError(t, comms[r].WindowDeregister(first[r]))
		}
		require.NoError(t, GroupEnd())
	})
	for r, c := range comms {
		_, err := c.WindowPeers(first[r])
		assert.Error(t, err, "deregistered in the group")
	}
	checkWindows(t, comms, second, size)
}

// Abort releases the communicator's windows like Destroy.
func TestWindowAbortReleases(t *testing.T) {
	const n, size = 2, 4096
	comms := startComms(t, n, testConfig())
	bufs := []uintptr{newBuffer(t, size).addr(), newBuffer(t, size).addr()}
	registerAll(t, comms, bufs, size)
	require.Equal(t, n, liveWindows(comms))
	for _, c := range comms {
		require.NoError(t, c.Abort())
	}
	assert.Zero(t, liveWindows(comms))
}

// rankBuffers allocates one buffer of size bytes per rank with MemAlloc (page-aligned, as windows need),
// filled with that rank's pattern, and returns their addresses.
func rankBuffers(t *testing.T, n, size int) []uintptr {
	bufs := make([]uintptr, n)
	for r := range n {
		b := newBuffer(t, size)
		fillRank(b.bytes(), r)
		bufs[r] = b.addr()
	}
	return bufs
}
