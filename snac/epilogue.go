package snac

import (
	"math"

	"purlin/errs"
	"purlin/spec"
)

// An AllReduce with an epilogue (spec.Epilogue) is the same Plan with an
// Epilogue step after the steps that finish each range of the output: its
// transfers are split in whole rows (Grain), so every range a worker
// writes into the output is whole rows, and each rank applies the epilogue
// to every row of its own output. No rank sends what its epilogue made:
// the reduced values travel, and each rank adds its own residual, as the
// unfused sequence does. An AllGatherV with an epilogue (the last phase of
// an AllReduce across nodes) is planned alike: its parts are whole rows,
// and it reads its input, never its output, so a row's epilogue is safe
// once the row is written.

// Grain is the bytes c's transfers are split in: 16-byte units, or for
// an epilogue the fewest whole rows that are whole units. A call cut in
// calls of whole grains (a pipelined call across nodes) keeps its rows
// whole and its copies aligned.
func Grain(c *spec.Call) uint64 {
	if c.Epilogue.Kind == 0 {
		return unit
	}
	row := c.Epilogue.Hidden * uint64(c.Type.Size())
	return row / gcd(row, unit) * unit
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// epilogueStep is the Epilogue step of c over bytes [off, off+n) of its output.
func epilogueStep(c *spec.Call, off, n uint64) Step {
	e := &c.Epilogue
	return Step{Verb: Epilogue, Peer: uint8(e.Kind), Slot: uint32(e.Hidden), Check: uint64(math.Float32bits(e.Eps)),
		Bytes: n, Dst: Ref{Space: SpaceRecv, Off: off}}
}

// EpilogueOf reads what an Epilogue step holds (epilogueStep wrote it): the
// epilogue's kind, its row length in elements and its epsilon.
func (s *Step) EpilogueOf() (kind spec.EpilogueKind, hidden uint32, eps float32) {
	return spec.EpilogueKind(s.Peer), s.Slot, math.Float32frombits(uint32(s.Check))
}

// withEpilogue adds c's Epilogue steps to p. A range a step writes into the
// output gets its epilogue after the last step of that worker that reads
// or writes it (a reduced shard is pushed to the peers first) and the
// notifies that follow it. Rows no step writes (an in-place call on one
// rank) get theirs on worker 0. Every row gets exactly one.
func withEpilogue(p *Plan, c *spec.Call) (*Plan, error) {
	row := c.Epilogue.Hidden * uint64(c.Type.Size())
	_, length := c.Extents()
	if length == 0 {
		return p, nil
	}
	done := make([]bool, length/row)
	mark := func(off, n uint64) error {
		if off%row != 0 || n%row != 0 {
			return errs.New(errs.ErrInternal, "snac: %s writes [%d,+%d) of its output, not whole rows of %d bytes", c, off, n, row)
		}
		for r := off / row; r < (off+n)/row; r++ {
			if done[r] {
				return errs.New(errs.ErrInternal, "snac: %s writes row %d of its output twice", c, r)
			}
			done[r] = true
		}
		return nil
	}
	out := &Plan{Type: p.Type, Op: p.Op, NRanks: p.NRanks, Rank: p.Rank, Regime: p.Regime}
	for w, wk := range p.Workers {
		steps := p.WorkerSteps(w)
		after := make([][]Step, len(steps))
		for i := range steps {
			s := &steps[i]
			if (s.Verb != Copy && s.Verb != Reduce) || s.Dst.Space != SpaceRecv || s.Bytes == 0 {
				continue
			}
			if s.Dst.Pitch != 0 {
				return nil, errs.New(errs.ErrInternal, "snac: %s writes its output in rows", c)
			}
			if err := mark(s.Dst.Off, s.Bytes); err != nil {
				return nil, err
			}
			last := i
			for j := i + 1; j < len(steps); j++ {
				if touches(&steps[j], s.Dst.Off, s.Bytes) {
					last = j
				}
			}
			for last+1 < len(steps) && steps[last+1].Verb == Notify {
				last++
			}
			after[last] = append(after[last], epilogueStep(c, s.Dst.Off, s.Bytes))
		}
		first := len(out.Steps)
		for i := range steps {
			out.Steps = append(out.Steps, steps[i])
			out.Steps = append(out.Steps, after[i]...)
		}
		wk.First, wk.Count = uint32(first), uint32(len(out.Steps)-first)
		out.Workers = append(out.Workers, wk)
	}
	for r := 0; r < len(done); {
		if done[r] {
			r++
			continue
		}
		end := r
		for end < len(done) && !done[end] {
			end++
		}
		if len(out.Workers) == 0 {
			out.Workers = append(out.Workers, Worker{Channel: Collective})
		}
		s := epilogueStep(c, uint64(r)*row, uint64(end-r)*row)
		out.Steps = append(out.Steps[:out.Workers[0].Count], append([]Step{s}, out.Steps[out.Workers[0].Count:]...)...)
		out.Workers[0].Count++
		for w := 1; w < len(out.Workers); w++ {
			out.Workers[w].First++
		}
		r = end
	}
	return out, nil
}

// touches reports whether step s reads or writes output bytes [off, off+n).
func touches(s *Step, off, n uint64) bool {
	refs := append([]Ref{s.Dst}, s.Src[:max(1, int(s.NSrc))]...)
	if s.Verb != Copy && s.Verb != Reduce {
		return false
	}
	for _, r := range refs {
		if r.Space == SpaceRecv && r.Rank == 0 && r.Off < off+n && off < r.Off+s.Bytes {
			return true
		}
	}
	return false
}
