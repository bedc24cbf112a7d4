// Command purlin-plan prints the Plans SNAC derives for a collective on the
// CUDA Atom's topology (its defaults, and the PURLIN_* settings that shape
// Plans), without a GPU: for each size, the regime, the thread blocks one
// rank uses, its workers on the copy engine (PURLIN_COPY_ENGINE) and the
// steps of its first worker; with -steps, every step of that worker.
//
//	purlin-plan [-ranks 2] [-rank 0] [-nodes 1] [-type float32] [-op sum] [-from 8] [-to 1G] [-factor 4] [-steps] [-hidden N] [-windows] COLLECTIVE
//
// With -windows, the outputs lie in symmetric windows (NCCL_WIN_COLL_SYMMETRIC):
// a collective of copies past packets pushes straight into them (regime
// direct).
//
// With -hidden, an AllReduce carries a residual add + RMSNorm epilogue over
// rows of N elements, and each size's line also gives the most rows one
// block's Epilogue steps hold.
//
// With -nodes K, the ranks lie on K nodes of consecutive ranks (as
// PURLIN_NODES splits them) and it prints rank -rank's Program across nodes
// instead (snac.Hierarchy): for each size, the chunks it runs in with
// PURLIN_NET_CHUNK, the Program's phases (of its first chunk) and its
// scratch; with -steps, every phase. -op names the reduction (sum, prod,
// max, min, avg), which shapes an integer mean's Program.
//
// Sizes are nccl-tests' (the largest buffer of a rank, in bytes), so rows
// line up with purlin-perf's. COLLECTIVE is one of allreduce, allgather,
// reducescatter, alltoall, broadcast, reduce, gather, scatter, sendrecv,
// allgathercolumns, reducescattercolumns; a column block's
// matrix has purlin-perf's rows (the largest power of two up to 64 that
// divides a rank's count).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"purlin/atom/cuda"
	"purlin/config"
	"purlin/snac"
	"purlin/spec"
)

type options struct {
	coll             spec.Collective
	ranks, rank      int
	nodes            int
	dtype            spec.DataType
	op               spec.OpKind
	from, to, factor uint64
	steps            bool
	hidden           uint64
	windows          bool
}

func main() {
	o, err := parse(os.Args[1:])
	if err == nil {
		err = report(os.Stdout, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "purlin-plan:", err)
		os.Exit(2)
	}
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("purlin-plan", flag.ContinueOnError)
	o := options{}
	fs.IntVar(&o.ranks, "ranks", 2, "ranks of the communicator (1-8 a node)")
	fs.IntVar(&o.rank, "rank", 0, "the rank whose Plan is printed")
	fs.IntVar(&o.nodes, "nodes", 1, "nodes the ranks lie on: above 1, print Programs across nodes")
	dtype := fs.String("type", "float32", "element type")
	op := fs.String("op", "sum", "reduction (sum, prod, max, min, avg)")
	from := fs.String("from", "8", "smallest size (K, M, G: binary units)")
	to := fs.String("to", "1G", "largest size")
	fs.Uint64Var(&o.factor, "factor", 4, "size step")
	fs.BoolVar(&o.steps, "steps", false, "print every step of the first block")
	fs.Uint64Var(&o.hidden, "hidden", 0, "AllReduce: add a residual add + RMSNorm epilogue over rows of this many elements")
	fs.BoolVar(&o.windows, "windows", false, "the outputs lie in symmetric windows (NCCL_WIN_COLL_SYMMETRIC)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 1 {
		return o, errors.New("name one collective")
	}
	o.coll = spec.NumCollectives
	for c := range spec.NumCollectives {
		if strings.EqualFold(c.String(), fs.Arg(0)) {
			o.coll = c
		}
	}
	switch o.coll {
	case spec.NumCollectives:
		return o, fmt.Errorf("unknown collective %q", fs.Arg(0))
	case spec.AllGatherV, spec.ReduceScatterV, spec.AllToAllV, spec.AllToAllMatrix:
		return o, fmt.Errorf("%s needs counts per rank, which purlin-plan does not take", o.coll)
	}
	o.dtype = -1
	for t := range spec.NumTypes {
		if t.String() == *dtype {
			o.dtype = t
		}
	}
	o.op = -1
	for k := range spec.NumOps {
		if (spec.Op{Kind: k}).String() == *op {
			o.op = k
		}
	}
	var err error
	switch {
	case o.dtype < 0:
		return o, fmt.Errorf("unknown type %q", *dtype)
	case o.op < 0:
		return o, fmt.Errorf("unknown op %q", *op)
	case o.nodes < 1 || o.ranks%o.nodes != 0:
		return o, fmt.Errorf("%d ranks do not form %d nodes", o.ranks, o.nodes)
	case o.ranks < 1 || o.ranks/o.nodes > snac.MaxRanks || o.rank < 0 || o.rank >= o.ranks:
		return o, fmt.Errorf("rank %d of %d ranks (1-%d a node)", o.rank, o.ranks, snac.MaxRanks)
	case o.factor < 2:
		return o, errors.New("-factor must be at least 2")
	case o.hidden != 0 && o.coll != spec.AllReduce:
		return o, errors.New("-hidden is for allreduce")
	}
	if o.from, err = size(*from); err == nil {
		o.to, err = size(*to)
	}
	return o, err
}

