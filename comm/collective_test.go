package comm

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/spec"
	"purlin/spec/spectest"
)

// shape is one collective call as every rank issues it.
type shape struct {
	coll   spec.Collective
	count  uint64
	dtype  spec.DataType
	op     spec.OpKind
	root   int
	rows   uint64     // column-block collectives: a divisor of count
	matrix [][]uint64 // V collectives: matrix[p][q] elements from p to q (AllToAllV) or counts[p] in row 0
}

func randomShape(rng *rand.Rand, coll spec.Collective, n int, count uint64) shape {
	dtype := spec.DataType(rng.IntN(int(spec.NumTypes)))
	op := spectest.OpFor(spec.Op{Kind: spec.OpKind(rng.IntN(int(spec.NumOps)))}, dtype, n)
	s := shape{coll: coll, count: count, dtype: dtype, op: op.Kind, root: rng.IntN(n)}
	if coll.Columns() {
		s.rows = 1 + rng.Uint64N(max(count, 1))
		for count%s.rows != 0 {
			s.rows--
		}
	}
	s.matrix = make([][]uint64, n)
	for p := range n {
		s.matrix[p] = make([]uint64, n)
		for q := range n {
			if count > 0 {
				s.matrix[p][q] = rng.Uint64N(count + 1)
			}
		}
	}
	return s
}

// call builds rank r's call of s (buffers filled in later).
func (s shape) call(r, n int) *spec.Call {
	c := &spec.Call{Coll: s.coll, Count: s.count, Type: s.dtype, Op: spec.Op{Kind: s.op}, Root: s.root, Rows: s.rows, Rank: r, NRanks: n}
	packed := func(counts []uint64) []uint64 {
		displs := make([]uint64, len(counts))
		var off uint64
		for i, k := range counts {
			displs[i] = off
			off += k
		}
		return displs
	}
	switch s.coll {
	case spec.AllGatherV, spec.ReduceScatterV:
		c.Counts = s.matrix[0]
		c.Displs = packed(c.Counts)
	case spec.AllToAllMatrix: // rank p's slice for q lands in q's output after those of ranks < p, one element apart
		n := len(s.matrix)
		c.Counts, c.Displs = make([]uint64, n*n), make([]uint64, n*n)
		for q := range n {
			var at uint64
			for p := range n {
				c.Counts[p*n+q], c.Displs[p*n+q] = s.matrix[p][q], at+1
				at += s.matrix[p][q] + 1
			}
		}
	case spec.AllToAllV:
		c.SendCounts = s.matrix[r]
		c.RecvCounts = make([]uint64, n)
		for p := range n {
			c.RecvCounts[p] = s.matrix[p][r]
		}
		c.SendDispls, c.RecvDispls = packed(c.SendCounts), packed(c.RecvCounts)
	}
	return c
}

// runShapes issues every shape in order on every rank (each rank from its
// own goroutine, or all ranks from one thread inside groups), then checks
// every rank's outputs against spectest's reference.
func runShapes(t *testing.T, comms []*Comm, shapes []shape, rng *rand.Rand, grouped bool) {
	t.Helper()
	runShapesOn(t, comms, shapes, rng, grouped, func(int, int) uintptr { return 0 })
}

// runShapesOn is runShapes with rank r's call i issued on stream(r, i).
func runShapesOn(t *testing.T, comms []*Comm, shapes []shape, rng *rand.Rand, grouped bool, stream func(r, i int) uintptr) {
	t.Helper()
	n := len(comms)
	type issued struct {
		calls  []*spec.Call
		inputs [][]byte
		recv   []cBuffer
	}
	all := make([]issued, len(shapes))
	for i, s := range shapes {
		is := issued{calls: make([]*spec.Call, n), recv: make([]cBuffer, n)}
		for r := range n {
			is.calls[r] = s.call(r, n)
		}
		is.inputs = spectest.Inputs(rng, is.calls)
		for r, c := range is.calls {
			send := newBuffer(t, len(is.inputs[r]))
			copy(send.bytes(), is.inputs[r])
			_, out := c.Extents()
			is.recv[r] = newBuffer(t, int(out))
			for k := range is.recv[r].bytes() {
				is.recv[r].bytes()[k] = 0xa5
			}
			c.Send, c.Recv = send.addr(), is.recv[r].addr()
		}
		all[i] = is
	}
	issue := func(r int) {
		for i := range shapes {
			call := *all[i].calls[r]
			require.NoError(t, comms[r].Collective(&call, stream(r, i)), "rank %d call %d %s", r, i, call.String())
		}
	}
	if grouped {
		onThread(func() {
			for i := range shapes {
				require.NoError(t, GroupStart())
				for r := range n {
					call := *all[i].calls[r]
					require.NoError(t, comms[r].Collective(&call, stream(r, i)))
				}
				require.NoError(t, GroupEnd())
			}
		})
	} else {
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() { issue(r) })
		}
		wg.Wait()
	}
	for r, c := range comms {
		require.NoError(t, c.Synchronize(), "rank %d", r)
	}
	for i, is := range all {
		want := spectest.Expected(is.calls, is.inputs)
		for r := range n {
			_, out := is.calls[r].Extents()
			got := is.recv[r].bytes()[:out]
			require.NoError(t, spectest.Compare(is.calls[r].Type, got, want[r]), "call %d %s rank %d", i, is.calls[r].String(), r)
		}
	}
}

