package comm

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"purlin/atom"
	"purlin/comm/ncclnet"
	"purlin/comm/network"
	"purlin/comm/rendezvous"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// A communicator whose ranks lie on several nodes (servers) runs each call
// as the Program snac.Hierarchy derives: node-local phases on a communicator
// of its node's ranks (Purlin's own Plans and Atom), the others on a
// Network, in order on the caller's stream.

// Network carries the phases of a multi-node communicator's calls that
// cross nodes; NetworkJob is what one is made from (package network).
type (
	Network        = network.Network
	NetworkJob     = network.Job
	NetworkFactory = network.Factory
)

// nodesOf is how the ranks whose records peers holds lie on nodes: in
// `virtual` nodes of consecutive ranks when it is above 0 (Config.Nodes,
// PURLIN_NODES), else one node per host. The ranks of a node must be
// consecutive and every node must hold as many.
func nodesOf(peers []rendezvous.PeerInfo, virtual int) (snac.Nodes, error) {
	n := len(peers)
	if virtual > 0 {
		if n%virtual != 0 {
			return snac.Nodes{}, errs.New(errs.ErrInvalidArgument, "CommInitRank: %d ranks cannot form %d nodes of equal size (PURLIN_NODES)", n, virtual)
		}
		return snac.Nodes{Count: virtual, Local: n / virtual}, nil
	}
	var hosts []string
	var sizes []int
	for r, p := range peers {
		switch {
		case len(hosts) > 0 && hosts[len(hosts)-1] == p.Host:
			sizes[len(sizes)-1]++
		case slices.Contains(hosts, p.Host):
			return snac.Nodes{}, errs.New(errs.ErrInvalidUsage, "CommInitRank: the ranks on host %s are not consecutive (rank %d); Purlin needs each node's ranks numbered together", p.Host, r)
		default:
			hosts, sizes = append(hosts, p.Host), append(sizes, 1)
		}
	}
	for i, s := range sizes {
		if s != sizes[0] {
			return snac.Nodes{}, errs.New(errs.ErrInvalidUsage, "CommInitRank: host %s holds %d ranks and host %s %d; Purlin needs as many ranks on every node", hosts[0], sizes[0], hosts[i], s)
		}
	}
	return snac.Nodes{Count: len(sizes), Local: sizes[0]}, nil
}

// colocated reports whether a rank other than rank runs in rank's process
// (the same host and process id).
func colocated(peers []rendezvous.PeerInfo, rank int) bool {
	me := peers[rank]
	for r, p := range peers {
		if r != rank && p.Host == me.Host && p.Pid == me.Pid {
			return true
		}
	}
	return false
}

// initNodes makes c, of nodes' ranks, a communicator across nodes: a
// communicator of its node's ranks (hosted by the node's first rank) and a
// Network.
func (c *Comm) initNodes(boot *rendezvous.Bootstrap, nodes snac.Nodes) error {
	if nodes.Local > snac.MaxRanks {
		return errs.New(errs.ErrInvalidArgument, "CommInitRank: %d ranks on one node; Purlin serves at most %d", nodes.Local, snac.MaxRanks)
	}
	node, local := nodes.Node(c.rank), nodes.LocalRank(c.rank)
	var mine []byte
	if local == 0 {
		id, err := rendezvous.GetLocalUniqueID()
		if err != nil {
			return err
		}
		mine = id[:]
	}
	ids, err := boot.AllGather(mine)
	if err != nil {
		return errs.New(errs.ErrRemote, "CommInitRank rank %d: exchanging the nodes' unique ids: %v", c.rank, err)
	}
	var id UniqueID
	if copy(id[:], ids[node*nodes.Local]) != UniqueIDBytes {
		return errs.New(errs.ErrRemote, "CommInitRank: rank %d sent no unique id for node %d", node*nodes.Local, node)
	}
	cfg := c.cfg
	cfg.Nodes, cfg.Network = 1, nil
	child, err := newComm(cfg, local, nodes.Local, c.device)
	if err != nil {
		return err
	}
	child.onGPU = c.onGPU
	if err := child.init(id); err != nil {
		child.free(false)
		return err
	}
	job := NetworkJob{Rank: c.rank, Nodes: nodes, Device: c.device, Timeout: c.cfg.timeout(), AllGather: boot.AllGather,
		Colocated: colocated(boot.Peers(), c.rank)}
	if q, ok := child.dp.(interface {
		Enqueue(stream uintptr, f func() error) error
	}); ok {
		job.Enqueue = q.Enqueue
	}
	if q, ok := child.dp.(interface{ InContext(func() error) error }); ok {
		job.InContext = q.InContext
	}
	factory := c.cfg.Network
	if factory == nil {
		factory = defaultNetwork
	}
	net, err := factory(job)
	if err != nil {
		child.free(false)
		return fmt.Errorf("CommInitRank rank %d: %d nodes of %d ranks: %w", c.rank, nodes.Count, nodes.Local, err)
	}
	c.boot, c.atomName = boot, child.atomName
	chunk := c.cfg.NetChunk
	if chunk == 0 {
		chunk = config.Get().NetChunk
	}
	c.dp = &spanning{comm: c, local: child, net: net, nodes: nodes, chunk: chunk}
	boot.SetOnDrop(func(peer int, err error) {
		config.Warnf("comm %#x rank %d: %v: work that still waits for it fails", c.handle, c.rank, err)
		c.dp.PeerGone(peer, err)
	})
	config.Infof("Purlin %s comm %#x rank %d of %d: node %d of %d, local rank %d of %d, %s Atom", Version, c.handle, c.rank, c.nranks, node, nodes.Count, local, nodes.Local, c.atomName)
	return nil
}

