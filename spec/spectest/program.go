package spectest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"purlin/spec"
)

// A Program is what the ranks of a communicator post, in order:
// point-to-point transfers, matched as NCCL matches them (the k-th send
// from one rank to another with the k-th receive there, however either
// side groups its calls), and collectives. Each rank cuts its own calls
// into groups.
type Program struct {
	NRanks int
	Events []Event
	// Groups[r] are rank r's group sizes in calls, in order (nil: each call alone).
	Groups [][]int
}

// Event is one step of a Program: Count elements of Type from rank From
// to rank To, or, when Calls is set (one call per rank), a collective.
type Event struct {
	From, To int
	Count    uint64
	Type     spec.DataType
	Calls    []*spec.Call
}

// Op is a rank's part in Program.Events[Event]: the send or the receive of
// a transfer (a transfer to self is both, the send first), or its call of
// a collective.
type Op struct {
	Event int
	Send  bool
}

// Bytes is the size of a transfer.
func (e Event) Bytes() uint64 { return e.Count * uint64(e.Type.Size()) }

// Call is rank r's call for its side of a transfer (buffers left to the caller).
func (e Event) Call(r, nranks int, send bool) spec.Call {
	c := spec.Call{Coll: spec.SendRecv, Type: e.Type, Count: e.Count, Rank: r, NRanks: nranks, IsSend: send, Peer: e.From}
	if send {
		c.Peer = e.To
	}
	return c
}

// Ops lists rank r's calls in program order.
func (p *Program) Ops(r int) []Op {
	var ops []Op
	for k, e := range p.Events {
		if e.Calls != nil {
			ops = append(ops, Op{Event: k})
			continue
		}
		if e.From == r {
			ops = append(ops, Op{Event: k, Send: true})
		}
		if e.To == r {
			ops = append(ops, Op{Event: k})
		}
	}
	return ops
}

// RankGroups cuts rank r's calls into its groups.
func (p *Program) RankGroups(r int) ([][]Op, error) {
	ops := p.Ops(r)
	var sizes []int
	if r < len(p.Groups) {
		sizes = p.Groups[r]
	}
	if sizes == nil {
		sizes = make([]int, len(ops))
		for i := range sizes {
			sizes[i] = 1
		}
	}
	var groups [][]Op
	for _, size := range sizes {
		if size < 1 || size > len(ops) {
			return nil, fmt.Errorf("spectest: rank %d: group of %d calls with %d left", r, size, len(ops))
		}
		groups = append(groups, ops[:size])
		ops = ops[size:]
	}
	if len(ops) > 0 {
		return nil, fmt.Errorf("spectest: rank %d: %d calls outside its groups", r, len(ops))
	}
	return groups, nil
}

// Launches are what rank r's groups launch, in order, as comm launches a
// group: each collective alone, in order, then all its transfers together
// (merged into one Plan).
func (p *Program) Launches(r int) ([][]Op, error) {
	groups, err := p.RankGroups(r)
	if err != nil {
		return nil, err
	}
	var out [][]Op
	for _, g := range groups {
		var transfers []Op
		for _, op := range g {
			if p.Events[op.Event].Calls != nil {
				out = append(out, []Op{op})
			} else {
				transfers = append(transfers, op)
			}
		}
		if len(transfers) > 0 {
			out = append(out, transfers)
		}
	}
	return out, nil
}

// OneGroup puts each rank's calls into a single group.
func (p *Program) OneGroup() {
	p.Groups = make([][]int, p.NRanks)
	for r := range p.NRanks {
		if k := len(p.Ops(r)); k > 0 {
			p.Groups[r] = []int{k}
		}
	}
}

// String describes the program, for failure messages.
func (p *Program) String() string {
	var b strings.Builder
	for k, e := range p.Events {
		if e.Calls != nil {
			fmt.Fprintf(&b, "%d: %s; ", k, e.Calls[0].Coll)
			continue
		}
		fmt.Fprintf(&b, "%d: %d->%d %d %s; ", k, e.From, e.To, e.Count, e.Type)
	}
	fmt.Fprintf(&b, "groups %v", p.Groups)
	return b.String()
}

