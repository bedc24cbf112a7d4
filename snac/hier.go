package snac

import (
	"purlin/errs"
	"purlin/spec"
)

// Nodes is how a communicator's ranks lie on servers: Count servers
// ("nodes") of Local ranks each, the ranks of one node consecutive (rank =
// node*Local + local), as launchers number them. Inside a node the ranks
// share NVLink and Purlin's own Plans; between nodes they reach each other
// only through a network.
type Nodes struct {
	Count, Local int
}

// Node is the node rank lies on; LocalRank its index there.
func (n Nodes) Node(rank int) int      { return rank / n.Local }
func (n Nodes) LocalRank(rank int) int { return rank % n.Local }

// Level says which ranks a Phase joins.
type Level uint8

const (
	// LevelNode: the ranks of one node, through a node-local communicator
	// (Purlin's Plans). Call.Rank and NRanks are the local rank and Local.
	LevelNode Level = iota
	// LevelRail: the ranks of one local index, one per node (a rail),
	// through the network. Call.Rank and NRanks are the node and Count.
	LevelRail
	// LevelWorld: a point-to-point transfer between any two ranks through
	// the network. Call.Rank, NRanks and Peer are the communicator's.
	LevelWorld
)

var levelNames = [...]string{"node", "rail", "world"}

func (l Level) String() string { return levelNames[l] }

// Buffer names the memory a hierarchical call's Phases address: the
// caller's input and output, and scratch the communicator provides
// (Program.Scratch bytes of it, reused by the next call).
type Buffer uint8

const (
	BufNone Buffer = iota // an address the Phase's call does not use (0)
	BufSend
	BufRecv
	BufScratch
)

var bufferNames = [...]string{"none", "send", "recv", "scratch"}

func (b Buffer) String() string { return bufferNames[b] }

// Span is a byte offset into a Buffer.
type Span struct {
	Buf Buffer
	Off uint64
}

// Phase is one call of a hierarchical Program: Call (without addresses) at
// Level, reading Send and writing Recv. Phases run in order on the caller's
// stream; a Phase with Grouped set is issued in one group with the Phase
// before it (the same Level), as ncclGroupStart/End join calls. A group
// whose first Phase has Beside set writes nothing the Phases before it read
// or write, and reads nothing they write: it may run beside them, on a
// stream of its own, the Program ending after both.
type Phase struct {
	Level      Level
	Grouped    bool
	Beside     bool
	Call       spec.Call
	Send, Recv Span
}

// Program is one rank's part of a call on a communicator that spans nodes:
// its Phases, in the order every rank of each group issues them, and the
// scratch bytes they use.
type Program struct {
	Phases  []Phase
	Scratch uint64
}