// defaultNetwork is the network a multi-node communicator gets when its
// Config names none: NCCL's, loaded at run time.
var defaultNetwork NetworkFactory = ncclnet.New

// spanning is the datapath of a communicator across nodes: its node's
// communicator and the network. It runs Programs (run), never Plans.
type spanning struct {
	comm  *Comm
	local *Comm
	net   Network
	nodes snac.Nodes
	// last is the stream of the last call that used the Atom's scratch: a
	// call on another stream waits for it first (one scratch serves all).
	last uintptr
	used bool
	// chunk is the bytes of one chunk of a pipelined call (runPipelined;
	// 0: none is); side, the stream its network phases run on.
	chunk uint64
	side  uintptr
}

// sideStreams is a datapath that gives a stream beside the caller's
// (host.Rank.SideStream, cuda.Rank.SideStream).
type sideStreams interface {
	SideStream() (uintptr, error)
}

// deviceScratch is a GPU Atom's scratch for Programs (cuda.Rank.Scratch).
type deviceScratch interface {
	Scratch(n uint64) (uintptr, error)
}

func (s *spanning) Launch(*snac.Plan, []atom.Buffers, uintptr) error {
	return errs.New(errs.ErrInternal, "a communicator across nodes launches Programs, not Plans")
}

func (s *spanning) Follow(stream, after uintptr) error { return s.local.dp.Follow(stream, after) }

func (s *spanning) AsyncError() error {
	if err := s.local.AsyncError(); err != nil {
		return err
	}
	return s.net.AsyncError()
}

func (s *spanning) Abort() {
	s.net.Abort()
	s.local.dp.Abort()
}

// PeerGone: a rank of this node is the node communicator's to handle (its
// own bootstrap sees it too); any other stops the network's waits.
func (s *spanning) PeerGone(peer int, cause error) {
	if peer >= 0 && s.nodes.Node(peer) == s.nodes.Node(s.comm.rank) {
		s.local.dp.PeerGone(s.nodes.LocalRank(peer), cause)
		return
	}
	s.net.Abort()
}

func (s *spanning) Close() error {
	s.net.Close()
	s.local.free(true)
	return nil
}

func (s *spanning) Synchronize() error { return s.local.syncDatapath() }

// run issues call's Program on stream: node-local phases on the node's
// communicator (a group of them as one merged Plan), the others on the
// network, each group in turn.
func (s *spanning) run(call *spec.Call, stream uintptr) error {
	if k := s.chunks(call); k > 1 {
		return s.runPipelined(call, stream, k)
	}
	prog, err := snac.Hierarchy(call, s.nodes)
	if err != nil {
		return err
	}
	scratchAt, keep, err := s.scratch(prog.Scratch, stream)
	if err != nil {
		return err
	}
	if err := s.issue(prog.Phases, spans(call, scratchAt), stream); err != nil {
		return err
	}
	return keep()
}