// RandomProgram draws a program of events steps on nranks ranks: transfers
// of bytes() bytes (rounded down to their random type; to self among them,
// and runs to one peer, often of one shape), about one in ten a collective
// from coll when it is not nil, and per rank a random cut into groups of at
// most maxGroup calls (one more for a receive from self).
//
// A collective starts a group (comm launches a group's collectives before
// its transfers) and a receive from self shares its send's group. Groups
// follow program order, so the earliest unfinished step always has all its
// calls posted and running: the program cannot deadlock, whatever the sizes.
func RandomProgram(rng *rand.Rand, nranks, events, maxGroup int, bytes func() uint64, coll func() []*spec.Call) Program {
	p := Program{NRanks: nranks}
	for range events {
		if coll != nil && rng.IntN(10) == 0 {
			p.Events = append(p.Events, Event{Calls: coll()})
			continue
		}
		if last := len(p.Events) - 1; last >= 0 && p.Events[last].Calls == nil && rng.IntN(3) == 0 {
			e := p.Events[last] // the same pair again
			if rng.IntN(2) == 0 {
				e.Count = bytes() / uint64(e.Type.Size())
			}
			p.Events = append(p.Events, e)
			continue
		}
		t := spec.DataType(rng.IntN(int(spec.NumTypes)))
		p.Events = append(p.Events, Event{From: rng.IntN(nranks), To: rng.IntN(nranks), Count: bytes() / uint64(t.Size()), Type: t})
	}
	p.Groups = make([][]int, nranks)
	for r := range nranks {
		size := 0
		for _, op := range p.Ops(r) {
			e := p.Events[op.Event]
			selfRecv := e.Calls == nil && !op.Send && e.From == r
			if size > 0 && !selfRecv && (e.Calls != nil || size >= maxGroup || rng.IntN(2) == 0) {
				p.Groups[r] = append(p.Groups[r], size)
				size = 0
			}
			size++
		}
		if size > 0 {
			p.Groups[r] = append(p.Groups[r], size)
		}
	}
	return p
}

// Resized returns a copy of p whose transfers move bytes each (rounded
// down to their type): transfers of one shape, as a pipeline's are, which
// a datapath may plan once and must still run as separate calls.
func (p Program) Resized(bytes uint64) Program {
	p.Events = slices.Clone(p.Events)
	for k := range p.Events {
		if e := &p.Events[k]; e.Calls == nil {
			e.Count = bytes / uint64(e.Type.Size())
		}
	}
	return p
}

// A GroupingCase is a program whose ranks group the same calls
// differently, as NCCL allows.
type GroupingCase struct {
	Name    string
	Program Program
	// Fixed: the program's sizes are the case (zero-byte transfers among
	// others); else the caller sizes it with Resized.
	Fixed bool
	// Unblocked: a rank posts a send to itself in an earlier group than the
	// receive, so each send must complete alone: sizes that fit a staging
	// half (NCCL's send would wait as well).
	Unblocked bool
	// WholeGroup: a peer posts calls one at a time in an order that only a
	// group progressing as a whole serves, not one launched in rounds (the
	// k-th send to and receive from each peer together, as comm launches a
	// group larger than one launch holds).
	WholeGroup bool
}

