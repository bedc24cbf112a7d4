package host

import (
	"cmp"

	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
)

// epilogue runs an Epilogue step (snac.Epilogue): whole rows of the output
// and, alongside them, of the call's residual, quantized output and scales.
func (x *worker) epilogue(s *snac.Step) error {
	e, err := epilogueOf(x.plan.Type, s)
	if err != nil {
		return err
	}
	if int(s.Dst.Rank) >= len(x.bufs) || s.Dst.Space != snac.SpaceRecv {
		return errs.New(errs.ErrInternal, "epilogue on %v buffer %d of a Launch with %d", spaceName(s.Dst.Space), s.Dst.Rank, len(x.bufs))
	}
	b := x.bufs[s.Dst.Rank]
	size := uint64(e.Type.Size())
	rowBytes := uint64(e.Hidden) * size
	off, rows := s.Dst.Off, s.Bytes/rowBytes
	// The step's rows of every buffer (spec.Epilogue.From).
	at := spec.Epilogue{Kind: e.Kind, Hidden: uint64(e.Hidden), Residual: b.Residual, Quant: b.Quant, Scales: b.Scales}.From(off/size, e.Type)
	need := func(p uintptr, name string) error {
		if p == 0 {
			return errs.New(errs.ErrInternal, "epilogue %s: the %s buffer is null", e.Kind, name)
		}
		return nil
	}
	var residual, weight, quant, scales []byte
	if e.Kind&spec.EpilogueResidualAdd != 0 {
		if err := need(b.Residual, "residual"); err != nil {
			return err
		}
		residual = bytesAt(at.Residual, s.Bytes)
	}
	if e.Kind&spec.EpilogueRMSNorm != 0 {
		if err := need(b.Weight, "weight"); err != nil {
			return err
		}
		weight = bytesAt(b.Weight, rowBytes)
	}
	if e.Kind&spec.EpilogueQuantFP8 != 0 {
		if err := cmp.Or(need(b.Quant, "quant"), need(b.Scales, "scales")); err != nil {
			return err
		}
		quant = bytesAt(at.Quant, s.Bytes/size)
		scales = bytesAt(at.Scales, 4) // the tensor's; From leaves it where it is
		if e.Kind&spec.EpilogueRowScale != 0 {
			scales = bytesAt(at.Scales, 4*rows)
		}
	}
	if err := need(b.Recv, "output"); err != nil {
		return err
	}
	e.Run(bytesAt(b.Recv+uintptr(off), s.Bytes), residual, weight, quant, scales)
	return nil
}

// epilogueOf decodes an Epilogue step's fields, refusing what no Plan holds.
func epilogueOf(t spec.DataType, s *snac.Step) (numeric.EpilogueRows, error) {
	kind, hidden, eps := s.EpilogueOf()
	e := numeric.EpilogueRows{Type: t, Kind: kind, Hidden: int(hidden), Eps: eps}
	if e.Hidden == 0 || !t.EpilogueType() || s.Bytes%(uint64(e.Hidden)*uint64(t.Size())) != 0 || s.Dst.Off%(uint64(e.Hidden)*uint64(t.Size())) != 0 {
		return e, errs.New(errs.ErrInternal, "epilogue %s of %d bytes at %d: rows of %d %s", e.Kind, s.Bytes, s.Dst.Off, e.Hidden, t)
	}
	return e, nil
}