var collectives = []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.AllToAll,
	spec.AllGatherV, spec.ReduceScatterV, spec.AllToAllV, spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter,
	spec.AllGatherColumns, spec.ReduceScatterColumns, spec.AllToAllMatrix}

// Every collective, every regime, random types and ops, 1..8 ranks.
func TestEveryCollective(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			comms := startComms(t, n, testConfig())
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			counts := []uint64{0, 1, 13, 300, 5000}
			if n <= 4 {
				counts = append(counts, 40000)
			}
			var shapes []shape
			for _, coll := range collectives {
				for _, k := range counts {
					shapes = append(shapes, randomShape(rng, coll, n, k))
				}
			}
			runShapes(t, comms, shapes, rng, false)
		})
	}
}

// One thread drives all ranks through groups (NCCL's -g N pattern): init
// in a group, then every call in a group.
func TestOneThreadDrivesAllRanks(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			id, err := GetUniqueID()
			require.NoError(t, err)
			comms := make([]*Comm, n)
			onThread(func() {
				require.NoError(t, GroupStart())
				for r := range n {
					comms[r], err = InitRank(n, id, r, testConfig(), r)
					require.NoError(t, err)
					require.Equal(t, "", comms[r].AtomName(), "init must wait for GroupEnd")
				}
				require.NoError(t, GroupEnd())
			})
			t.Cleanup(func() { destroyAll(comms) })
			for _, c := range comms {
				require.Equal(t, "host", c.AtomName())
			}
			rng := rand.New(rand.NewPCG(uint64(n), 2))
			var shapes []shape
			for i := range 30 {
				shapes = append(shapes, randomShape(rng, collectives[i%len(collectives)], n, rng.Uint64N(3000)))
			}
			runShapes(t, comms, shapes, rng, true)
		})
	}
}

// Many consecutive mixed calls on one communicator (the epoch and parity
// rules, and the greetings of pairs a V collective leaves silent, across
// calls of different kinds and regimes).
func TestManyMixedCalls(t *testing.T) {
	const n = 3
	comms := startComms(t, n, testConfig())
	rng := rand.New(rand.NewPCG(7, 7))
	var shapes []shape
	for range 120 {
		coll := collectives[rng.IntN(len(collectives))]
		shapes = append(shapes, randomShape(rng, coll, n, []uint64{0, 3, 100, 2000, 20000}[rng.IntN(5)]))
	}
	runShapes(t, comms, shapes, rng, false)
}

// One communicator on several streams: as in NCCL, a communicator's calls
// run in the order each rank issued them, whatever streams they went to, so
// ranks that spread the same calls over streams differently still agree.
// Rank 0 alternates two streams, rank 1 the same two the other way round,
// rank 2 its communicator's own queue and one stream.
func TestCommOnTwoStreams(t *testing.T) {
	const n = 3
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprint("grouped=", grouped), func(t *testing.T) {
			cfg := testConfig()
			cfg.Timeout = 5 * time.Second // before the fix the calls hang or mismatch; fail fast
			comms := startComms(t, n, cfg)
			streams := make([][2]uintptr, n)
			for r := range n {
				streams[r] = [2]uintptr{NewHostStream(), NewHostStream()}
			}
			streams[2][0] = 0
			t.Cleanup(func() {
				for r := range n {
					for _, s := range streams[r] {
						if s != 0 {
							require.NoError(t, DestroyHostStream(s))
						}
					}
				}
			})
			rng := rand.New(rand.NewPCG(11, 12))
			var shapes []shape
			for range 60 {
				coll := collectives[rng.IntN(len(collectives))]
				shapes = append(shapes, randomShape(rng, coll, n, []uint64{0, 3, 100, 2000, 20000}[rng.IntN(5)]))
			}
			runShapesOn(t, comms, shapes, rng, grouped, func(r, i int) uintptr {
				return streams[r][(i+r)%2]
			})
		})
	}
}
