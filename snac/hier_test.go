package snac_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// hierRank is one rank of a hierarchical run: its buffers and Program.
type hierRank struct {
	bufs [4][]byte // by snac.Buffer; BufNone stays nil
	prog *snac.Program
}

func (r *hierRank) span(s snac.Span) []byte {
	if s.Buf == snac.BufNone {
		return nil
	}
	return r.bufs[s.Buf][s.Off:]
}

// hierNet runs every rank's Program with a reference for each Phase: the
// ranks of a Phase's group meet, and the last to arrive computes every
// member's output with spectest.Expected (rounded to the type, as an Atom
// writes it), so each level's semantics are exactly the flat collective's.
type hierNet struct {
	nodes    snac.Nodes
	ranks    []*hierRank
	mu       sync.Mutex
	meetings map[string]*meeting
	mail     map[[3]int]chan []byte // (level, from, to)
}

type meeting struct {
	calls   []*spec.Call
	members []*hierRank
	spans   [][2]snac.Span
	arrived int
	done    chan struct{}
}

func newHierNet(nodes snac.Nodes, ranks []*hierRank) *hierNet {
	return &hierNet{nodes: nodes, ranks: ranks, meetings: map[string]*meeting{}, mail: map[[3]int]chan []byte{}}
}

// members are the global ranks of rank r's group at level, in group order.
func (n *hierNet) members(level snac.Level, r int) []int {
	var g []int
	switch level {
	case snac.LevelNode:
		for l := range n.nodes.Local {
			g = append(g, n.nodes.Node(r)*n.nodes.Local+l)
		}
	case snac.LevelRail:
		for k := range n.nodes.Count {
			g = append(g, k*n.nodes.Local+n.nodes.LocalRank(r))
		}
	}
	return g
}

func (n *hierNet) box(level snac.Level, from, to int) chan []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [3]int{int(level), from, to}
	if n.mail[k] == nil {
		n.mail[k] = make(chan []byte, 64)
	}
	return n.mail[k]
}

// global is the communicator rank of a Phase's peer.
func (n *hierNet) global(level snac.Level, r, peer int) int {
	if level == snac.LevelNode {
		return n.nodes.Node(r)*n.nodes.Local + peer
	}
	return peer
}