// Hierarchy derives rank call.Rank's Program for call (validated, with the
// communicator's Rank and NRanks) on nodes. As a single node's Plans, it
// follows from the collective's layouts and consume op:
//
//   - reduce, packed -> packed (AllReduce): a node-local ReduceScatter of
//     Local pieces, an all-reduce of each piece on its rail, a node-local
//     AllGather;
//   - reduce, scattered -> packed (ReduceScatter): a node-local
//     ReduceScatterColumns (node n's slices are row n of a Count x Local
//     matrix of slices) leaves each rank its slice of every node, reduced
//     over its node; a rail ReduceScatter finishes it;
//   - copy, packed -> scattered (AllGather): a rail AllGather, then a
//     node-local AllGatherColumns into the output;
//   - copy, scattered -> transposed (AllToAll): per destination node, a
//     node-local AllToAll brings each slice to the rank of its destination's
//     rail; a rail AllToAll delivers them;
//   - the rooted layouts: Broadcast scatters the root's buffer over the
//     root node's ranks and each rail broadcasts its piece; Reduce reduces
//     pieces in every node, reduces each on its rail to the root's node and
//     gathers them at the root; Gather and Scatter go through the root's rail;
//   - Send and Recv: on the node, or between the two ranks (LevelWorld);
//   - the V forms of AllGather and ReduceScatter: per node, a grouped V
//     collective for each other node's ranks, the rail's V collective of
//     every node's rank of this local index;
//   - the column-block collectives: a rail AllGather of each rank's block
//     into scratch, then per source node a node-local AllGatherColumns
//     into that node's columns of the output (a matrix row wider than the
//     node's blocks: Call.Width); a ReduceScatterColumns the other way;
//   - the all-to-alls sized per pair (AllToAllV, whose counts each rank
//     alone knows, and AllToAllMatrix): a node-local AllToAllV of the pairs
//     within the node, then one network group of the sends and receives of
//     the pairs across nodes.
//
// So every byte crosses the network once, spread over all rails (a pair's
// over the rails of its two ranks). An AllReduce with an epilogue splits
// its pieces in whole rows, reduces them into scratch and gathers them
// from there with the epilogue (an AllGatherV's, spec.Epilogue): each rank
// applies it to every row of its own output as it arrives, as on one node.
// Avg of an integer type sums on the rails first (mean). What it cannot
// serve (another collective's epilogue) is refused with an error naming it.
func Hierarchy(call *spec.Call, nodes Nodes) (*Program, error) {
	h, err := newHier(call, nodes)
	if err != nil {
		return nil, err
	}
	d := call.Coll.Definition()
	pairs := call.Coll.PairCounts() || call.Coll.Matrix() // sizes per pair of ranks
	// The network has no all-to-all sized per pair, no epilogue and no
	// column blocks: a node's phase serves them even of one rank.
	local := pairs || call.Epilogue.Kind != 0 || call.Coll.Columns()
	switch in, out := d.In, d.Out; {
	case nodes.Count == 1 || nodes.Local == 1 && !local:
		return whole(call, nodes), nil
	case integerMean(call):
		h.mean()
	case pairs:
		h.pairs()
	case call.Coll == spec.SendRecv:
		h.sendRecv()
	case out.Columns:
		h.allGatherColumns()
	case in.Columns:
		h.reduceScatterColumns()
	case call.Coll.Vectored() && d.Consume == spec.ConsumeCopy && in.Shape == spec.Packed && out.Shape == spec.Scattered:
		h.allGatherParts()
	case call.Coll.Vectored() && d.Consume == spec.ConsumeReduce && in.Shape == spec.Scattered && out.Shape == spec.Packed:
		h.reduceScatterParts()
	case d.Consume == spec.ConsumeReduce && in.Shape == spec.Packed && !in.Rooted && out.Shape == spec.Packed && !out.Rooted:
		h.allReduce()
	case d.Consume == spec.ConsumeReduce && in.Shape == spec.Scattered && out.Shape == spec.Packed:
		h.reduceScatter()
	case d.Consume == spec.ConsumeCopy && in.Shape == spec.Packed && !in.Rooted && out.Shape == spec.Scattered && !out.Rooted:
		h.allGather()
	case d.Consume == spec.ConsumeCopy && in.Shape == spec.Scattered && out.Shape == spec.Transposed:
		h.allToAll()
	case d.Consume == spec.ConsumeCopy && in.Rooted && in.Shape == spec.Packed:
		h.broadcast()
	case d.Consume == spec.ConsumeReduce && out.Rooted:
		h.reduce()
	case d.Consume == spec.ConsumeCopy && out.Rooted:
		h.gather()
	case d.Consume == spec.ConsumeCopy && in.Rooted:
		h.scatter()
	default:
		return nil, unsupported(call, "its %s -> %s layouts", d.In, d.Out)
	}
	return &h.prog, nil
}

// newHier checks call against nodes and what the Programs serve, and
// starts rank call.Rank's Program.
func newHier(call *spec.Call, nodes Nodes) (*hier, error) {
	if nodes.Local < 1 || nodes.Count < 1 || nodes.Count*nodes.Local != call.NRanks {
		return nil, errs.New(errs.ErrInternal, "snac.Hierarchy: %d nodes of %d ranks for %d ranks", nodes.Count, nodes.Local, call.NRanks)
	}
	if nodes.Local > MaxRanks {
		return nil, errs.New(errs.ErrInvalidUsage, "%s: %d ranks on one node; Purlin serves at most %d", call.Coll, nodes.Local, MaxRanks)
	}
	switch {
	case call.Epilogue.Kind != 0 && call.Coll != spec.AllReduce:
		return nil, unsupported(call, "an epilogue")
	case integerMean(call) && call.Type.Size() == 1 && call.NRanks > 255>>b2u(call.Type.IsSigned()):
		return nil, unsupported(call, "Avg of %s over %d ranks (more than the type holds)", call.Type, call.NRanks)
	}
	h := &hier{call: *call, nodes: nodes, node: nodes.Node(call.Rank), local: nodes.LocalRank(call.Rank), size: uint64(call.Type.Size()), grain: 1, chunkK: 1}
	if call.Epilogue.Kind != 0 {
		h.grain = call.Epilogue.Hidden
	}
	return h, nil
}

