package comm

import (
	"slices"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
)

// Zero-copy. A collective of copies or an AllReduce whose output lies in
// a window registered with WindowCollSymmetric (ncclCommWindowRegister
// with NCCL_WIN_COLL_SYMMETRIC) is planned with snac.Topology.Direct: its
// producers push straight into the consumers' outputs, which this rank
// reaches through the window's mapping of every rank's buffer. A
// communicator across nodes never does (its calls run as Programs). As with
// NCCL's symmetric kernels, the flag is the caller's promise that every
// rank passes its output at the same offset of the window: ranks that
// disagree (one in a window, one not) fail the call on its check words,
// bounded by the timeout, rather than move anything wrong.

// SymmetricWindowsHook, where set (by the C API, for its call cache),
// hears every change of a communicator's symmetric windows on this rank:
// its handle and the windows' byte ranges now, base and end in turn. It
// is called in the order of the changes, and must not call back into c.
var SymmetricWindowsHook func(handle uintptr, ranges []uint64)

// directWindow is one live symmetric window of this rank as the launch
// path reads it: its buffer here and every rank's, as this rank addresses
// them (0 for a rank it cannot reach).
type directWindow struct {
	window *window
	buff   uintptr
	size   uint64
	peers  [snac.MaxRanks]uintptr
}

// addDirect makes w's registration, just finished, serve direct calls.
func (c *Comm) addDirect(w *window, view atom.Window) {
	if w.flags&WindowCollSymmetric == 0 {
		return
	}
	d := directWindow{window: w, buff: w.buff, size: w.size}
	copy(d.peers[:], view.Peers())
	c.directMu.Lock()
	defer c.directMu.Unlock()
	var list []directWindow
	if old := c.direct.Load(); old != nil {
		list = slices.Clone(*old)
	}
	list = append(list, d)
	c.setDirect(list)
}

// dropDirect stops w serving direct calls, before its mapping goes.
func (c *Comm) dropDirect(w *window) {
	c.directMu.Lock()
	defer c.directMu.Unlock()
	old := c.direct.Load()
	if old == nil {
		return
	}
	c.setDirect(slices.DeleteFunc(slices.Clone(*old), func(d directWindow) bool { return d.window == w }))
}

// setDirect publishes list as c's symmetric windows (directMu held).
func (c *Comm) setDirect(list []directWindow) {
	if len(list) == 0 {
		c.direct.Store(nil)
	} else {
		c.direct.Store(&list)
	}
	if hook := SymmetricWindowsHook; hook != nil {
		ranges := make([]uint64, 0, 2*len(list))
		for _, d := range list {
			ranges = append(ranges, uint64(d.buff), uint64(d.buff)+d.size)
		}
		hook(c.handle, ranges)
	}
}

// DirectCall reports whether call, launched alone, would push straight
// into its outputs: its output lies in one of c's symmetric windows. The C
// API's call cache records no such call.
func (c *Comm) DirectCall(call *spec.Call) bool {
	var b atom.Buffers
	return c.directOf(call, &b)
}

// PushesDirect reports whether call pushes straight into its outputs
// where they lie in a symmetric window: its shape, size and c's settings
// (snac.DirectOn), whatever its buffers. The C API's call cache serves
// such a call from a record only where its output lies in none of c's.
func (c *Comm) PushesDirect(call *spec.Call) bool {
	return c.plans != nil && c.plans.pushes(call) // none across nodes
}

// directOf reports whether call, launched alone, pushes straight into the
// outputs: its Plan would (PushesDirect), and its output lies in one of this
// rank's symmetric windows; it then fills b.PeerRecv with every rank's
// output. It allocates nothing and takes no lock.
func (c *Comm) directOf(call *spec.Call, b *atom.Buffers) bool {
	list := c.direct.Load()
	if list == nil || !c.PushesDirect(call) {
		return false
	}
	_, out := call.Extents()
	for i := range *list {
		d := &(*list)[i]
		if call.Recv < d.buff || uint64(call.Recv-d.buff) > d.size || out > d.size-uint64(call.Recv-d.buff) {
			continue
		}
		off := call.Recv - d.buff
		for q := range c.nranks {
			if d.peers[q] == 0 {
				return false
			}
			b.PeerRecv[q] = d.peers[q] + off
		}
		return true
	}
	return false
}