// scratch is n bytes of scratch for Programs issued on stream: the GPU
// Atom's own device buffer, or Go memory for the host Atom, which keep
// (called after the Programs are issued) holds until they ran.
func (s *spanning) scratch(n uint64, stream uintptr) (at uintptr, keep func() error, err error) {
	keep = func() error { return nil }
	if n == 0 {
		return 0, keep, nil
	}
	if d, ok := s.local.dp.(deviceScratch); ok {
		if at, err = d.Scratch(n); err != nil {
			return 0, keep, err
		}
		if s.used && s.last != stream {
			if err = s.local.dp.Follow(stream, s.last); err != nil {
				return 0, keep, err
			}
		}
		s.last, s.used = stream, true
		return at, keep, nil
	}
	b := make([]byte, n)
	// Plans and the network hold scratch's address only: a function after
	// them keeps it alive until they ran.
	return addressOf(b), func() error { return s.enqueue(stream, func() error { runtime.KeepAlive(b); return nil }) }, nil
}

// spans resolves a Program's Spans for call, with its scratch at scratchAt.
func spans(call *spec.Call, scratchAt uintptr) func(snac.Span) uintptr {
	return func(sp snac.Span) uintptr {
		var b uintptr
		switch sp.Buf {
		case snac.BufSend:
			b = call.Send
		case snac.BufRecv:
			b = call.Recv
		case snac.BufScratch:
			b = scratchAt
		}
		if b == 0 {
			return 0
		}
		return b + uintptr(sp.Off)
	}
}

// issue issues phases on stream, each group of them in turn: node-local
// phases on the node's communicator (a group as one merged Plan), the
// others on the network. A group marked Beside goes on the side stream,
// which starts where stream stood before phases and which stream waits for
// at their end: it runs beside the groups before it.
func (s *spanning) issue(ph []snac.Phase, at func(snac.Span) uintptr, stream uintptr) error {
	beside := slices.ContainsFunc(ph, func(p snac.Phase) bool { return p.Beside })
	if beside {
		if err := s.sideStream(); err != nil {
			return err
		}
		if err := s.local.dp.Follow(s.side, stream); err != nil {
			return err
		}
	}
	for i := 0; i < len(ph); {
		j := i + 1
		for j < len(ph) && ph[j].Grouped {
			j++
		}
		batch := make([]snac.Phase, j-i)
		for k, p := range ph[i:j] {
			p.Call.Send, p.Call.Recv = at(p.Send), at(p.Recv)
			batch[k] = p
		}
		on := stream
		if ph[i].Beside {
			on = s.side
		}
		var err error
		if ph[i].Level == snac.LevelNode {
			err = s.runLocal(batch, on)
		} else {
			err = s.net.Run(batch, on)
		}
		if err != nil {
			return err
		}
		i = j
	}
	if beside {
		return s.local.dp.Follow(stream, s.side)
	}
	return nil
}

// sideStream makes the rank's side stream on first use.
func (s *spanning) sideStream() error {
	if s.side != 0 {
		return nil
	}
	sides, ok := s.local.dp.(sideStreams)
	if !ok {
		return errs.New(errs.ErrInternal, "a communicator across nodes: its Atom has no side stream")
	}
	side, err := sides.SideStream()
	if err != nil {
		return err
	}
	s.side = side
	return nil
}

// chunks is how many chunks runPipelined cuts call into (snac.Chunks with
// this rank's PURLIN_NET_CHUNK; 1: none). Every rank decides alike: the
// call's shape and settings are equal on every rank.
func (s *spanning) chunks(call *spec.Call) int { return snac.Chunks(call, s.chunk) }