// Chunkable reports whether a call across nodes can run as chunks of
// consecutive elements of its parts (HierarchyChunk): parts contiguous in
// both buffers, unrooted where they are scattered (AllReduce, Broadcast,
// Reduce, AllGather, ReduceScatter, AllToAll, AllGatherV, ReduceScatterV).
func Chunkable(c *spec.Call) bool {
	d := c.Coll.Definition()
	in, out := d.In, d.Out
	plain := func(l spec.Layout) bool { return !l.Columns && !l.Matrix && (!l.V || !c.Coll.PairCounts()) }
	switch {
	case !plain(in) || !plain(out) || c.Coll == spec.SendRecv || integerMean(c):
		return false
	case in.Shape == spec.Packed && out.Shape == spec.Packed:
		return true
	case out.Shape == spec.Transposed:
		return in.Shape == spec.Scattered && !in.Rooted && !in.V
	}
	return in.Shape != spec.Transposed && !in.Rooted && !out.Rooted && (in.Shape == spec.Packed) != (out.Shape == spec.Packed)
}

// LargestPart is the elements of call's largest part, equal on every rank:
// Count, or the largest of a V form's Counts. A pipelined call's chunk
// count follows from it.
func LargestPart(c *spec.Call) uint64 {
	if !c.Coll.Vectored() || c.Coll.PairCounts() {
		return c.Count
	}
	var most uint64
	for _, n := range c.Counts {
		most = max(most, n)
	}
	return most
}

// MaxChunks bounds a pipelined call's chunks (larger chunks beyond).
const MaxChunks = 1024

// Chunks is how many chunks a call across nodes runs in with network chunks
// of chunk bytes (PURLIN_NET_CHUNK; 0: none): 1 (whole) unless it is
// Chunkable and its largest part is at least two chunks; at most MaxChunks,
// and no more than the largest part's grains.
func Chunks(c *spec.Call, chunk uint64) int {
	elems := LargestPart(c)
	bytes := elems * uint64(c.Type.Size())
	if !Chunkable(c) || chunk == 0 || bytes/2 < chunk {
		return 1
	}
	grains := elems / (Grain(c) / uint64(c.Type.Size()))
	return int(min((bytes+chunk-1)/chunk, MaxChunks, grains))
}

// ChunkOf is chunk i of k of a part of count elements of call: elements
// [lo, lo+n), starting on whole grains (Grain), the last chunk to the end.
// A part of fewer grains than chunks has empty chunks.
func ChunkOf(call *spec.Call, count uint64, i, k int) (lo, n uint64) {
	a := Grain(call) / uint64(call.Type.Size())
	units := count / a
	lo = units * uint64(i) / uint64(k) * a
	hi := units * uint64(i+1) / uint64(k) * a
	if i == k-1 {
		hi = count
	}
	return lo, hi - lo
}

// HierarchyChunk derives rank call.Rank's Program for chunk i of k of each
// of the call's parts (ChunkOf), a chunk of a pipelined call (Chunkable).
// Its Spans address the whole call's buffers. Where every part is the
// whole buffer (AllReduce, Broadcast, Reduce) the chunk is the call of
// those elements, its epilogue's buffers advanced to them. Where each rank
// has a block of a scattered side, the chunk is those elements of every
// block: AllGather's rail gathers the chunk of every node's rank of its
// index into scratch, and per source node the node gathers its ranks'
// copies into their blocks (AllGatherV); ReduceScatter the other way; the
// V forms likewise, each part cut into k chunks of its own.
func HierarchyChunk(call *spec.Call, nodes Nodes, i, k int) (*Program, error) {
	d := call.Coll.Definition()
	if !Chunkable(call) || i < 0 || i >= k {
		return nil, errs.New(errs.ErrInternal, "snac.HierarchyChunk: %s has no chunk %d of %d", call.Coll, i, k)
	}
	lo, n := ChunkOf(call, call.Count, i, k)
	if d.In.Shape == spec.Packed && d.Out.Shape == spec.Packed {
		sub := *call
		sub.Count, sub.Epilogue = n, call.Epilogue.From(lo, call.Type)
		prog, err := Hierarchy(&sub, nodes)
		if err != nil {
			return nil, err
		}
		for i := range prog.Phases {
			for _, sp := range []*Span{&prog.Phases[i].Send, &prog.Phases[i].Recv} {
				if sp.Buf == BufSend || sp.Buf == BufRecv {
					sp.Off += lo * uint64(call.Type.Size())
				}
			}
		}
		return prog, nil
	}
	h, err := newHier(call, nodes)
	if err != nil {
		return nil, err
	}
	h.chunkI, h.chunkK = i, k
	switch d.Out.Shape {
	case spec.Scattered:
		h.allGatherParts()
	case spec.Transposed:
		h.allToAllChunk(lo, n)
	default:
		h.reduceScatterParts()
	}
	return &h.prog, nil
}

