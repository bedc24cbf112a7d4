package snac

import (
	"fmt"
	"slices"

	"purlin/errs"
)

// Loops. A ring moves more chunks through a worker than its region has
// staging slots, and from chunk `slots` on every chunk is the one `slots`
// before it again: the same staging, its pieces of the caller's buffers
// slots chunks further on, its flags slots higher. Where the pieces are
// whole, the builder emits one such cycle of chunks under a Repeat step
// instead of every chunk (emitChunks), so a ring's Plan stops growing with
// the message: its building, its device copy and its upload cost what a
// few cycles cost, not what every chunk of a GiB does.
//
// A loop's body holds only plain Copy, Reduce, Notify and Wait steps: no
// packets (their flags carry the epoch, not the chunk), no strided Refs
// (a shifted row would start elsewhere in its row), no Advance, Epilogue
// or Repeat; and it never ends its worker's steps (closeLoop). An Atom
// runs it as Unroll says; the CUDA kernel does the same as it loads the
// body's steps (csrc/run.cu).

// minRepetitions is the fewest repetitions a loop is emitted for: one
// cycle of chunks fewer than written out.
const minRepetitions = 2

// repeated is body step s of loop l (a Repeat step) as it runs in
// repetition r.
func (l *Step) repeated(s Step, r uint64) Step {
	if r == 0 {
		return s
	}
	switch s.Verb {
	case Notify, Wait:
		s.Delta += int64(r) * l.Delta
	case Copy, Reduce:
		s.Dst = l.shifted(s.Dst, r)
		for j := range max(1, int(s.NSrc)) {
			s.Src[j] = l.shifted(s.Src[j], r)
		}
	}
	return s
}

// shifted is Ref x in repetition r of loop l: r*l.Check bytes on where it
// lies in the caller's buffers (this rank's or a peer's output), unchanged
// in staging.
func (l *Step) shifted(x Ref, r uint64) Ref {
	if x.Space.caller() {
		x.Off += r * l.Check
	}
	return x
}

// Unroll calls f with each step worker w runs, in order, a loop's body
// once per repetition as it runs then; i is where the step lies among the
// worker's steps. It stops at f's first error, and fails on a loop an
// Atom could not run (loopValid).
func (p *Plan) Unroll(w int, f func(i int, s *Step) error) error {
	steps := p.WorkerSteps(w)
	for i := 0; i < len(steps); i++ {
		l := &steps[i]
		if l.Verb != Repeat {
			if err := f(i, l); err != nil {
				return err
			}
			continue
		}
		if err := loopValid(steps, i); err != nil {
			return err
		}
		body := steps[i+1 : i+1+int(l.Slot)]
		for r := range l.Bytes {
			for j := range body {
				s := l.repeated(body[j], r)
				if err := f(i+1+j, &s); err != nil {
					return err
				}
			}
		}
		i += len(body)
	}
	return nil
}

// Unrolled is p with every loop written out (p itself when it has none):
// the steps an Atom runs, one by one.
func (p *Plan) Unrolled() (*Plan, error) {
	if !holdsLoop(p.Steps) {
		return p, nil
	}
	out := *p
	out.Steps, out.Workers = nil, append([]Worker(nil), p.Workers...)
	for w := range p.Workers {
		first := len(out.Steps)
		err := p.Unroll(w, func(_ int, s *Step) error {
			out.Steps = append(out.Steps, *s)
			return nil
		})
		if err != nil {
			return nil, err
		}
		out.Workers[w].First, out.Workers[w].Count, out.Workers[w].Loops = uint32(first), uint32(len(out.Steps)-first), 0
	}
	return &out, nil
}

// LoopsValid checks every loop of p (loopValid), and that the workers
// with one, and only they, are marked so (Worker.Loops).
func (p *Plan) LoopsValid() error {
	for w := range p.Workers {
		steps := p.WorkerSteps(w)
		for i := range steps {
			if steps[i].Verb == Repeat {
				if err := loopValid(steps, i); err != nil {
					return fmt.Errorf("worker %d: %w", w, err)
				}
			}
		}
		if loops := loopsOf(steps); p.Workers[w].Loops != loops {
			return errs.New(errs.ErrInternal, "snac: worker %d marked %d for loops, holds %d", w, p.Workers[w].Loops, loops)
		}
	}
	return nil
}

