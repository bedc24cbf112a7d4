package atomtest

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/errs"
)

// eachRank runs f for every rank concurrently and returns their errors.
func eachRank(n int, f func(r int) error) []error {
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errsOut[r] = f(r) })
	}
	wg.Wait()
	return errsOut
}

func TestAllGatherRounds(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		exs := Local(n)
		results := make([][][]byte, n)
		errsOut := eachRank(n, func(r int) error {
			require.Equal(t, r, exs[r].Rank())
			require.Equal(t, n, exs[r].NRanks())
			for round := range 20 {
				got, err := exs[r].AllGather([]byte(fmt.Sprintf("r%d-%d", r, round)))
				if err != nil {
					return err
				}
				for q := range n {
					if string(got[q]) != fmt.Sprintf("r%d-%d", q, round) {
						return fmt.Errorf("rank %d round %d: got %q from %d", r, round, got[q], q)
					}
				}
				results[r] = got
			}
			return nil
		})
		for _, err := range errsOut {
			require.NoError(t, err)
		}
		results[0][0][0] = 'X' // each caller owns its copies
		if n > 1 {
			require.Equal(t, byte('r'), results[1][0][0])
		}
	}
}

// Every caller gets its own descriptors: closing them leaves the others' and
// the original usable, and they name the same file.
func TestAllGatherFD(t *testing.T) {
	const n = 3
	exs := Local(n)
	files := make([]*os.File, n)
	for r := range files {
		f, err := os.CreateTemp(t.TempDir(), "fd")
		require.NoError(t, err)
		_, err = f.WriteString(fmt.Sprintf("rank%d", r))
		require.NoError(t, err)
		files[r] = f
	}
	got := make([][]int, n)
	for _, err := range eachRank(n, func(r int) error {
		fds, err := exs[r].AllGatherFD(int(files[r].Fd()))
		got[r] = fds
		return err
	}) {
		require.NoError(t, err)
	}
	seen := map[int]bool{}
	for r := range n {
		for q, fd := range got[r] {
			require.False(t, seen[fd], "descriptor %d handed out twice", fd)
			seen[fd] = true
			buf := make([]byte, 5)
			_, err := unix.Pread(fd, buf, 0)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("rank%d", q), string(buf))
			require.NoError(t, unix.Close(fd))
		}
	}
	for _, f := range files {
		_, err := f.Seek(0, 0) // still open after everyone closed their copies
		require.NoError(t, err)
		f.Close()
	}
}

func TestMissingRankTimesOut(t *testing.T) {
	exs := LocalWithTimeout(2, 50*time.Millisecond)
	start := time.Now()
	_, err := exs[0].AllGather([]byte("alone"))
	require.ErrorIs(t, err, errs.ErrTimeout)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestMixedRoundKindsAreMismatch(t *testing.T) {
	exs := LocalWithTimeout(2, time.Second)
	errsOut := eachRank(2, func(r int) error {
		if r == 0 {
			_, err := exs[0].AllGather([]byte("x"))
			return err
		}
		time.Sleep(10 * time.Millisecond)
		fds, err := exs[1].AllGatherFD(0)
		for _, fd := range fds {
			unix.Close(fd)
		}
		return err
	})
	require.ErrorIs(t, errsOut[0], errs.ErrTimeout)
	require.ErrorIs(t, errsOut[1], errs.ErrMismatch)
}