// allToAllChunk: elements [lo, lo+n) of every slice. Per destination node
// m, in one group, the node exchanges those of row m: local rank l takes
// from each rank j of its node the chunk of its slice for rank (m, l),
// into scratch row m (L chunks of n). Then, in one network group, rank l
// sends row m's chunks to rank (m, l), one send each, and receives from
// rank (m, l) of every node the chunks of the slices for it from node m's
// ranks, each in place in its slice of the output: the chunk of one slice
// a message, so that no tail copy is needed. Its own node's row takes the
// same way, a send to itself, so that no step of the node writes the
// output (the input may be the output: in place).
func (h *hier) allToAllChunk(lo, n uint64) {
	c, k, l := h.call.Count, h.nodes.Count, h.nodes.Local
	for m := range k {
		p := h.phase(LevelNode, spec.AllToAllV, 0, h.at(BufSend, 0), h.at(BufScratch, uint64(m*l)*n))
		v := &p.Call
		v.SendCounts, v.SendDispls = make([]uint64, l), make([]uint64, l)
		v.RecvCounts, v.RecvDispls = make([]uint64, l), make([]uint64, l)
		for j := range l {
			v.SendCounts[j], v.SendDispls[j] = n, uint64(m*l+j)*c+lo
			v.RecvCounts[j], v.RecvDispls[j] = n, uint64(j)*n
		}
		p.Grouped = m > 0
	}
	grouped := false
	for m := range k {
		peer := m*l + h.local
		for j := range l {
			s := h.phase(LevelWorld, spec.SendRecv, n, h.at(BufScratch, uint64(m*l+j)*n), Span{})
			s.Call.Peer, s.Call.IsSend, s.Grouped = peer, true, grouped
			r := h.phase(LevelWorld, spec.SendRecv, n, Span{}, h.at(BufRecv, uint64(m*l+j)*c+lo))
			r.Call.Peer, r.Grouped = peer, true
			grouped = true
		}
	}
	h.scratch(uint64(k*l) * n * h.size)
}

// whole is the Program of a call that one level serves alone: one rank a
// node (the network carries it as it is) or one node (its Plans do).
func whole(call *spec.Call, nodes Nodes) *Program {
	p := Phase{Level: LevelRail, Call: *call, Send: Span{BufSend, 0}, Recv: Span{BufRecv, 0}}
	switch {
	case nodes.Count == 1:
		p.Level = LevelNode
	case call.Coll == spec.SendRecv:
		p.Level = LevelWorld
	}
	return &Program{Phases: []Phase{p}}
}

func unsupported(call *spec.Call, format string, args ...any) error {
	return errs.New(errs.ErrInvalidUsage, "%s across nodes: Purlin cannot serve "+format+" yet", append([]any{call.Coll}, args...)...)
}

// hier builds one rank's Program.
type hier struct {
	call        spec.Call // a copy: the caller's (on its stack in the C API) does not escape
	nodes       Nodes
	node, local int
	size        uint64
	grain       uint64 // the elements pieces are whole multiples of: 1, or an epilogue's row
	// chunkI of chunkK: the chunk of each part a V form's Program moves
	// (HierarchyChunk; 0 of 1: the whole call).
	chunkI, chunkK int
	prog           Program
}

// phase appends a Phase of coll at level: a copy of the caller's call with
// the group's rank and size, count elements, reading send and writing recv.
func (h *hier) phase(level Level, coll spec.Collective, count uint64, send, recv Span) *Phase {
	c := spec.Call{Coll: coll, Count: count, Type: h.call.Type, Op: h.call.Op}
	switch level {
	case LevelNode:
		c.Rank, c.NRanks = h.local, h.nodes.Local
	case LevelRail:
		c.Rank, c.NRanks = h.node, h.nodes.Count
		// The node-local phase applied the op's scalar or mean already:
		// a rail only adds (or keeps) partial results.
		if c.Op.Kind == spec.PreMulSum {
			c.Op = spec.Op{Kind: spec.Sum}
		}
	default:
		c.Rank, c.NRanks = h.call.Rank, h.call.NRanks
	}
	h.prog.Phases = append(h.prog.Phases, Phase{Level: level, Call: c, Send: send, Recv: recv})
	return &h.prog.Phases[len(h.prog.Phases)-1]
}

func (h *hier) scratch(bytes uint64) { h.prog.Scratch = max(h.prog.Scratch, bytes) }

