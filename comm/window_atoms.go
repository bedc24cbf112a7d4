package comm

import (
	"purlin/atom/cuda"
	"purlin/atom/host"
	"purlin/errs"
)

// mapWindow asks c's Atom to make every rank's window buffer addressable
// on this rank. It is collective over c's bootstrap; on failure every rank
// fails.
func mapWindow(c *Comm, buff uintptr, size uint64) (peerView, error) {
	switch dp := c.dp.(type) {
	case *host.Rank:
		w, err := host.MapWindow(c.boot, buff, size)
		if err != nil {
			return nil, err
		}
		return w, nil
	case *cuda.Rank:
		w, err := dp.MapWindow(c.boot, buff, size)
		if err != nil {
			return nil, err
		}
		return w, nil
	}
	return nil, errs.New(errs.ErrUnsupported, "CommWindowRegister: the %s Atom has no windows", c.atomName)
}
