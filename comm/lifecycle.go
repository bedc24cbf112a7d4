package comm

import (
	"sync"
	"time"

	"purlin/errs"
)

// InitRank creates rank's communicator of nranks ranks at the rendezvous
// id names. Outside a group it waits for every rank (bounded by the
// timeout) when cfg.Blocking, or returns the Comm with errs.ErrInProgress
// and finishes in the background otherwise. Inside a group (of the calling
// OS thread) it returns the Comm at once; GroupEnd runs the init.
func InitRank(nranks int, id UniqueID, rank int, cfg Config, device int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, errs.New(errs.ErrInvalidArgument, "CommInitRank: rank %d is not a rank of %d", rank, nranks)
	}
	if _, err := id.Addr(); err != nil {
		return nil, err
	}
	device, onGPU := callerDevice(cfg.atom(), device)
	c, err := newComm(cfg, rank, nranks, device)
	if err != nil {
		return nil, err
	}
	c.onGPU = onGPU
	if g := currentGroup(); g != nil {
		c.deferred.Store(true)
		g.inits = append(g.inits, deferredInit{c, id})
		return c, nil
	}
	if !cfg.Blocking {
		go c.init(id)
		return c, errs.ErrInProgress
	}
	if err := c.init(id); err != nil {
		c.free(false)
		return nil, err
	}
	return c, nil
}

// InitAll creates ndev communicators of one clique in this process, rank i
// on device devlist[i] (i when devlist is nil), and waits for all of them.
func InitAll(ndev int, devlist []int) ([]*Comm, error) {
	if ndev < 1 {
		return nil, errs.New(errs.ErrInvalidArgument, "CommInitAll: ndev %d < 1", ndev)
	}
	if devlist != nil && len(devlist) < ndev {
		return nil, errs.New(errs.ErrInvalidArgument, "CommInitAll: devlist has %d entries for %d devices", len(devlist), ndev)
	}
	id, err := GetUniqueID()
	if err != nil {
		return nil, err
	}
	comms := make([]*Comm, ndev)
	errList := make([]error, ndev)
	var wg sync.WaitGroup
	for r := range ndev {
		dev := r
		if devlist != nil {
			dev = devlist[r]
		}
		c, err := newComm(DefaultConfig(), r, ndev, dev)
		if err != nil {
			errList[r] = err
			continue
		}
		c.onGPU = true // devlist names the devices, as NCCL's CommInitAll
		comms[r] = c
		wg.Go(func() { errList[r] = c.init(id) })
	}
	wg.Wait()
	for _, err := range errList {
		if err != nil {
			for _, c := range comms {
				if c != nil {
					c.free(false)
				}
			}
			return nil, err
		}
	}
	return comms, nil
}

// synchronizer is what an Atom offers to wait for all of a rank's work.
type synchronizer interface{ Synchronize() error }

// syncDatapath waits for all of c's launched work when its Atom offers it
// (the host Atom's queues; a GPU Atom's work is awaited on its streams) and
// returns that work's first error.
func (c *Comm) syncDatapath() error {
	if s, ok := c.dp.(synchronizer); ok {
		return s.Synchronize()
	}
	return nil
}

// Synchronize waits until all work launched on c (any stream) finished,
// and returns c's first error: its abort, or its work's first error (which
// names a gone peer when the work waited for it).
func (c *Comm) Synchronize() error {
	if err := c.usable("CommSynchronize"); err != nil {
		return err
	}
	c.syncDatapath() // its error is the datapath's AsyncError, reported below
	return c.AsyncError()
}

// Finalize waits for c's outstanding work (bounded: every wait of the
// datapath is) and makes c refuse new work. Destroy frees it.
func (c *Comm) Finalize() error {
	if err := c.usable("CommFinalize"); err != nil {
		return err
	}
	err := c.syncDatapath()
	c.state.CompareAndSwap(stateReady, stateFinalized)
	return err
}

// Destroy frees c after its work finished (finalized or not). The handle
// is dead afterwards.
func (c *Comm) Destroy() error {
	st := c.state.Load()
	if st == stateDestroyed {
		return errs.New(errs.ErrInvalidUsage, "CommDestroy: communicator %#x was destroyed", c.handle)
	}
	if st == stateInit && !c.deferred.Load() {
		if err := c.WaitInit(); err != nil && c.state.Load() == stateInit {
			return err
		}
	}
	var err error
	if c.state.Load() == stateReady { // Finalize has synchronized already
		err = c.syncDatapath()
	}
	c.free(true)
	return err
}

// Abort makes every wait of c's running work fail, tells the other ranks
// (their waits end with a remote error), and frees c. It is safe from any
// goroutine and never waits for a peer.
func (c *Comm) Abort() error {
	if c.state.Load() == stateDestroyed {
		return errs.New(errs.ErrInvalidUsage, "CommAbort: communicator %#x was destroyed", c.handle)
	}
	c.noteAsync(errs.New(errs.ErrAborted, "communicator %#x was aborted", c.handle))
	select {
	case <-c.cancel:
	default:
		close(c.cancel)
	}
	if c.state.Load() == stateInit && !c.deferred.Load() {
		select { // the init ends promptly once cancelled
		case <-c.initDone:
		case <-time.After(5 * time.Second):
		}
	}
	if c.boot != nil {
		c.boot.Abort()
	}
	if c.dp != nil {
		c.dp.Abort()
		c.syncDatapath() // returns promptly: every wait sees the abort
	}
	c.free(false)
	return nil
}

// free releases everything c holds; bye says whether the other ranks see
// a normal departure (Destroy) or a failure (Abort, failed init).
func (c *Comm) free(bye bool) {
	if c.state.Swap(stateDestroyed) == stateDestroyed {
		return
	}
	c.releaseWindows() // before the datapath goes: a CUDA window's imports live in its context
	if c.dp != nil {
		c.dp.Close()
	}
	if c.boot != nil {
		c.boot.Close(bye)
	}
	unregister(c)
}