// piece splits count elements, in grains, over Local ranks: piece i
// starts at element off and holds n (the first pieces a grain more).
func (h *hier) piece(i int) (off, n uint64) {
	l, g := uint64(h.nodes.Local), h.grain
	q, r := h.call.Count/g/l, h.call.Count/g%l
	k := uint64(i)
	return (k*q + min(k, r)) * g, (q + b2u(k < r)) * g
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// pieceLists are the counts and offsets (elements) of every piece, as a
// V collective over the node's ranks takes them.
func (h *hier) pieceLists() (counts, displs []uint64) {
	counts, displs = make([]uint64, h.nodes.Local), make([]uint64, h.nodes.Local)
	for i := range counts {
		displs[i], counts[i] = h.piece(i)
	}
	return counts, displs
}

func (h *hier) at(buf Buffer, elems uint64) Span { return Span{buf, elems * h.size} }

func (h *hier) sendRecv() {
	c := &h.call
	if h.nodes.Node(c.Peer) == h.node {
		p := h.phase(LevelNode, spec.SendRecv, c.Count, h.at(BufSend, 0), h.at(BufRecv, 0))
		p.Call.Peer, p.Call.IsSend = h.nodes.LocalRank(c.Peer), c.IsSend
		return
	}
	p := h.phase(LevelWorld, spec.SendRecv, c.Count, h.at(BufSend, 0), h.at(BufRecv, 0))
	p.Call.Peer, p.Call.IsSend = c.Peer, c.IsSend
}

// integerMean reports whether call takes the mean of an integer type, whose
// truncating division must follow the whole sum: the floats' mean in two
// steps (the node's, then the rail's) would truncate each node's sum.
func integerMean(call *spec.Call) bool {
	return call.Coll.Reduces() && call.Op.Kind == spec.Avg && !call.Type.IsFloat()
}

// mean serves an integerMean: rail l sums the whole input of every node's
// rank l into scratch (a Reduce to the root's node), then the node runs the
// call itself, this node's part of it, on those sums, its Avg dividing by
// the communicator's rank count (spec.Op.Divisor), as the flat collective
// does. The input crosses the network whole on every rail, Local times the
// bytes of the other Programs: the price of a rare call, paid for results
// bit for bit those of the flat collective.
func (h *hier) mean() {
	c := &h.call
	in, _ := c.Extents()
	rn, rl := h.roots()
	sum := h.phase(LevelRail, spec.AllReduce, in/h.size, h.at(BufSend, 0), h.at(BufScratch, 0))
	sum.Call.Op = spec.Op{Kind: spec.Sum}
	if c.Coll == spec.Reduce {
		sum.Call.Coll, sum.Call.Root = spec.Reduce, rn
	}
	h.scratch(in)
	var p *Phase
	switch d := c.Coll.Definition(); {
	case c.Coll == spec.Reduce && h.node != rn:
		return
	case d.In.Columns:
		st := c.InStride()
		p = h.phase(LevelNode, c.Coll, c.Count, Span{BufScratch, uint64(h.node*h.nodes.Local) * st.Row}, h.at(BufRecv, 0))
		p.Call.Rows, p.Call.Width = c.Rows, st.Pitch/h.size
	case c.Coll.Vectored():
		p = h.phase(LevelNode, c.Coll, 0, h.at(BufScratch, 0), h.at(BufRecv, 0))
		p.Call.Counts, p.Call.Displs = h.vector(h.node)
	case d.In.Shape == spec.Scattered: // ReduceScatter: this node's slices
		p = h.phase(LevelNode, c.Coll, c.Count, h.at(BufScratch, uint64(h.node*h.nodes.Local)*c.Count), h.at(BufRecv, 0))
	default: // AllReduce, Reduce
		p = h.phase(LevelNode, c.Coll, c.Count, h.at(BufScratch, 0), h.at(BufRecv, 0))
		if c.Coll == spec.Reduce {
			p.Call.Root = rl
		}
	}
	p.Call.Op.Divisor = c.NRanks
}

// allReduce: piece l is reduced over the node into its place in the
// output, over the rail in place, and gathered. With an epilogue the
// pieces are whole rows (piece), reduced into scratch, whence the gather
// applies the epilogue (not in place: the epilogue of a rank's own piece
// must not reach what its peers gather). A rail whose pieces are empty
// (fewer grains than the node has ranks) still meets, so that every rank
// of a node cuts a pipelined Program (comm's runPipelined) at the same
// phase.
func (h *hier) allReduce() {
	off, n := h.piece(h.local)
	counts, displs := h.pieceLists()
	at := h.at(BufRecv, off)
	if h.call.Epilogue.Kind != 0 {
		at = h.at(BufScratch, 0)
		h.scratch(counts[0] * h.size)
	}
	rs := h.phase(LevelNode, spec.ReduceScatterV, 0, h.at(BufSend, 0), at)
	rs.Call.Counts, rs.Call.Displs = counts, displs // offsets in Send; each piece lands packed
	h.phase(LevelRail, spec.AllReduce, n, at, at)
	ag := h.phase(LevelNode, spec.AllGatherV, 0, at, h.at(BufRecv, 0))
	ag.Call.Counts, ag.Call.Displs, ag.Call.Epilogue = counts, displs, h.call.Epilogue
}

// reduceScatter: the input is Count x NRanks slices, node n's at row n of a
// Count-row matrix whose column block l is local rank l's slice.
func (h *hier) reduceScatter() {
	c, k := h.call.Count, uint64(h.nodes.Count)
	rows := h.phase(LevelNode, spec.ReduceScatterColumns, k*c, h.at(BufSend, 0), h.at(BufScratch, 0))
	rows.Call.Rows = k
	h.phase(LevelRail, spec.ReduceScatter, c, h.at(BufScratch, 0), h.at(BufRecv, 0))
	h.scratch(k * c * h.size)
}

// part is the elements [lo, lo+n) of rank r's part (its Counts[r] in a V
// form, else Count) that this Program moves: its chunk (HierarchyChunk), or
// all of it.
func (h *hier) part(r int) (lo, n uint64) {
	count := h.call.Count
	if h.call.Coll.Vectored() {
		count = h.call.Counts[r]
	}
	return ChunkOf(&h.call, count, h.chunkI, h.chunkK)
}

// vector is, for the ranks of node m (local rank order), the counts and
// displacements (elements) of what the Program moves of their parts (at
// Displs in a V form, else each rank's block of Count), as a node's V
// collective takes them.
func (h *hier) vector(m int) (counts, displs []uint64) {
	l := h.nodes.Local
	counts, displs = make([]uint64, l), make([]uint64, l)
	for j := range l {
		r := m*l + j
		lo, n := h.part(r)
		at := uint64(r) * h.call.Count
		if h.call.Coll.Vectored() {
			at = h.call.Displs[r]
		}
		counts[j], displs[j] = n, at+lo
	}
	return counts, displs
}

// rail is, for this rank's rail, every node's count (what the Program
// moves of the part of its rank of this local index) and where it lies
// packed in node order.
func (h *hier) rail() (counts, packed []uint64) {
	counts, packed = make([]uint64, h.nodes.Count), make([]uint64, h.nodes.Count)
	var at uint64
	for m := range counts {
		_, counts[m] = h.part(m*h.nodes.Local + h.local)
		packed[m] = at
		at += counts[m]
	}
	return counts, packed
}

// allGatherParts serves AllGatherV, and a chunk of AllGather (its parts of
// Count): rail l gathers what the Program moves of the inputs of every
// node's rank l, packed in node order (scratch); then, per source node m,
// the node gathers what its ranks hold of node m's ranks into the output,
// at their displacements. Parts of one size go over the rail as a plain
// AllGather, which the network serves natively.
func (h *hier) allGatherParts() {
	counts, packed := h.rail()
	lo, n := h.part(h.call.Rank)
	g := h.phase(LevelRail, spec.AllGather, n, h.at(BufSend, lo), h.at(BufScratch, 0))
	if h.call.Coll.Vectored() {
		g.Call.Coll, g.Call.Count, g.Call.Counts, g.Call.Displs = spec.AllGatherV, 0, counts, packed
	}
	for m := range h.nodes.Count {
		p := h.phase(LevelNode, spec.AllGatherV, 0, h.at(BufScratch, packed[m]), h.at(BufRecv, 0))
		p.Call.Counts, p.Call.Displs = h.vector(m)
		p.Grouped = m > 0
	}
	h.scratch(sum(counts) * h.size)
}

// reduceScatterParts serves ReduceScatterV, and a chunk of ReduceScatter
// (its parts of Count): per destination node m, the node reduces what the
// Program moves of the parts for node m's ranks, local rank l taking rank
// (m, l)'s, packed in node order (scratch); rail l then reduces and
// scatters them over the nodes (a plain ReduceScatter for parts of one size).
func (h *hier) reduceScatterParts() {
	counts, packed := h.rail()
	for m := range h.nodes.Count {
		p := h.phase(LevelNode, spec.ReduceScatterV, 0, h.at(BufSend, 0), h.at(BufScratch, packed[m]))
		p.Call.Counts, p.Call.Displs = h.vector(m)
		p.Grouped = m > 0
	}
	lo, n := h.part(h.call.Rank)
	r := h.phase(LevelRail, spec.ReduceScatter, n, h.at(BufScratch, 0), h.at(BufRecv, lo))
	if h.call.Coll.Vectored() {
		r.Call.Coll, r.Call.Count, r.Call.Counts, r.Call.Displs = spec.ReduceScatterV, 0, counts, packed
	}
	h.scratch(sum(counts) * h.size)
}

func sum(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}

func (h *hier) allGather() {
	c, k := h.call.Count, uint64(h.nodes.Count)
	h.phase(LevelRail, spec.AllGather, c, h.at(BufSend, 0), h.at(BufScratch, 0))
	cols := h.phase(LevelNode, spec.AllGatherColumns, k*c, h.at(BufScratch, 0), h.at(BufRecv, 0))
	cols.Call.Rows = k
	h.scratch(k * c * h.size)
}

// allGatherColumns: rail l gathers the blocks of every node's rank l,
// packed in node order (scratch); then, per source node m, the node lays
// its ranks' copies of node m's blocks into node m's columns of the output
// (the whole matrix's rows: its stride's).
func (h *hier) allGatherColumns() {
	c, k, st := h.call.Count, uint64(h.nodes.Count), h.call.OutStride()
	h.phase(LevelRail, spec.AllGather, c, h.at(BufSend, 0), h.at(BufScratch, 0))
	for m := range k {
		p := h.phase(LevelNode, spec.AllGatherColumns, c, h.at(BufScratch, m*c), Span{BufRecv, m * uint64(h.nodes.Local) * st.Row})
		p.Call.Rows, p.Call.Width, p.Grouped = h.call.Rows, st.Pitch/h.size, m > 0
	}
	h.scratch(k * c * h.size)
}

// reduceScatterColumns: per destination node m, the node reduces node m's
// columns of the input, local rank l taking rank (m, l)'s block, packed in
// node order (scratch); rail l then reduces and scatters the blocks.
func (h *hier) reduceScatterColumns() {
	c, k, st := h.call.Count, uint64(h.nodes.Count), h.call.InStride()
	for m := range k {
		p := h.phase(LevelNode, spec.ReduceScatterColumns, c, Span{BufSend, m * uint64(h.nodes.Local) * st.Row}, h.at(BufScratch, m*c))
		p.Call.Rows, p.Call.Width, p.Grouped = h.call.Rows, st.Pitch/h.size, m > 0
	}
	h.phase(LevelRail, spec.ReduceScatter, c, h.at(BufScratch, 0), h.at(BufRecv, 0))
	h.scratch(k * c * h.size)
}

// allToAll: row n of the input (Local slices) goes to node n's ranks. A
// node-local AllToAll per row leaves at local rank l, in scratch row n, the
// slices every rank of this node sends to rank (n, l); rail l delivers rows.
func (h *hier) allToAll() {
	c, l := h.call.Count, uint64(h.nodes.Local)
	for n := range uint64(h.nodes.Count) {
		p := h.phase(LevelNode, spec.AllToAll, c, h.at(BufSend, n*l*c), h.at(BufScratch, n*l*c))
		p.Grouped = n > 0
	}
	h.phase(LevelRail, spec.AllToAll, l*c, h.at(BufScratch, 0), h.at(BufRecv, 0))
	h.scratch(uint64(h.call.NRanks) * c * h.size)
}

// pairs serves the all-to-alls whose sizes are per pair of ranks
// (AllToAllV, AllToAllMatrix), from this rank's parts of its input and
// output (spec.Call.InPart, OutPart): the pairs within this node are the
// node's AllToAllV, this rank's lists of its node's ranks; each pair across
// nodes with something to move is a send or a receive on the network, all
// of them in one group, beside the node's (Beside: they touch other parts
// of the output). No rank forwards another's slices: with AllToAllV each
// rank knows only its own counts.
func (h *hier) pairs() {
	c, l := &h.call, h.nodes.Local
	lo := h.node * l
	node := h.phase(LevelNode, spec.AllToAllV, 0, h.at(BufSend, 0), h.at(BufRecv, 0))
	v := &node.Call
	v.SendCounts, v.SendDispls = make([]uint64, l), make([]uint64, l)
	v.RecvCounts, v.RecvDispls = make([]uint64, l), make([]uint64, l)
	grouped := false
	for q := range c.NRanks {
		sendAt, sends := c.InPart(c.Rank, q)
		recvAt, recvs := c.OutPart(c.Rank, q)
		if j := q - lo; j >= 0 && j < l {
			v.SendDispls[j], v.SendCounts[j] = sendAt/h.size, sends/h.size
			v.RecvDispls[j], v.RecvCounts[j] = recvAt/h.size, recvs/h.size
			continue
		}
		if sends > 0 {
			s := h.phase(LevelWorld, spec.SendRecv, sends/h.size, Span{BufSend, sendAt}, Span{})
			s.Call.Peer, s.Call.IsSend, s.Grouped, s.Beside = q, true, grouped, !grouped
			grouped = true
		}
		if recvs > 0 {
			r := h.phase(LevelWorld, spec.SendRecv, recvs/h.size, Span{}, Span{BufRecv, recvAt})
			r.Call.Peer, r.Grouped, r.Beside = q, grouped, !grouped
			grouped = true
		}
	}
}

func (h *hier) roots() (node, local int) {
	return h.nodes.Node(h.call.Root), h.nodes.LocalRank(h.call.Root)
}

// broadcast: the root's node broadcasts the whole buffer, rail l broadcasts
// piece l from it, and every other node gathers its pieces.
func (h *hier) broadcast() {
	rn, rl := h.roots()
	off, n := h.piece(h.local)
	if h.node == rn {
		p := h.phase(LevelNode, spec.Broadcast, h.call.Count, h.at(BufSend, 0), h.at(BufRecv, 0))
		p.Call.Root = rl
	}
	if n > 0 {
		p := h.phase(LevelRail, spec.Broadcast, n, h.at(BufRecv, off), h.at(BufRecv, off))
		p.Call.Root = rn
	}
	if h.node != rn {
		counts, displs := h.pieceLists()
		ag := h.phase(LevelNode, spec.AllGatherV, 0, h.at(BufRecv, off), h.at(BufRecv, 0))
		ag.Call.Counts, ag.Call.Displs = counts, displs
	}
}

// reduce: every node reduces piece l to its rank l (scratch), rail l
// reduces it to the root's node (the root: into its output), and the root's
// node sends the pieces to the root. Only the root's output is written.
func (h *hier) reduce() {
	rn, rl := h.roots()
	off, n := h.piece(h.local)
	counts, displs := h.pieceLists()
	rs := h.phase(LevelNode, spec.ReduceScatterV, 0, h.at(BufSend, 0), h.at(BufScratch, 0))
	rs.Call.Counts, rs.Call.Displs = counts, displs // offsets in Send; each piece lands packed
	h.scratch(counts[0] * h.size)
	dst := h.at(BufScratch, 0)
	if h.call.Rank == h.call.Root {
		dst = h.at(BufRecv, off)
	}
	if n > 0 {
		p := h.phase(LevelRail, spec.Reduce, n, h.at(BufScratch, 0), dst)
		p.Call.Root = rn
	}
	if h.node != rn {
		return
	}
	grouped := false
	for i := range h.nodes.Local {
		o, m := h.piece(i)
		switch {
		case i == rl || m == 0:
			continue
		case h.local == i:
			p := h.phase(LevelNode, spec.SendRecv, m, h.at(BufScratch, 0), Span{})
			p.Call.Peer, p.Call.IsSend = rl, true
		case h.local == rl:
			p := h.phase(LevelNode, spec.SendRecv, m, Span{}, h.at(BufRecv, o))
			p.Call.Peer, p.Grouped = i, grouped
			grouped = true
		}
	}
}

// gather: every node gathers at its rank of the root's local index (the
// root: into its node's rows of the output), and that rail sends the nodes'
// rows to the root.
func (h *hier) gather() {
	rn, rl := h.roots()
	c, l := h.call.Count, uint64(h.nodes.Local)
	row := Span{} // where this rank gathers its node's rows, if it does
	switch {
	case h.call.Rank == h.call.Root:
		row = h.at(BufRecv, uint64(rn)*l*c)
	case h.local == rl:
		row = h.at(BufScratch, 0)
	}
	g := h.phase(LevelNode, spec.Gather, c, h.at(BufSend, 0), row)
	g.Call.Root = rl
	if h.local != rl {
		return
	}
	h.scratch(l * c * h.size)
	p := h.phase(LevelRail, spec.Gather, l*c, row, h.at(BufRecv, 0))
	p.Call.Root = rn
}

// scatter: the root's rail scatters node rows to its ranks, and each node
// scatters its row from there.
func (h *hier) scatter() {
	rn, rl := h.roots()
	c, l := h.call.Count, uint64(h.nodes.Local)
	if h.local == rl {
		h.scratch(l * c * h.size)
		p := h.phase(LevelRail, spec.Scatter, l*c, h.at(BufSend, 0), h.at(BufScratch, 0))
		p.Call.Root = rn
	}
	from := Span{}
	if h.local == rl {
		from = h.at(BufScratch, 0)
	}
	s := h.phase(LevelNode, spec.Scatter, c, from, h.at(BufRecv, 0))
	s.Call.Root = rl
}