// markLoops sets each worker's Loops from its steps.
func (p *Plan) markLoops() {
	for w := range p.Workers {
		p.Workers[w].Loops = loopsOf(p.WorkerSteps(w))
	}
}

// loopsOf is Worker.Loops of a worker of these steps.
func loopsOf(steps []Step) uint8 {
	if holdsLoop(steps) {
		return 1
	}
	return 0
}

// holdsLoop reports whether steps hold a Repeat.
func holdsLoop(steps []Step) bool {
	return slices.ContainsFunc(steps, func(s Step) bool { return s.Verb == Repeat })
}

// loopValid checks the loop at steps[i]: a body of at least one step inside
// the worker's, and not its last (closeLoop), of the steps a loop may hold,
// whose flag deltas stay below EpochAdvance and offsets inside 48 bits in
// every repetition.
func loopValid(steps []Step, i int) error {
	l := &steps[i]
	if l.Slot == 0 || uint64(i)+1+uint64(l.Slot) >= uint64(len(steps)) || l.Bytes == 0 || l.Bytes > EpochAdvance || l.Delta < 0 ||
		l.Bytes-1 > (1<<48)/max(1, l.Check) || l.Bytes-1 > EpochAdvance/2/uint64(max(1, l.Delta)) {
		return errs.New(errs.ErrInternal, "snac: step %d: loop of %d steps (of %d after it) %d times, by %d and %d bytes",
			i, l.Slot, len(steps)-i-1, l.Bytes, l.Delta, l.Check)
	}
	for j, s := range steps[i+1 : i+1+int(l.Slot)] {
		ok := s.Verb == Notify || s.Verb == Wait
		if s.Verb == Copy || s.Verb == Reduce {
			ok = s.Row == 0 && s.Dst.Space != SpacePacket
			for _, r := range s.Src[:max(1, int(s.NSrc))] {
				ok = ok && r.Space != SpacePacket
			}
		}
		if !ok || s.Delta < -EpochAdvance/2 || s.Delta > EpochAdvance/2 {
			return errs.New(errs.ErrInternal, "snac: step %d: a loop cannot hold step %d (%s, delta %d, row %d, packets or not)",
				i, i+1+j, s.Verb, s.Delta, s.Row)
		}
	}
	return nil
}

// closeLoop keeps the last loop of a worker, whose steps are steps[first:],
// from ending them: where its body is their last steps, its last repetition
// is written out after it. An Atom's step loop may then end where the
// worker's steps do, without looking for a loop to go back to (csrc/run.cu).
func closeLoop(steps []Step, first int) []Step {
	last := -1
	for i := first; i < len(steps); i++ {
		if steps[i].Verb == Repeat {
			last = i
			i += int(steps[i].Slot)
		}
	}
	if last < 0 || last+1+int(steps[last].Slot) != len(steps) {
		return steps
	}
	l := steps[last]
	steps[last].Bytes--
	for j := last + 1; j < last+1+int(l.Slot); j++ {
		steps = append(steps, l.repeated(steps[j], l.Bytes-1))
	}
	return steps
}

// emitChunks emits chunks [0, n) of worker w with emit, of which the first
// whole have every piece whole (the chunk size): those from slots on that
// repeat a cycle of slots chunks exactly are emitted once, as a loop's body
// (when b.loops, off the copy engine, with at least minRepetitions cycles).
func (b *builder) emitChunks(w, n, whole int, emit func(c int)) {
	s := b.g.slots
	reps := 0
	if b.loops && !b.engine && s > 0 {
		reps = (min(whole, n) - s) / s
	}
	if reps < minRepetitions {
		for c := range n {
			emit(c)
		}
		return
	}
	for c := range s {
		emit(c)
	}
	at := len(b.steps[w])
	b.add(w, Step{Verb: Repeat})
	for c := s; c < 2*s; c++ {
		emit(c)
	}
	b.steps[w][at] = Step{Verb: Repeat, Slot: uint32(len(b.steps[w]) - at - 1), Bytes: uint64(reps),
		Delta: int64(s), Check: uint64(s) * b.g.chunk}
	for c := s + reps*s; c < n; c++ {
		emit(c)
	}
}

// whole is how many of worker w's chunks of a transfer of length bytes are
// whole (the chunk size).
func (g geometry) whole(length uint64, w int) int {
	lo, hi := g.span(length, w)
	return int((hi - lo) / g.chunk)
}
