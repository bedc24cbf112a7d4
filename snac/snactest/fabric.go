package snactest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// A multi-node Program (snac.Hierarchy) is checked without an Atom or a
// network by running every rank's Phases on a Fabric (RunPhases): each
// level's calls then have exactly the flat collective's semantics, and the
// result must match the flat collective's on the whole communicator.

// Fabric is a reference transport between goroutine ranks: a collective's
// ranks meet and the last to arrive writes every member's output with
// Expected (rounded to the type, as an Atom writes it), to which each
// member then applies its call's epilogue (RunPhases); a send is copied
// into a mailbox its receive takes it from. It stands for the network
// between nodes in tests of multi-node Programs.
type Fabric struct {
	mu       sync.Mutex
	meetings map[string]*meeting
	mail     map[string]chan []byte
	abort    chan struct{}
	once     sync.Once
}

type meeting struct {
	calls   []*spec.Call
	in, out [][]byte
	arrived int
	done    chan struct{}
	err     error
}

// NewFabric returns an empty fabric.
func NewFabric() *Fabric {
	return &Fabric{meetings: map[string]*meeting{}, mail: map[string]chan []byte{}, abort: make(chan struct{})}
}

// Abort makes every wait of the fabric fail with errs.ErrAborted.
func (f *Fabric) Abort() { f.once.Do(func() { close(f.abort) }) }

// Meet joins call (Rank and NRanks in its group) to the meeting named key,
// with in the bytes of its input (Extents long) and out its output; it
// returns once the group's outputs are written, or after timeout.
func (f *Fabric) Meet(key string, call *spec.Call, in, out []byte, timeout time.Duration) error {
	f.mu.Lock()
	m := f.meetings[key]
	if m == nil {
		n := call.NRanks
		m = &meeting{calls: make([]*spec.Call, n), in: make([][]byte, n), out: make([][]byte, n), done: make(chan struct{})}
		f.meetings[key] = m
	}
	if call.Rank >= len(m.calls) || m.calls[call.Rank] != nil {
		f.mu.Unlock()
		return errs.New(errs.ErrInternal, "fabric meeting %s: rank %d of %d arrives twice or out of range", key, call.Rank, len(m.calls))
	}
	m.calls[call.Rank], m.in[call.Rank], m.out[call.Rank] = call, append([]byte(nil), in...), out
	m.arrived++
	last := m.arrived == len(m.calls)
	if last {
		delete(f.meetings, key)
	}
	f.mu.Unlock()
	if last {
		m.err = m.compute()
		close(m.done)
	}
	select {
	case <-m.done:
		return m.err
	case <-f.abort:
		return errs.New(errs.ErrAborted, "fabric meeting %s: aborted", key)
	case <-time.After(timeout):
		return errs.New(errs.ErrTimeout, "fabric meeting %s: not every rank of the group arrived within %v", key, timeout)
	}
}

func (m *meeting) compute() error {
	for q, c := range m.calls {
		if c.Coll != m.calls[0].Coll || c.NRanks != len(m.calls) {
			return errs.New(errs.ErrMismatch, "fabric: rank %d of the group called %s, rank 0 %s", q, c.Coll, m.calls[0].Coll)
		}
	}
	for q, o := range spectest.Expected(m.calls, m.in) {
		for k, b := range o.Data {
			if o.Covered[k] {
				m.out[q][k] = b
			}
		}
	}
	return nil
}

func (f *Fabric) box(key string) chan []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mail[key] == nil {
		f.mail[key] = make(chan []byte, 1024)
	}
	return f.mail[key]
}

// Send posts a copy of data to the mailbox named key; it never waits.
func (f *Fabric) Send(key string, data []byte) { f.box(key) <- append([]byte(nil), data...) }

