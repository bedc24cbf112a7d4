package snactest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"purlin/errs"
	"purlin/snac"
)

// Buffer is one call's buffers in a Launch's memory: offsets of Send and
// Recv in Mem and the bytes the call may read (In) and write (Out), and the
// offsets of an AllReduce epilogue's buffers (atom.Buffers), read where its
// Epilogue steps' kind uses them.
type Buffer struct {
	Send, Recv, In, Out             uint64
	Residual, Weight, Quant, Scales uint64
}

// Launch is one Plan run on one rank over that rank's user memory Mem.
// Buffer i serves the Plan's Refs with Rank i in SpaceSend/SpaceRecv.
type Launch struct {
	Plan *snac.Plan
	Mem  []byte
	Bufs []Buffer
	// Collectives are the buffers of the Launch's collectives, in the order
	// a merged Plan chains them (nil: buffer 0 alone), where peers push
	// into their outputs (snac.SpacePeerRecv).
	Collectives []int
	// Written is filled by Run: which bytes of Mem the Plan wrote.
	Written []bool
	// final marks output bytes an Epilogue step has finished: no step
	// may read or write them again.
	final []bool
}

// Sim is n simulated ranks and their shared state. It is not safe for
// concurrent use.
type Sim struct {
	topo  snac.Topology
	ranks []*rank
	rng   *rand.Rand
	Steps int // steps executed so far (all ranks)
}

type rank struct {
	id                  int
	stage, packets      []byte
	stageTag, packetTag []uint32 // call<<4 | writer+1; 0 = never written
	stageUnread         []bool   // staging written and not yet read (per tag unit)
	flags, checks       []uint64
	epochs              []uint64
	calls               int   // calls started so far; the current call's index
	broken              error // the rank's first error (RunEach): it runs nothing more
	queue               []*Launch
	cur                 *Launch
	collStart           uint64     // cur's first epoch on the collective channel
	plan                *snac.Plan // cur's Plan, its loops unrolled
	workers             []worker
}

type worker struct {
	pc, end int
	epoch   uint64
	done    bool
	// slow: the scheduler picks this worker a sixteenth as often as the
	// others (a block the GPU started late or runs on a busy SM), so
	// that a peer's lagging worker meets what its rank's other workers,
	// and the next call, do meanwhile.
	slow bool
}

// slowWeight and fastWeight are how often the scheduler picks a slow worker
// against any other; slowOdds: one worker in slowOdds is slow in a Launch.
const (
	slowWeight, fastWeight = 1, 16
	slowOdds               = 4
)

func (w *worker) weight() int {
	if w.slow {
		return slowWeight
	}
	return fastWeight
}