func (n *hierNet) run(r int) error {
	rk := n.ranks[r]
	seq := map[string]int{}
	ph := rk.prog.Phases
	for i := 0; i < len(ph); {
		j := i + 1
		for j < len(ph) && ph[j].Grouped {
			j++
		}
		// A group's sends go out first, so no receive in it waits for a
		// send behind it.
		for _, p := range ph[i:j] {
			if p.Call.Coll == spec.SendRecv && p.Call.IsSend {
				bytes := p.Call.Count * uint64(p.Call.Type.Size())
				n.box(p.Level, r, n.global(p.Level, r, p.Call.Peer)) <- append([]byte(nil), rk.span(p.Send)[:bytes]...)
			}
		}
		for _, p := range ph[i:j] {
			if p.Call.Coll == spec.SendRecv {
				if !p.Call.IsSend {
					select {
					case b := <-n.box(p.Level, n.global(p.Level, r, p.Call.Peer), r):
						copy(rk.span(p.Recv), b)
					case <-time.After(5 * time.Second):
						return fmt.Errorf("rank %d: %s receive from %d never came", r, p.Level, p.Call.Peer)
					}
				}
				continue
			}
			if err := n.meet(r, p, seq); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

func (n *hierNet) meet(r int, p snac.Phase, seq map[string]int) error {
	g := n.members(p.Level, r)
	key := fmt.Sprint(p.Level, g[0])
	key += fmt.Sprint("#", seq[key])
	seq[fmt.Sprint(p.Level, g[0])]++
	n.mu.Lock()
	m := n.meetings[key]
	if m == nil {
		m = &meeting{calls: make([]*spec.Call, len(g)), members: make([]*hierRank, len(g)), spans: make([][2]snac.Span, len(g)), done: make(chan struct{})}
		n.meetings[key] = m
	}
	c := p.Call
	m.calls[c.Rank], m.members[c.Rank], m.spans[c.Rank] = &c, n.ranks[r], [2]snac.Span{p.Send, p.Recv}
	m.arrived++
	last := m.arrived == len(g)
	n.mu.Unlock()
	if last {
		for q, c := range m.calls {
			if c.Coll != m.calls[0].Coll || c.NRanks != len(g) {
				return fmt.Errorf("group %s: rank %d issued %s, rank 0 %s", key, q, c.Coll, m.calls[0].Coll)
			}
		}
		inputs := make([][]byte, len(g))
		for q, c := range m.calls {
			in, _ := c.Extents()
			inputs[q] = append([]byte(nil), m.members[q].span(m.spans[q][0])[:in]...)
		}
		for q, o := range spectest.Expected(m.calls, inputs) {
			dst := m.members[q].span(m.spans[q][1])
			for k, b := range o.Data {
				if o.Covered[k] {
					dst[k] = b
				}
			}
		}
		close(m.done)
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("rank %d: %s group %s never met", r, p.Level, key)
	}
}

// hierCase is one collective call on every rank of a multi-node communicator.
type hierCase struct {
	coll    spec.Collective
	count   uint64
	typ     spec.DataType
	op      spec.OpKind
	root    int
	inPlace bool
}

// calls are every rank's call of c on nranks ranks, with Send and Recv as
// offsets into one arena per rank (in place: NCCL's in-place position).
func (c hierCase) calls(nranks int) []*spec.Call {
	calls := make([]*spec.Call, nranks)
	for r := range calls {
		op := spectest.OpFor(spectest.RankOp(spec.Op{Kind: c.op, Scalar: 0.75}, r), c.typ, nranks)
		call := &spec.Call{Coll: c.coll, Count: c.count, Type: c.typ, Op: op, Root: c.root, Rank: r, NRanks: nranks}
		if c.coll == spec.SendRecv { // pairs (0,1), (2,3), ... and the last odd rank to itself
			call.Peer = r ^ 1
			if call.Peer >= nranks {
				call.Peer = r
			}
			call.IsSend = r < call.Peer || call.Peer == r
		}
		calls[r] = call
	}
	return calls
}

func TestHierarchyMatchesFlatCollective(t *testing.T) {
	shapes := []snac.Nodes{{2, 1}, {1, 3}, {2, 2}, {3, 2}, {2, 3}, {2, 4}}
	colls := []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.AllGather, spec.AllToAll,
		spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter, spec.SendRecv}
	types := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int32, spec.Float16, spec.Uint8, spec.Float8e4m3}
	rng := rand.New(rand.NewPCG(11, 15))
	for _, nodes := range shapes {
		n := nodes.Count * nodes.Local
		for _, coll := range colls {
			for i := range 6 {
				c := hierCase{coll: coll, count: []uint64{0, 1, 5, 17, 64, 301}[i], typ: types[rng.IntN(len(types))],
					op: spec.OpKind(rng.IntN(int(spec.PreMulSum) + 1)), root: rng.IntN(n), inPlace: rng.IntN(2) == 0}
				if coll == spec.SendRecv {
					c.inPlace = false
				}
				if c.op == spec.Avg && !c.typ.IsFloat() {
					c.op = spec.Sum
				}
				name := fmt.Sprintf("%dx%d/%s/%d/%s/%s/root%d/inplace=%v", nodes.Count, nodes.Local, coll, c.count, c.typ, spec.Op{Kind: c.op}, c.root, c.inPlace)
				t.Run(name, func(t *testing.T) { runHier(t, nodes, c, rng) })
			}
		}
	}
}

func runHier(t *testing.T, nodes snac.Nodes, c hierCase, rng *rand.Rand) {
	n := nodes.Count * nodes.Local
	calls := c.calls(n)
	inputs := spectest.Inputs(rng, calls)
	want := spectest.Expected(calls, inputs)
	ranks := make([]*hierRank, n)
	for r, call := range calls {
		in, out := call.Extents()
		prog, err := snac.Hierarchy(call, nodes)
		require.NoError(t, err)
		rk := &hierRank{prog: prog}
		rk.bufs[snac.BufRecv] = make([]byte, out)
		rk.bufs[snac.BufScratch] = make([]byte, prog.Scratch)
		rk.bufs[snac.BufSend] = inputs[r]
		if c.inPlace && in > 0 && out > 0 { // the input at NCCL's in-place position of the output
			if call.Coll.Definition().In.Shape == spec.Packed && call.Coll.Definition().Out.Shape != spec.Packed {
				off, _ := call.OutPart(r, r)
				copy(rk.bufs[snac.BufRecv][off:], inputs[r])
				rk.bufs[snac.BufSend] = rk.bufs[snac.BufRecv][off:]
			} else if in >= out {
				buf := append([]byte(nil), inputs[r]...)
				rk.bufs[snac.BufSend], rk.bufs[snac.BufRecv] = buf, buf[:max(out, 0)]
				if call.Coll.Definition().In.Shape != spec.Packed && call.Coll.Definition().Out.Shape == spec.Packed {
					off, _ := call.InPart(r, r)
					rk.bufs[snac.BufRecv] = buf[off : off+out]
				}
			}
		}
		ranks[r] = rk
	}
	net := newHierNet(nodes, ranks)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = net.run(r) }()
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		_, out := calls[r].Extents()
		got := ranks[r].bufs[snac.BufRecv][:out]
		require.NoError(t, compareHier(calls, inputs, r, got, want[r]), "rank %d of %d nodes x %d", r, nodes.Count, nodes.Local)
	}
}