// runPipelined issues call as k chunks of consecutive elements of its
// parts (snac.HierarchyChunk), their Programs interleaved so that the
// network carries chunk i (on the side stream) while the node runs chunk
// i+1's phases before the network and chunk i-1's after it (on the
// caller's stream): chunk i's head (its phases before the network), then
// the network phases, which wait for the head, then chunk i-1's tail,
// which waits for its network phases.
// Node phases keep one order on every rank of a node, network phases one
// order on every rail. Two scratch regions take the chunks in turn: the
// chunk two before's tail is done when a head starts, and its network
// phases when the next network phases start.
func (s *spanning) runPipelined(call *spec.Call, stream uintptr, k int) error {
	if err := s.sideStream(); err != nil {
		return err
	}
	progs := make([]*snac.Program, k)
	var most uint64
	for i := range k {
		p, err := snac.HierarchyChunk(call, s.nodes, i, k)
		if err != nil {
			return err
		}
		progs[i], most = p, max(most, p.Scratch)
	}
	scratchAt, keep, err := s.scratch(2*most, stream)
	if err != nil {
		return err
	}
	at := func(i int) func(snac.Span) uintptr {
		return spans(call, scratchAt+uintptr(uint64(i%2)*most))
	}
	// head, net and tail cut a chunk's Program at its network phases.
	cut := func(ph []snac.Phase) (head, net, tail []snac.Phase) {
		a := 0
		for a < len(ph) && ph[a].Level == snac.LevelNode {
			a++
		}
		b := a
		for b < len(ph) && ph[b].Level != snac.LevelNode {
			b++
		}
		return ph[:a], ph[a:b], ph[b:]
	}
	dp := s.local.dp
	var tail []snac.Phase
	for i := range k {
		head, net, next := cut(progs[i].Phases)
		if err := s.issue(head, at(i), stream); err != nil {
			return err
		}
		if err := dp.Follow(s.side, stream); err != nil {
			return err
		}
		if i > 0 {
			if err := dp.Follow(stream, s.side); err != nil {
				return err
			}
		}
		if err := s.issue(net, at(i), s.side); err != nil {
			return err
		}
		if i > 0 {
			if err := s.issue(tail, at(i-1), stream); err != nil {
				return err
			}
		}
		tail = next
	}
	if err := dp.Follow(stream, s.side); err != nil {
		return err
	}
	if err := s.issue(tail, at(k-1), stream); err != nil {
		return err
	}
	return keep()
}

// enqueue runs f in stream order on the node's host Atom.
func (s *spanning) enqueue(stream uintptr, f func() error) error {
	q, ok := s.local.dp.(interface {
		Enqueue(uintptr, func() error) error
	})
	if !ok {
		return errs.New(errs.ErrUnsupported, "a communicator across nodes runs on the host Atom only in this build")
	}
	return q.Enqueue(stream, f)
}

// runGroup issues a group's operations on c: its collectives in order,
// then its sends and receives, those within the node as one merged Plan
// and the others as one network group, so none waits for another.
func (s *spanning) runGroup(ops []groupOp, stream uintptr) error {
	var local, remote []snac.Phase
	for i := range ops {
		call := &ops[i].call
		if call.Coll != spec.SendRecv {
			if err := s.run(call, stream); err != nil {
				return err
			}
			continue
		}
		prog, err := snac.Hierarchy(call, s.nodes)
		if err != nil {
			return err
		}
		p := prog.Phases[0]
		p.Call.Send, p.Call.Recv = call.Send, call.Recv
		if p.Level == snac.LevelNode {
			local = append(local, p)
		} else {
			remote = append(remote, p)
		}
	}
	if len(local) > 0 {
		if err := s.runLocal(local, stream); err != nil {
			return err
		}
	}
	if len(remote) > 0 {
		return s.net.Run(remote, stream)
	}
	return nil
}

func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// runLocal issues node-local phases (sends and receives) on the node's
// communicator: one call alone, several as a group's (launchP2P).
func (s *spanning) runLocal(phases []snac.Phase, stream uintptr) error {
	l := s.local
	for i := range phases {
		if err := phases[i].Call.Validate(); err != nil {
			return errs.New(errs.ErrInternal, "across nodes: a node phase %s: %v", phases[i].Call.Coll, err)
		}
	}
	if len(phases) == 1 {
		return l.launch(&phases[0].Call, stream)
	}
	g := &group{}
	ops := make([]groupOp, len(phases))
	for i := range phases {
		ops[i] = groupOp{c: l, call: phases[i].Call, stream: stream}
	}
	return g.launchP2P(l, ops, stream)
}
