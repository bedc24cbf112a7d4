package comm

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
	addr, magic, err := id.decode()
	require.NoError(t, err)
	assert.NotZero(t, magic)
	assert.NotZero(t, addr.Port)
	other, err := GetUniqueID()
	require.NoError(t, err)
	assert.NotEqual(t, id, other, "two ids must differ")

	var garbage UniqueID
	_, _, err = garbage.decode()
	assert.ErrorIs(t, err, errs.ErrInvalidArgument)
}

// connectAll joins n bootstraps at one rendezvous.
func connectAll(t *testing.T, n int, timeout time.Duration) []*bootstrap {
	t.Helper()
	id, err := GetUniqueID()
	require.NoError(t, err)
	boots := make([]*bootstrap, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { boots[r], errList[r] = connect(&id, r, n, r, timeout, nil) })
	}
	wg.Wait()
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() {
		for _, b := range boots {
			b.close(true)
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
			b, err := connect(&id, 0, 2, 0, 3*time.Second, nil)
			if b != nil {
				b.close(true)
			}
			first <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_, err = connect(&id, 1, 3, 1, 3*time.Second, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "3 ranks")
		assert.Error(t, <-first) // rank 0 never gets a complete clique
	})
	t.Run("duplicate rank", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := connect(&id, 0, 2, 0, time.Second, nil)
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_, err = connect(&id, 0, 2, 0, time.Second, nil)
		if err == nil || !assert.Contains(t, err.Error(), "twice") {
			// the goroutine's connect may have been the second one
			assert.Contains(t, (<-done).Error(), "twice")
			return
		}
		<-done
	})
	t.Run("wrong magic", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		id[24] ^= 0xff
		_, err = connect(&id, 0, 1, 0, time.Second, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "magic")
	})
	t.Run("timeout", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		start := time.Now()
		_, err = connect(&id, 0, 2, 0, 300*time.Millisecond, nil)
		assert.ErrorIs(t, err, errs.ErrTimeout)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("cancel", func(t *testing.T) {
		id, err := GetUniqueID()
		require.NoError(t, err)
		cancel := make(chan struct{})
		time.AfterFunc(100*time.Millisecond, func() { close(cancel) })
		_, err = connect(&id, 0, 2, 0, 10*time.Second, cancel)
		assert.ErrorIs(t, err, errs.ErrAborted)
	})
}

// A rank that leaves without a bye (its process died) fails the others'
// bootstraps promptly with a remote error naming it.
func TestBootstrapDropIsSeen(t *testing.T) {
	boots := connectAll(t, 3, 10*time.Second)
	seen := make(chan error, 2)
	for _, b := range boots[1:] {
		f := func(err error) { seen <- err }
		b.onDrop.Store(&f)
	}
	boots[0].conn.Close() // no bye: as if the process died
	for range 2 {
		select {
		case err := <-seen:
			assert.ErrorIs(t, err, errs.ErrRemote)
			assert.Contains(t, err.Error(), "rank 0")
		case <-time.After(5 * time.Second):
			t.Fatal("a dropped rank was not noticed")
		}
	}
	_, err := boots[1].AllGather(nil)
	assert.ErrorIs(t, err, errs.ErrRemote)
}