// compareHier accepts what the flat reference accepts, and for floating
// reductions the extra roundings of partial results the levels make: one
// per level, each at most an ulp of the sum of magnitudes.
func compareHier(calls []*spec.Call, inputs [][]byte, r int, got []byte, want spectest.Output) error {
	t := calls[r].Type
	if !t.IsFloat() || !calls[r].Coll.Reduces() {
		return spectest.Compare(t, got, want)
	}
	w := want
	w.Tol = append([]float64(nil), want.Tol...)
	in, _ := calls[0].Extents()
	size := uint64(t.Size())
	for i := range w.Tol {
		if !w.Covered[uint64(i)*size] {
			continue
		}
		src := i
		if off, _ := calls[r].InPart(r, r); calls[r].Coll.Definition().In.Shape == spec.Scattered {
			src = i + int(off/size)
		}
		if uint64(src)*size >= in {
			continue
		}
		var mag float64
		for q, c := range calls {
			mag += math.Abs(numeric.GetFloat64(t, inputs[q], src)) * max(1, math.Abs(c.Op.Scalar))
		}
		if calls[r].Op.Kind == spec.Prod {
			mag = math.Max(mag, 1) * math.Pow(2, float64(len(calls))) // partial products
		}
		w.Tol[i] += 3 * ulp(t, mag)
	}
	return spectest.Compare(t, got, w)
}

func ulp(t spec.DataType, x float64) float64 {
	man := map[spec.DataType]int{spec.Float16: 10, spec.Bfloat16: 7, spec.Float8e4m3: 3, spec.Float8e5m2: 2, spec.Float32: 23, spec.Float64: 52}[t]
	if x == 0 {
		return 0
	}
	_, e := math.Frexp(x)
	return math.Ldexp(1, e-1-man)
}

func TestHierarchyRefusesWhatItCannotServe(t *testing.T) {
	nodes := snac.Nodes{Count: 2, Local: 2}
	for _, c := range []spec.Call{
		{Coll: spec.AllGatherV, Counts: []uint64{1, 1, 1, 1}, Displs: []uint64{0, 1, 2, 3}, Type: spec.Float32},
		{Coll: spec.AllGatherColumns, Count: 4, Rows: 2, Type: spec.Float32},
		{Coll: spec.AllReduce, Count: 8, Type: spec.Int32, Op: spec.Op{Kind: spec.Avg}},
		{Coll: spec.AllReduce, Count: 8, Type: spec.Float32, Epilogue: spec.Epilogue{Kind: spec.EpilogueResidualAdd, Hidden: 4}},
	} {
		c.NRanks = 4
		_, err := snac.Hierarchy(&c, nodes)
		require.ErrorContains(t, err, "across nodes", "%s", c.Coll)
	}
}
