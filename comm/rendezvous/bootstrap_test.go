package rendezvous

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/errs"
)

func TestUniqueIDRoundTrip(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	addr, key, err := id.decode()
	require.NoError(t, err)
	assert.NotZero(t, key)
	assert.NotZero(t, addr.Port)
	other, err := GetUniqueID()
	require.NoError(t, err)
	assert.NotEqual(t, id, other, "two ids must differ")

	var garbage UniqueID
	_, _, err = garbage.decode()
	assert.ErrorIs(t, err, errs.ErrInvalidArgument)
}

// connectAll joins n bootstraps at one rendezvous.
func connectAll(t *testing.T, n int, timeout time.Duration) []*Bootstrap {
	t.Helper()
	id, err := GetUniqueID()
	require.NoError(t, err)
	boots := make([]*Bootstrap, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { boots[r], errList[r] = Connect(&id, r, n, r, timeout, nil) })
	}
	wg.Wait()
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() {
		for r, b := range boots {
			closed := make(chan struct{})
			go func() { b.Close(true); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Errorf("rank %d: closing its bootstrap hung (its reader goroutine is stuck)", r)
			}
		}
	})
	return boots
}

func TestBootstrapTableAndAllGather(t *testing.T) {
	for _, n := range []int{1, 2, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			boots := connectAll(t, n, 10*time.Second)
			for r, b := range boots {
				require.Len(t, b.peers, n)
				for q, p := range b.peers {
					assert.Equal(t, q, p.Rank, "rank %d's table", r)
					assert.Equal(t, os.Getpid(), p.Pid)
				}
			}
			// Several rounds, values of different sizes (empty included).
			for round := range 3 {
				got := make([][][]byte, n)
				var wg sync.WaitGroup
				for r, b := range boots {
					wg.Go(func() {
						v, err := b.AllGather([]byte(fmt.Sprintf("%d:%s", round, string(make([]byte, r)))))
						assert.NoError(t, err)
						got[r] = v
					})
				}
				wg.Wait()
				for r := range n {
					require.Len(t, got[r], n)
					for q := range n {
						assert.Equal(t, fmt.Sprintf("%d:%s", round, string(make([]byte, q))), string(got[r][q]))
					}
				}
			}
		})
	}
}

func TestBootstrapAllGatherFD(t *testing.T) {
	const n = 4
	boots := connectAll(t, n, 10*time.Second)
	for round := range 2 {
		results := make([][]int, n)
		var wg sync.WaitGroup
		for r, b := range boots {
			wg.Go(func() {
				fd, err := unix.MemfdCreate(fmt.Sprintf("test-%d", r), 0)
				require.NoError(t, err)
				defer unix.Close(fd)
				_, err = unix.Write(fd, []byte{byte(10*round + r)})
				require.NoError(t, err)
				fds, err := b.AllGatherFD(fd)
				assert.NoError(t, err)
				results[r] = fds
			})
		}
		wg.Wait()
		for r := range n {
			require.Len(t, results[r], n)
			for q, fd := range results[r] {
				var buf [1]byte
				_, err := unix.Pread(fd, buf[:], 0)
				require.NoError(t, err)
				assert.Equal(t, byte(10*round+q), buf[0], "rank %d sees rank %d's fd", r, q)
				flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
				require.NoError(t, err)
				assert.NotZero(t, flags&unix.FD_CLOEXEC, "rank %d's fd of rank %d is inherited across exec", r, q)
				unix.Close(fd)
			}
		}
	}
}

func TestRendezvousRefusals(t *testing.T) {
	t.Run("wrong nranks", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		first := make(chan error, 1)
		go func() {
			b, err := Connect(&id, 0, 2, 0, 3*time.Second, nil)
			if b != nil {
				b.Close(true)
			}
			first <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_, err = Connect(&id, 1, 3, 1, 3*time.Second, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "3 ranks")
		assert.Error(t, <-first) // rank 0 never gets a complete clique
	})
	t.Run("duplicate rank", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := Connect(&id, 0, 2, 0, time.Second, nil)
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_, err = Connect(&id, 0, 2, 0, time.Second, nil)
		if err == nil || !assert.Contains(t, err.Error(), "twice") {
			// the goroutine's connect may have been the second one
			assert.Contains(t, (<-done).Error(), "twice")
			return
		}
		<-done
	})
	t.Run("wrong secret", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		id[24] ^= 0xff
		_, err = Connect(&id, 0, 1, 0, time.Second, nil)
		assert.ErrorIs(t, err, errs.ErrRemote)
		assert.Contains(t, err.Error(), "closed the connection")
	})
	t.Run("timeout", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		start := time.Now()
		_, err = Connect(&id, 0, 2, 0, 300*time.Millisecond, nil)
		assert.ErrorIs(t, err, errs.ErrTimeout)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("cancel", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		cancel := make(chan struct{})
		time.AfterFunc(100*time.Millisecond, func() { close(cancel) })
		_, err = Connect(&id, 0, 2, 0, 10*time.Second, cancel)
		assert.ErrorIs(t, err, errs.ErrAborted)
	})
}

