package comm

import (
	"encoding/binary"
	"slices"
	"time"

	"purlin/errs"
)

// NoColor is NCCL_SPLIT_NOCOLOR: the rank takes part in the split but
// gets no communicator.
const NoColor = -1

// ShrinkAbort is NCCL_SHRINK_ABORT: abort the parent's work first (its
// peers are presumed dead).
const ShrinkAbort = 1

// Split is collective over c: every rank of c calls it. Ranks of one color
// form a new communicator, ordered by key, then by rank in c; NoColor gives
// nil. cfg nil means c's settings. The new communicator has a rendezvous of
// its own, hosted by its rank 0's process; c's bootstrap carries the
// colors and the new unique ids. Inside a group it returns at once (the
// new communicator is usable after GroupEnd).
func (c *Comm) Split(color, key int, cfg *Config) (*Comm, error) {
	if err := c.usable("CommSplit"); err != nil {
		return nil, err
	}
	if color < NoColor {
		return nil, errs.New(errs.ErrInvalidArgument, "CommSplit: color %d is negative and not NCCL_SPLIT_NOCOLOR", color)
	}
	conf := c.cfg
	if cfg != nil {
		conf = *cfg
	}
	return c.deferOrRun(color != NoColor, conf, func(child *Comm) error { return c.split(color, key, child) })
}

func (c *Comm) split(color, key int, child *Comm) error {
	var mine [8]byte
	binary.LittleEndian.PutUint32(mine[0:4], uint32(int32(color)))
	binary.LittleEndian.PutUint32(mine[4:8], uint32(int32(key)))
	all, err := c.boot.AllGather(mine[:])
	if err != nil {
		return errs.New(errs.ErrRemote, "CommSplit rank %d: exchanging colors: %v", c.rank, err)
	}
	type member struct{ key, parent int }
	var members []member
	for r, v := range all {
		if len(v) != 8 {
			return errs.New(errs.ErrRemote, "CommSplit: rank %d sent %d bytes for its color", r, len(v))
		}
		if int(int32(binary.LittleEndian.Uint32(v[0:4]))) == color && color != NoColor {
			members = append(members, member{int(int32(binary.LittleEndian.Uint32(v[4:8]))), r})
		}
	}
	slices.SortStableFunc(members, func(a, b member) int {
		if a.key != b.key {
			return a.key - b.key
		}
		return a.parent - b.parent
	})
	newRank := slices.IndexFunc(members, func(m member) bool { return m.parent == c.rank })
	var idBytes []byte
	if newRank == 0 {
		id, err := GetUniqueID()
		if err != nil {
			return err
		}
		idBytes = id[:]
	}
	ids, err := c.boot.AllGather(idBytes)
	if err != nil {
		return errs.New(errs.ErrRemote, "CommSplit rank %d: exchanging unique ids: %v", c.rank, err)
	}
	if child == nil {
		return nil
	}
	var id UniqueID
	if copy(id[:], ids[members[0].parent]) != UniqueIDBytes {
		return errs.New(errs.ErrRemote, "CommSplit: rank %d sent no unique id for color %d", members[0].parent, color)
	}
	child.rank, child.nranks = newRank, len(members)
	return child.init(id)
}

// Shrink makes a communicator of c's ranks that are not in exclude, in c's
// order; every such rank calls it, the excluded ones (dead, typically)
// need not. With ShrinkAbort in flags, c's running work is aborted first.
// The new rank 0 sends the new unique id to the others' mailboxes, so the
// excluded ranks are never waited for.
func (c *Comm) Shrink(exclude []int, cfg *Config, flags int) (*Comm, error) {
	if err := c.usable("CommShrink"); err != nil {
		return nil, err
	}
	var survivors []int
	for r := range c.nranks {
		if !slices.Contains(exclude, r) {
			survivors = append(survivors, r)
		}
	}
	for _, r := range exclude {
		if r < 0 || r >= c.nranks {
			return nil, errs.New(errs.ErrInvalidArgument, "CommShrink: excluded rank %d is not a rank of %d", r, c.nranks)
		}
		if r == c.rank {
			return nil, errs.New(errs.ErrInvalidArgument, "CommShrink: rank %d excludes itself", c.rank)
		}
	}
	if flags&ShrinkAbort != 0 {
		c.dp.Abort()
	}
	conf := c.cfg
	if cfg != nil {
		conf = *cfg
	}
	seq := c.shrinks.Add(1)
	return c.deferOrRun(true, conf, func(child *Comm) error { return c.shrink(survivors, seq, child) })
}

func (c *Comm) shrink(survivors []int, seq uint64, child *Comm) error {
	newRank := slices.Index(survivors, c.rank)
	deadline := time.Now().Add(c.cfg.timeout())
	var id UniqueID
	var err error
	if newRank == 0 {
		if id, err = GetUniqueID(); err != nil {
			return err
		}
		for _, r := range survivors[1:] {
			if err := c.boot.SendUniqueID(r, seq, id, deadline); err != nil {
				return err
			}
		}
	} else if id, err = c.boot.RecvUniqueID(survivors[0], seq, deadline); err != nil {
		return err
	}
	child.rank, child.nranks = newRank, len(survivors)
	return child.init(id)
}

// deferOrRun runs a communicator-making job now, or queues it on the
// calling thread's group. want says whether this rank gets a communicator.
func (c *Comm) deferOrRun(want bool, cfg Config, job func(child *Comm) error) (*Comm, error) {
	var child *Comm
	if want {
		var err error
		if child, err = newComm(cfg, 0, 0, c.device); err != nil {
			return nil, err
		}
		child.onGPU = c.onGPU // same device, same datapath rule as the parent
	}
	run := func() error {
		err := job(child)
		if err != nil && child != nil && child.state.Load() == stateInit {
			child.initErr = err
			child.state.Store(stateFailed)
			close(child.initDone)
		}
		return err
	}
	if g := currentGroup(); g != nil {
		if child != nil {
			child.deferred.Store(true)
		}
		g.jobs = append(g.jobs, run)
		return child, nil
	}
	if err := run(); err != nil {
		if child != nil {
			child.free(false)
		}
		return nil, err
	}
	return child, nil
}