// GroupingCases are the mixed groupings every datapath must match.
func GroupingCases() []GroupingCase {
	xfer := func(from, to int) Event { return Event{From: from, To: to, Type: spec.Float32} }
	prog := func(groups [][]int, evs ...Event) Program {
		return Program{NRanks: len(groups), Events: evs, Groups: groups}
	}
	// star: rank 0 sends two to every peer, or receives two from every
	// peer, in one group; the peers post one call at a time.
	star := func(n int, toRoot bool) Program {
		p := Program{NRanks: n, Groups: make([][]int, n)}
		for range 2 {
			for q := 1; q < n; q++ {
				if toRoot {
					p.Events = append(p.Events, xfer(q, 0))
				} else {
					p.Events = append(p.Events, xfer(0, q))
				}
			}
		}
		p.Groups[0] = []int{2 * (n - 1)}
		return p
	}
	// pairs: every rank sends to every rank (itself too) times times, each
	// rank's calls in one group: more than one launch holds from 4 ranks
	// and 2 times (nccl-tests' alltoallv with -m, torch's batched p2p).
	pairs := func(n, times int) Program {
		p := Program{NRanks: n}
		for range times {
			for from := range n {
				for to := range n {
					p.Events = append(p.Events, xfer(from, to))
				}
			}
		}
		p.OneGroup()
		return p
	}
	repeat := func(times int, evs ...Event) []Event {
		var out []Event
		for range times {
			out = append(out, evs...)
		}
		return out
	}
	allreduce := Event{Calls: make([]*spec.Call, 3)}
	for r := range allreduce.Calls {
		allreduce.Calls[r] = &spec.Call{Coll: spec.AllReduce, Type: spec.Int32, Op: spec.Op{Kind: spec.Sum}, Count: 3000, Rank: r, NRanks: 3}
	}
	zero := prog([][]int{{3, 1}, {1, 3}}, xfer(0, 1), xfer(0, 1), xfer(0, 1), xfer(0, 1))
	zero.Events[1].Count, zero.Events[3].Count = 1000, 10
	return []GroupingCase{
		{Name: "two sends in one group, two receives in one group", Program: prog([][]int{{2}, {2}}, xfer(0, 1), xfer(0, 1))},
		{Name: "two sends in one group, two receives alone", Program: prog([][]int{{2}, nil}, xfer(0, 1), xfer(0, 1))},
		{Name: "two sends alone, two receives in one group", Program: prog([][]int{nil, {2}}, xfer(0, 1), xfer(0, 1))},
		{Name: "three sends in one group, receives in two groups", Program: prog([][]int{{3}, {1, 2}}, xfer(0, 1), xfer(0, 1), xfer(0, 1))},
		{Name: "both directions in one group against calls alone", Program: prog([][]int{{4}, nil}, xfer(0, 1), xfer(1, 0), xfer(0, 1), xfer(1, 0))},
		{Name: "sends to every peer in one group, receivers one at a time, 4 ranks", Program: star(4, false)},
		{Name: "sends to every peer in one group, receivers one at a time, 8 ranks", Program: star(8, false)},
		{Name: "senders one at a time, receives from every peer in one group, 8 ranks", Program: star(8, true)},
		{Name: "zero-byte transfers among others", Program: zero, Fixed: true},
		{Name: "every pair four times in one group, 4 ranks", Program: pairs(4, 4)},
		{Name: "every pair twice in one group, 8 ranks", Program: pairs(8, 2)},
		{Name: "20 sends in one group, receives one at a time", Program: prog([][]int{{20}, nil}, repeat(20, xfer(0, 1))...)},
		{Name: "both directions 12 times in one group against calls alone", Program: prog([][]int{{24}, nil}, repeat(12, xfer(0, 1), xfer(1, 0))...)},
		// Rank 0: {self send, self recv, self send}, {self recv, send to 1, recv from 1}.
		{Name: "sends to self split across groups", Unblocked: true,
			Program: prog([][]int{{3, 3}, {2}}, xfer(0, 0), xfer(0, 0), xfer(0, 1), xfer(1, 0))},
		// Rank 0: {send}, {allreduce, send, send, recv}; rank 1 posts each
		// call alone; rank 2: {allreduce, send}.
		{Name: "a collective in a group of sends", WholeGroup: true,
			Program: prog([][]int{{1, 4}, nil, {2}}, xfer(0, 1), allreduce, xfer(0, 1), xfer(0, 1), xfer(1, 0), xfer(2, 1))},
	}
}
