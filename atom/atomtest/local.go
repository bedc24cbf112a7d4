package atomtest

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/config"
	"purlin/errs"
)

// Local returns n Exchanges for n ranks of one process, Exchange r being
// rank r. A rank waits for the others at most the PURLIN_TIMEOUT setting.
func Local(n int) []atom.Exchange { return LocalWithTimeout(n, config.Get().Timeout) }

// LocalWithTimeout is Local with its own bound on how long a rank waits
// for the others in one round; past it the call returns errs.ErrTimeout.
func LocalWithTimeout(n int, timeout time.Duration) []atom.Exchange {
	rv := &rendezvous{n: n, timeout: timeout, rounds: map[int]*round{}}
	exs := make([]atom.Exchange, n)
	for r := range exs {
		exs[r] = &localExchange{rv: rv, rank: r}
	}
	return exs
}

// rendezvous matches the ranks' calls by their sequence number.
type rendezvous struct {
	n       int
	timeout time.Duration
	mu      sync.Mutex
	rounds  map[int]*round // guarded by mu
}

// round is one collective call of the exchange: every rank deposits its
// value, the last one closes full, and the last one to leave deletes it.
type round struct {
	values [][]byte
	fds    []int // the rendezvous' own duplicates; closed by the last to leave
	isFD   bool
	came   int
	left   int
	full   chan struct{}
}

type localExchange struct {
	rv   *rendezvous
	rank int
	seq  int // this rank's next round; only its own goroutine uses it
}

func (e *localExchange) Rank() int   { return e.rank }
func (e *localExchange) NRanks() int { return e.rv.n }

// AllGather returns every rank's value in rank order, each a copy the
// caller owns.
func (e *localExchange) AllGather(mine []byte) ([][]byte, error) {
	rd, err := e.arrive(func(rd *round) error {
		rd.values[e.rank] = append([]byte(nil), mine...)
		return nil
	}, false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, e.rv.n)
	for r, v := range rd.values {
		out[r] = append([]byte(nil), v...)
	}
	e.leave(rd)
	return out, nil
}

// AllGatherFD returns every rank's descriptor in rank order, each a fresh
// duplicate the caller owns and must close; the caller keeps fd too.
func (e *localExchange) AllGatherFD(fd int) ([]int, error) {
	rd, err := e.arrive(func(rd *round) error {
		dup, err := unix.Dup(fd)
		if err != nil {
			return errs.New(errs.ErrSystem, "atomtest: dup fd %d of rank %d: %v", fd, e.rank, err)
		}
		rd.fds[e.rank] = dup
		return nil
	}, true)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, e.rv.n)
	for r, f := range rd.fds {
		dup, err := unix.Dup(f)
		if err != nil {
			for _, o := range out {
				unix.Close(o)
			}
			e.leave(rd)
			return nil, errs.New(errs.ErrSystem, "atomtest: dup fd of rank %d for rank %d: %v", r, e.rank, err)
		}
		out = append(out, dup)
	}
	e.leave(rd)
	return out, nil
}

// arrive deposits this rank's value in its next round and waits, bounded,
// until every rank has.
func (e *localExchange) arrive(deposit func(*round) error, isFD bool) (*round, error) {
	rv := e.rv
	seq := e.seq
	e.seq++
	rv.mu.Lock()
	rd := rv.rounds[seq]
	if rd == nil {
		rd = &round{values: make([][]byte, rv.n), fds: make([]int, rv.n), isFD: isFD, full: make(chan struct{})}
		rv.rounds[seq] = rd
	}
	if rd.isFD != isFD {
		rv.mu.Unlock()
		return nil, errs.New(errs.ErrMismatch, "atomtest: rank %d round %d: AllGather and AllGatherFD mixed", e.rank, seq)
	}
	if err := deposit(rd); err != nil {
		rv.mu.Unlock()
		return nil, err
	}
	rd.came++
	if rd.came == rv.n {
		close(rd.full)
	}
	rv.mu.Unlock()

	timer := time.NewTimer(rv.timeout)
	defer timer.Stop()
	select {
	case <-rd.full:
		return rd, nil
	case <-timer.C:
		return nil, errs.New(errs.ErrTimeout, "atomtest: rank %d round %d: %s",
			e.rank, seq, fmt.Sprintf("waited %v for %d ranks, %d came", rv.timeout, rv.n, e.countCame(rd)))
	}
}

func (e *localExchange) countCame(rd *round) int {
	e.rv.mu.Lock()
	defer e.rv.mu.Unlock()
	return rd.came
}

// leave releases a full round; the last rank out frees it.
func (e *localExchange) leave(rd *round) {
	rv := e.rv
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rd.left++
	if rd.left < rv.n {
		return
	}
	for _, f := range rd.fds {
		if rd.isFD {
			unix.Close(f)
		}
	}
	for seq, r := range rv.rounds {
		if r == rd {
			delete(rv.rounds, seq)
		}
	}
}