// A rank that leaves without a bye fails the others' bootstraps promptly
// with a remote error naming it and saying whether it aborted or its
// connection ended (its process died); so does every later one.
func TestBootstrapDropIsSeen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(b *Bootstrap)
		says  string
	}{
		{"connection ends", func(b *Bootstrap) { b.conn.Close() }, "rank 0's process exited or died"},
		{"abort", func(b *Bootstrap) { b.Close(false) }, "rank 0 aborted its communicator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boots := connectAll(t, 3, 10*time.Second)
			type drop struct {
				peer int
				err  error
			}
			seen := make([]chan drop, len(boots))
			for r, b := range boots[1:] {
				seen[r+1] = make(chan drop, 4)
				b.SetOnDrop(func(peer int, err error) { seen[r+1] <- drop{peer, err} })
			}
			next := func(r int) drop {
				select {
				case d := <-seen[r]:
					return d
				case <-time.After(5 * time.Second):
					t.Fatalf("rank %d noticed no dropped rank", r)
					return drop{}
				}
			}
			tc.leave(boots[0])
			for r := 1; r < 3; r++ {
				d := next(r)
				assert.Equal(t, 0, d.peer)
				assert.ErrorIs(t, d.err, errs.ErrRemote)
				assert.Contains(t, d.err.Error(), tc.says)
			}
			_, err := boots[1].AllGather(nil)
			assert.ErrorIs(t, err, errs.ErrRemote)

			boots[1].conn.Close() // a later departure is told too
			d := next(2)
			assert.Equal(t, 1, d.peer)
			assert.Contains(t, d.err.Error(), "rank 1's process exited or died")
		})
	}
}

// A rank that gives up on a bootstrap exchange (its peer came after the
// timeout) is out of step with the others: the late reply of that round is
// never taken for a later exchange's data, every later exchange fails at
// once naming the cause, and the connection keeps telling departures (a
// reply nobody waits for does not block it).
func TestBootstrapExchangeGivenUp(t *testing.T) {
	const timeout = 200 * time.Millisecond
	outOfStep := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.ErrorIs(t, err, errs.ErrTimeout, "the later exchange names the first failure")
		assert.Contains(t, err.Error(), "out of step")
	}
	for _, tc := range []struct {
		name string
		// giveUp makes rank 1 give up on an exchange rank 0 has not joined.
		giveUp func(t *testing.T, b *Bootstrap)
		// late is rank 0 joining that exchange afterwards.
		late func(t *testing.T, b *Bootstrap)
	}{
		{"AllGather",
			func(t *testing.T, b *Bootstrap) {
				_, err := b.AllGather([]byte("rank 1, round 0"))
				require.ErrorIs(t, err, errs.ErrTimeout)
			},
			func(t *testing.T, b *Bootstrap) {
				got, err := b.AllGather([]byte("rank 0, round 0"))
				require.NoError(t, err, "rank 1's value was sent before it gave up")
				assert.Equal(t, [][]byte{[]byte("rank 0, round 0"), []byte("rank 1, round 0")}, got)
			}},
		{"AllGatherFD",
			func(t *testing.T, b *Bootstrap) {
				fd, err := unix.MemfdCreate("given-up", 0)
				require.NoError(t, err)
				defer unix.Close(fd)
				_, err = b.AllGatherFD(fd)
				require.ErrorIs(t, err, errs.ErrTimeout)
			},
			func(t *testing.T, b *Bootstrap) {
				fd, err := unix.MemfdCreate("late", 0)
				require.NoError(t, err)
				defer unix.Close(fd)
				fds, err := b.AllGatherFD(fd)
				require.NoError(t, err, "rank 1's descriptor was sent before it gave up")
				for _, f := range fds {
					unix.Close(f)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("later exchanges fail", func(t *testing.T) {
				boots := connectAll(t, 2, 10*time.Second)
				for _, b := range boots {
					b.timeout = timeout
				}
				tc.giveUp(t, boots[1])
				tc.late(t, boots[0]) // its reply to rank 1 comes when nobody waits
				got, err := boots[1].AllGather([]byte("rank 1, round 1"))
				assert.Nil(t, got, "rank 1 must not take the late reply for this exchange's")
				outOfStep(t, err)
				_, err = boots[1].AllGatherFD(0)
				outOfStep(t, err)
			})
			t.Run("departures still told", func(t *testing.T) {
				boots := connectAll(t, 2, 10*time.Second)
				for _, b := range boots {
					b.timeout = timeout
				}
				tc.giveUp(t, boots[1])
				_, err := boots[1].AllGather([]byte("rank 1, round 1"))
				outOfStep(t, err)
				tc.late(t, boots[0])
				boots[0].AllGather([]byte("rank 0, round 1")) // rank 1 never joins it (it would, out of step)
				gone := make(chan int, 1)
				boots[1].SetOnDrop(func(peer int, err error) { gone <- peer })
				boots[0].conn.Close() // as if rank 0's process died
				select {
				case peer := <-gone:
					assert.Equal(t, 0, peer)
				case <-time.After(5 * time.Second):
					t.Fatal("rank 1 did not notice that rank 0 is gone")
				}
			})
		})
	}
}
