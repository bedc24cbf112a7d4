package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// What no transfer waits for runs beside the data on a worker of its own,
// the Plan's last, when the data leaves one free: a small rooted call's
// agreement (notifies, then waits; a rooted call of packets always leaves
// one), and a small call's local copies. A call whose data takes every
// worker keeps them on its data workers.
func TestAsideWorker(t *testing.T) {
	topo := snac.Topology{NRanks: 4, Rank: 0, Workers: 8, StageHalf: 64 << 20,
		P2PHalf: 1 << 20, PacketMax: 64 << 10, ChunkMax: 1 << 20}
	build := func(coll spec.Collective, count uint64) *snac.Plan {
		p, err := snac.Build(&spec.Call{Coll: coll, Count: count, Type: spec.Float32, Root: 0, Rank: 0, NRanks: 4,
			Send: 1 << 30, Recv: 2 << 30}, topo) // buffers apart: an in-place call copies nothing locally
		require.NoError(t, err)
		return p
	}
	verbs := func(steps []snac.Step) (v []snac.Verb) {
		for _, s := range steps {
			v = append(v, s.Verb)
		}
		return v
	}
	agreeSteps := func(steps []snac.Step) (n int) {
		for _, s := range steps {
			if (s.Verb == snac.Notify || s.Verb == snac.Wait) && snac.SlotKind(s.Slot) == snac.FlagAgree {
				n++
			}
		}
		return n
	}

	for _, coll := range []spec.Collective{spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		small := build(coll, 2)
		last := small.WorkerSteps(len(small.Workers) - 1)
		require.Equal(t, []snac.Verb{snac.Notify, snac.Notify, snac.Notify, snac.Wait, snac.Wait, snac.Wait}, verbs(last), "%s", coll)
		require.Zero(t, agreeSteps(small.WorkerSteps(0)), "%s: worker 0 holds only data", coll)

		full := build(coll, 4<<10) // packets that could fill every worker leave one to the agreement
		require.Len(t, full.Workers, topo.Workers, "%s", coll)
		require.Equal(t, 6, agreeSteps(full.WorkerSteps(topo.Workers-1)), "%s", coll)

		large := build(coll, 1<<20)
		require.Equal(t, 6, agreeSteps(large.WorkerSteps(0)), "%s: every worker moves data; worker 0 agrees", coll)
	}
	for _, coll := range []spec.Collective{spec.AllGather, spec.AllToAll} {
		small := build(coll, 4)
		last := small.WorkerSteps(len(small.Workers) - 1)
		require.Len(t, last, 1, "%s", coll)
		require.Equal(t, snac.Copy, last[0].Verb, "%s", coll)
		require.Equal(t, snac.SpaceSend, last[0].Src[0].Space, "%s", coll)
		require.Equal(t, snac.SpaceRecv, last[0].Dst.Space, "%s", coll)

		// A local copy longer than one worker should take is spread over
		// the data workers, even with workers to spare.
		wide := snac.Topology{NRanks: 4, Rank: 0, Workers: 64, StageHalf: 64 << 20,
			P2PHalf: 1 << 20, PacketMax: 1 << 20, ChunkMax: 1 << 20}
		p, err := snac.Build(&spec.Call{Coll: coll, Count: 64 << 10, Type: spec.Float32, Rank: 0, NRanks: 4,
			Send: 1 << 30, Recv: 2 << 30}, wide)
		require.NoError(t, err)
		require.Equal(t, snac.RegimePacket, p.Regime, "%s", coll)
		require.Len(t, p.Workers, 32, "%s: the packets' workers and no aside", coll)
		for w := range p.Workers {
			locals := 0
			for _, s := range p.WorkerSteps(w) {
				if s.Verb == snac.Copy && s.Src[0].Space == snac.SpaceSend && s.Dst.Space == snac.SpaceRecv {
					locals++
				}
			}
			require.Equal(t, 1, locals, "%s worker %d copies its share", coll, w)
		}
	}
}

// A staged call copies its local data on workers of its own, after the data
// workers, so the copy overlaps the transfers; every collective that copies
// locally on some rank reserves them on every rank.
func TestStagedLocalCopiesOnWorkersOfTheirOwn(t *testing.T) {
	const n = 4
	for coll := spec.Collective(0); coll < spec.SendRecv; coll++ {
		for r := range n {
			topo := snac.Topology{NRanks: n, Rank: r, Workers: 16, StageHalf: 64 << 20,
				P2PHalf: 1 << 20, PacketMax: 64 << 10, ChunkMax: 1 << 20}
			c := &spec.Call{Coll: coll, Count: 1 << 20, Type: spec.Float32, Root: 1, Rank: r, NRanks: n, Send: 1 << 40, Recv: 2 << 40}
			if coll.Vectored() {
				c.Counts, c.Displs = make([]uint64, n), make([]uint64, n)
				c.SendCounts, c.RecvCounts, c.SendDispls, c.RecvDispls = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
				for q := range n {
					c.Counts[q], c.Displs[q] = 1<<18, uint64(q)<<18
					c.SendCounts[q], c.RecvCounts[q], c.SendDispls[q], c.RecvDispls[q] = 1<<18, 1<<18, uint64(q)<<18, uint64(q)<<18
				}
			}
			p, err := snac.Build(c, topo)
			require.NoError(t, err, "%s rank %d", coll, r)
			for w := range p.Workers {
				local, other := 0, 0
				for _, s := range p.WorkerSteps(w) {
					if s.Verb == snac.Copy && s.Src[0].Space == snac.SpaceSend && s.Dst.Space == snac.SpaceRecv {
						local++
					} else {
						other++
					}
				}
				require.False(t, local > 0 && other > 0, "%s rank %d worker %d mixes local copies with transfers", coll, r, w)
			}
		}
	}
}