// Recv copies the next message of the mailbox named key into out.
func (f *Fabric) Recv(key string, out []byte, timeout time.Duration) error {
	select {
	case b := <-f.box(key):
		if len(b) != len(out) {
			return errs.New(errs.ErrMismatch, "fabric mailbox %s: %d bytes sent, %d expected", key, len(b), len(out))
		}
		copy(out, b)
		return nil
	case <-f.abort:
		return errs.New(errs.ErrAborted, "fabric mailbox %s: aborted", key)
	case <-time.After(timeout):
		return errs.New(errs.ErrTimeout, "fabric mailbox %s: nothing arrived within %v", key, timeout)
	}
}

// Key names a meeting or mailbox from its parts.
func Key(parts ...any) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, "/")
}

// Party is one rank's side of RunPhases: its place on the nodes, the
// memory its Phases address, and the count of meetings it held per group
// (so the k-th meeting of a group matches on every member).
type Party struct {
	Rank  int
	Nodes snac.Nodes
	// Memory returns the n bytes a Phase's Send or Recv addresses; from is
	// the Span and the Call's address, whichever the caller resolved.
	Memory func(sp snac.Span, addr uintptr, n uint64) []byte
	// Epilogue returns the buffers of a Phase's epilogue (spec.Epilogue's
	// Residual, Weight, Quant and Scales, nil where 0); only Programs of
	// calls with an epilogue need it.
	Epilogue func(e *spec.Epilogue) (residual, weight, quant, scales []byte)
	seq      map[string]int
}

// group names rank's group at level: the node's first rank, or the rail's index.
func (p *Party) group(level snac.Level) string {
	if level == snac.LevelNode {
		return Key(level, p.Nodes.Node(p.Rank))
	}
	return Key(level, p.Nodes.LocalRank(p.Rank))
}

// peer is the communicator rank of a SendRecv Phase's Peer.
func (p *Party) peer(ph *snac.Phase) int {
	switch ph.Level {
	case snac.LevelNode:
		return p.Nodes.Node(p.Rank)*p.Nodes.Local + ph.Call.Peer
	case snac.LevelRail:
		return ph.Call.Peer*p.Nodes.Local + p.Nodes.LocalRank(p.Rank)
	}
	return ph.Call.Peer
}

// RunPhases runs one group of Phases (issued together, as between
// ncclGroupStart and End) of party's rank on f: its sends first, so no
// receive of the group waits for a send behind it, then its receives and
// collectives in order.
func RunPhases(f *Fabric, party *Party, phases []snac.Phase, timeout time.Duration) error {
	if party.seq == nil {
		party.seq = map[string]int{}
	}
	for i := range phases {
		ph := &phases[i]
		if c := &ph.Call; c.Coll == spec.SendRecv && c.IsSend {
			n := c.Count * uint64(c.Type.Size())
			f.Send(Key(ph.Level, party.Rank, party.peer(ph)), party.Memory(ph.Send, c.Send, n))
		}
	}
	for i := range phases {
		ph := &phases[i]
		c := ph.Call
		if c.Coll == spec.SendRecv {
			if !c.IsSend {
				n := c.Count * uint64(c.Type.Size())
				if err := f.Recv(Key(ph.Level, party.peer(ph), party.Rank), party.Memory(ph.Recv, c.Recv, n), timeout); err != nil {
					return err
				}
			}
			continue
		}
		g := party.group(ph.Level)
		key := Key(g, party.seq[g])
		party.seq[g]++
		in, out := c.Extents()
		output := party.Memory(ph.Recv, c.Recv, out)
		if err := f.Meet(key, &c, party.Memory(ph.Send, c.Send, in), output, timeout); err != nil {
			return err
		}
		if e := &c.Epilogue; e.Kind != 0 { // each rank's own, on its own output
			residual, weight, quant, scales := party.Epilogue(e)
			numeric.EpilogueRows{Type: c.Type, Kind: e.Kind, Hidden: int(e.Hidden), Eps: e.Eps}.Run(output, residual, weight, quant, scales)
		}
	}
	return nil
}