// New returns a simulator of topo.NRanks ranks (topo.Rank is ignored).
func New(topo snac.Topology, seed uint64) *Sim {
	s := &Sim{topo: topo, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for r := range topo.NRanks {
		s.ranks = append(s.ranks, &rank{
			id:          r,
			stage:       make([]byte, topo.StageBytes()),
			stageTag:    make([]uint32, (topo.StageBytes()+tagUnit-1)/tagUnit),
			stageUnread: make([]bool, (topo.StageBytes()+tagUnit-1)/tagUnit),
			packets:     make([]byte, topo.PacketBytes()),
			packetTag:   make([]uint32, topo.PacketBytes()/16),
			flags:       make([]uint64, 2*snac.NumSlots),
			checks:      make([]uint64, 2*snac.NumSlots),
			epochs:      make([]uint64, snac.NumEpochs),
		})
	}
	return s
}

// Run runs launches[r] on rank r, each rank's Launches in order, all ranks
// concurrently (interleaved at random), until all are done. The shared state
// persists from one Run to the next. It returns the first protocol error:
// errs.ErrMismatch from a check word, errs.ErrTimeout for a deadlock (with
// a dump), errs.ErrInternal for a safety violation.
func (s *Sim) Run(launches [][]*Launch) error {
	for _, err := range s.run(launches, true) {
		if err != nil {
			return err
		}
	}
	return nil
}

// RunEach runs launches like Run, but as Atoms meet an error: the rank whose
// step fails is broken (it stops there and runs nothing more, in this Run or
// a later one) while the other ranks go on. When no worker can progress,
// every rank still running gets errs.ErrTimeout. It returns each rank's
// error, nil for a rank whose Launches all finished.
func (s *Sim) RunEach(launches [][]*Launch) []error {
	return s.run(launches, false)
}

// run runs launches; firstOnly stops at the first error (Run).
func (s *Sim) run(launches [][]*Launch, firstOnly bool) []error {
	for r, ls := range launches {
		for _, l := range ls {
			l.Written, l.final = make([]bool, len(l.Mem)), make([]bool, len(l.Mem))
		}
		s.ranks[r].queue = append(s.ranks[r].queue, ls...)
	}
	out := make([]error, len(s.ranks))
	type ref struct{ r, w int }
	var runnable []ref
	for {
		runnable = runnable[:0]
		weight := 0
		busy := false
		for _, rk := range s.ranks {
			if rk.broken != nil {
				out[rk.id], rk.queue = rk.broken, nil
				continue
			}
			if err := s.advance(rk); err != nil {
				out[rk.id] = err
				if firstOnly {
					return out
				}
				rk.broken, rk.cur, rk.queue = err, nil, nil
				continue
			}
			if rk.cur == nil {
				if len(rk.queue) > 0 { // its next Launch begins at a moment of its own
					busy = true
					runnable = append(runnable, ref{rk.id, begins})
					weight += fastWeight
				}
				continue
			}
			busy = true
			for w := range rk.workers {
				if !rk.workers[w].done && s.ready(rk, w) {
					runnable = append(runnable, ref{rk.id, w})
					weight += rk.workers[w].weight()
				}
			}
		}
		if !busy {
			return out
		}
		if len(runnable) == 0 {
			err := errs.New(errs.ErrTimeout, "snactest: deadlock:\n%s", s.dump())
			for _, rk := range s.ranks {
				if rk.cur != nil {
					out[rk.id] = err
					if !firstOnly {
						rk.broken = err
					}
				}
			}
			return out
		}
		weightOf := func(p ref) int {
			if p.w == begins {
				return fastWeight
			}
			return s.ranks[p.r].workers[p.w].weight()
		}
		var pick ref
		for i, at := 0, s.rng.IntN(weight); ; i++ {
			if at -= weightOf(runnable[i]); at < 0 {
				pick = runnable[i]
				break
			}
		}
		rk := s.ranks[pick.r]
		var err error
		if pick.w == begins {
			err = s.begin(rk)
		} else {
			err = s.step(rk, pick.w)
		}
		if err != nil {
			out[rk.id] = err
			if firstOnly {
				return out
			}
			rk.broken, rk.cur, rk.queue = err, nil, nil
			continue
		}
		s.Steps++
	}
}

// begins, in place of a worker, is the moment a rank's next Launch begins.
// A GPU runs a rank's calls in turn, but when the next one begins is its
// stream's business (other work before it, a late launch): until then
// the rank is in no call, and no peer may push into its output.
const begins = -1

// advance finishes rank rk's current Launch when all its workers are done.
func (s *Sim) advance(rk *rank) error {
	if rk.cur == nil {
		return nil
	}
	for _, w := range rk.workers {
		if !w.done {
			return nil
		}
	}
	rk.cur = nil
	rk.calls++
	return nil
}

// begin starts rank rk's next Launch, reading every worker's epoch.
func (s *Sim) begin(rk *rank) error {
	rk.cur, rk.queue = rk.queue[0], rk.queue[1:]
	p, err := rk.cur.Plan.Unrolled() // the steps one by one, as the Atoms run a loop (snac.Unroll)
	if err == nil {
		err = errors.Join(engineSteps(p), sameAdvances(p))
	}
	rk.plan = p
	if err != nil {
		return fmt.Errorf("snactest: rank %d call %d: %w", rk.id, rk.calls, err)
	}
	rk.workers = make([]worker, len(p.Workers))
	rk.collStart = rk.epochs[snac.EpochSlot(snac.Collective, 0)]
	for i, wk := range p.Workers {
		rk.workers[i] = worker{pc: int(wk.First), end: int(wk.First + wk.Count), epoch: rk.epochs[snac.EpochSlot(wk.Channel, wk.Index)],
			slow: s.rng.IntN(slowOdds) == 0}
		if wk.Count == 0 {
			s.finish(rk, i)
		}
	}
	return nil
}

// engineSteps checks the contract of p's copy-engine workers
// (snac.EngineCopy): Copy, Notify, Wait and Advance steps only, and every
// Copy one contiguous run between plain memory at fixed addresses (no
// packets, no rows, no Half), so an Atom can hand it to a copy engine.
func engineSteps(p *snac.Plan) error {
	for w, wk := range p.Workers {
		if wk.Engine != snac.EngineCopy {
			continue
		}
		for i, st := range p.WorkerSteps(w) {
			switch {
			case st.Verb == snac.Notify || st.Verb == snac.Wait || st.Verb == snac.Advance:
			case st.Verb != snac.Copy:
				return errs.New(errs.ErrInternal, "copy-engine worker %d step %d: a %s", w, i, st.Verb)
			case st.Row != 0 || st.Dst.Half != 0 || st.Src[0].Half != 0 || st.Dst.Space == snac.SpacePacket || st.Src[0].Space == snac.SpacePacket:
				return errs.New(errs.ErrInternal, "copy-engine worker %d step %d: a copy of packets, rows or halves (%+v <- %+v)", w, i, st.Dst, st.Src[0])
			}
		}
	}
	return nil
}

// sameAdvances checks that the workers of each channel of p hold the same
// number of Advance steps, so they all end at the same epoch.
func sameAdvances(p *snac.Plan) error {
	calls := map[uint16]int{}
	for w, wk := range p.Workers {
		n := 0
		for _, st := range p.WorkerSteps(w) {
			if st.Verb == snac.Advance {
				n++
			}
		}
		if m, ok := calls[wk.Channel]; ok && m != n {
			return errs.New(errs.ErrInternal, "worker %d of channel %d holds %d Advance steps, another %d", w, wk.Channel, n, m)
		}
		calls[wk.Channel] = n
	}
	return nil
}

// finish applies the epoch rule when worker i has run its last step.
func (s *Sim) finish(rk *rank, i int) {
	w := &rk.workers[i]
	w.done = true
	wk := rk.plan.Workers[i]
	next := w.epoch + snac.EpochAdvance
	rk.epochs[snac.EpochSlot(wk.Channel, wk.Index)] = next
	if wk.Index != 0 {
		return
	}
	used := 0
	for _, o := range rk.plan.Workers {
		if o.Channel == wk.Channel {
			used++
		}
	}
	for idx := used; idx < snac.MaxWorkers; idx++ {
		rk.epochs[snac.EpochSlot(wk.Channel, uint16(idx))] = next
	}
}

func (s *Sim) dump() string {
	var b strings.Builder
	for _, rk := range s.ranks {
		if rk.cur == nil {
			fmt.Fprintf(&b, "rank %d: idle after %d calls\n", rk.id, rk.calls)
			continue
		}
		fmt.Fprintf(&b, "rank %d: call %d (%s, %d workers)\n", rk.id, rk.calls, rk.plan.Regime, len(rk.workers))
		for i, w := range rk.workers {
			if w.done {
				continue
			}
			st := rk.plan.Steps[w.pc]
			fmt.Fprintf(&b, "  worker %d (epoch %d) at step %d: %s slot %d delta %d (flag %d) bytes %d\n",
				i, w.epoch, w.pc, st.Verb, st.Slot, st.Delta, rk.flags[snac.SignalIndex(st.Slot%snac.NumSlots, uint64(max(target(&w, st.Delta), 0)))], st.Bytes)
		}
	}
	return b.String()
}