// size parses a byte count with an optional K, M or G (binary) suffix.
func size(s string) (uint64, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	v, err := strconv.ParseUint(strings.TrimRight(s, "KMG"), 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// call is rank o.rank's call of nccl-tests size bytes: its count is per rank
// where the buffer holds one slice per rank. A SendRecv sends to the next
// rank (the Plan of its receive is the other half).
func call(o options, bytes uint64) *spec.Call {
	c := &spec.Call{Coll: o.coll, Type: o.dtype, Op: spec.Op{Kind: o.op}, Rank: o.rank, NRanks: o.ranks,
		Send: 1 << 40, Recv: 2 << 40}
	c.Count = bytes / uint64(o.dtype.Size())
	switch c.Coll {
	case spec.AllGather, spec.ReduceScatter, spec.AllToAll, spec.Gather, spec.Scatter, spec.AllGatherColumns, spec.ReduceScatterColumns:
		c.Count /= uint64(o.ranks)
	case spec.SendRecv:
		c.Peer, c.IsSend = (o.rank+1)%o.ranks, true
	}
	if c.Coll.Columns() {
		c.Rows = columnRows(c.Count)
	}
	if o.hidden != 0 {
		c.Epilogue = spec.Epilogue{Kind: spec.EpilogueResidualAdd | spec.EpilogueRMSNorm, Hidden: o.hidden,
			Residual: 3 << 40, Weight: 4 << 40, Eps: 1e-6}
	}
	return c
}

// columnRows is the matrix's rows of a column-block call of count
// elements a rank, as purlin-perf chooses them: the largest power of two
// up to 64 that divides count.
func columnRows(count uint64) uint64 {
	rows := uint64(64)
	for rows > 1 && count%rows != 0 {
		rows /= 2
	}
	return rows
}

func report(w io.Writer, o options) error {
	if o.nodes > 1 {
		return reportNodes(w, o)
	}
	topo := cuda.Topology(o.ranks, o.rank)
	topo.Direct = o.windows
	fmt.Fprintf(w, "# %s, %s, rank %d of %d; stage half %d, point-to-point half %d, packets to %d, chunks to %d, blocks to %d\n",
		o.coll, o.dtype, o.rank, o.ranks, topo.StageHalf, topo.P2PHalf, topo.PacketMax, topo.ChunkMax, topo.Workers)
	fmt.Fprintf(w, "# %12s  %-8s  %6s  %6s  %s\n", "bytes", "regime", "blocks", "copies", "steps of worker 0")
	return eachSize(o, func(bytes uint64, c *spec.Call) error {
		p, err := snac.Build(c, topo)
		if err != nil {
			return err
		}
		var first []snac.Step
		if len(p.Workers) > 0 {
			first = p.WorkerSteps(0)
		}
		copies := 0 // workers on the copy engine (PURLIN_COPY_ENGINE): streams, not blocks
		for _, wk := range p.Workers {
			if wk.Engine == snac.EngineCopy {
				copies++
			}
		}
		fmt.Fprintf(w, "%14d  %-8s  %6d  %6d  %d%s\n", bytes, p.Regime, len(p.Workers)-copies, copies, len(first), epilogueRows(o, p))
		if o.steps {
			for _, s := range first {
				if s.Verb == snac.Repeat {
					fmt.Fprintf(w, "    repeat  the next %d steps %d times, flags %d and buffers %d bytes further each time\n", s.Slot, s.Bytes, s.Delta, s.Check)
					continue
				}
				fmt.Fprintf(w, "    %-7s bytes %d sources %d peer %d slot %d delta %d dst %+v src0 %+v\n",
					s.Verb, s.Bytes, s.NSrc, s.Peer, s.Slot, s.Delta, s.Dst, s.Src[0])
			}
		}
		return nil
	})
}

// eachSize calls row with each size from o.from to o.to (times o.factor)
// and rank o.rank's valid call of it, skipping a size of no element.
func eachSize(o options, row func(bytes uint64, c *spec.Call) error) error {
	for bytes := o.from; bytes <= o.to; bytes *= o.factor {
		c := call(o, bytes)
		if c.Count == 0 {
			continue
		}
		if err := c.Validate(); err != nil {
			return err
		}
		if err := row(bytes, c); err != nil {
			return err
		}
		if bytes > o.to/o.factor {
			break
		}
	}
	return nil
}

// epilogueRows says, for a Plan with an epilogue, the most rows one
// block's Epilogue steps hold ("" without one).
func epilogueRows(o options, p *snac.Plan) string {
	if o.hidden == 0 {
		return ""
	}
	var most uint64
	for w := range p.Workers {
		var rows uint64
		for _, s := range p.WorkerSteps(w) {
			if s.Verb == snac.Epilogue {
				rows += s.Bytes / (o.hidden * uint64(o.dtype.Size()))
			}
		}
		most = max(most, rows)
	}
	return fmt.Sprintf("  (epilogue: at most %d rows a block)", most)
}

// reportNodes prints, for each size, rank o.rank's Program across o.nodes
// nodes: its chunks (PURLIN_NET_CHUNK), the phases of its first chunk and
// the scratch they use; with -steps, each phase.
func reportNodes(w io.Writer, o options) error {
	nodes := snac.Nodes{Count: o.nodes, Local: o.ranks / o.nodes}
	chunk := config.Get().NetChunk
	fmt.Fprintf(w, "# %s, %s %s, rank %d of %d on %d nodes of %d; network chunks of %d bytes\n",
		o.coll, o.dtype, spec.Op{Kind: o.op}, o.rank, o.ranks, nodes.Count, nodes.Local, chunk)
	fmt.Fprintf(w, "# %12s  %6s  %6s  %12s\n", "bytes", "chunks", "phases", "scratch")
	return eachSize(o, func(bytes uint64, c *spec.Call) error {
		k := snac.Chunks(c, chunk)
		prog, err := snac.Hierarchy(c, nodes)
		if k > 1 {
			prog, err = snac.HierarchyChunk(c, nodes, 0, k)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%14d  %6d  %6d  %12d\n", bytes, k, len(prog.Phases), prog.Scratch)
		if o.steps {
			for _, ph := range prog.Phases {
				fmt.Fprintf(w, "    %s\n", phaseLine(ph))
			}
		}
		return nil
	})
}

// phaseLine describes one phase: its level, whether it joins the group of
// the phase before it or runs beside the phases before it, its call and
// the buffers it reads and writes.
func phaseLine(ph snac.Phase) string {
	c := &ph.Call
	how := ""
	switch {
	case ph.Grouped:
		how = " (grouped)"
	case ph.Beside:
		how = " (beside)"
	}
	what := fmt.Sprintf("%s count %d", c.Coll, c.Count)
	switch {
	case c.Coll == spec.SendRecv && c.IsSend:
		what = fmt.Sprintf("send %d to %d", c.Count, c.Peer)
	case c.Coll == spec.SendRecv:
		what = fmt.Sprintf("recv %d from %d", c.Count, c.Peer)
	case c.Counts != nil:
		what = fmt.Sprintf("%s counts %v displs %v", c.Coll, c.Counts, c.Displs)
	case c.SendCounts != nil:
		what = fmt.Sprintf("%s send %v at %v, recv %v at %v", c.Coll, c.SendCounts, c.SendDispls, c.RecvCounts, c.RecvDispls)
	}
	if c.Coll.Reduces() {
		what += " " + c.Op.String()
		if c.Op.Divisor != 0 {
			what += fmt.Sprintf(" over %d", c.Op.Divisor)
		}
	}
	if c.Coll.Rooted() {
		what += fmt.Sprintf(" root %d", c.Root)
	}
	return fmt.Sprintf("%-5s%s %s, %s -> %s", ph.Level, how, what, span(ph.Send), span(ph.Recv))
}

func span(s snac.Span) string {
	if s.Buf == snac.BufNone {
		return "-"
	}
	return fmt.Sprintf("%s+%d", s.Buf, s.Off)
}
