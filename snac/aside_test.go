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
	}
}
