package host

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/atom/atomtest"
	"purlin/snac"
)

func testTopo(n, r int) snac.Topology {
	return snac.Topology{NRanks: n, Rank: r, Workers: 4, StageHalf: 64 << 10, P2PHalf: 4 << 10, PacketMax: 8 << 10, ChunkMax: 16 << 10}
}

// newRanks sets up n ranks of one process; they are closed when the test ends.
func newRanks(t *testing.T, n int, timeout time.Duration) []*Rank {
	t.Helper()
	exs := atomtest.LocalWithTimeout(n, 10*time.Second)
	ranks := make([]*Rank, n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			ranks[r], errsOut[r] = NewRank(testTopo(n, r), exs[r], atom.Options{TimeoutNanos: int64(timeout)})
		})
	}
	wg.Wait()
	for _, err := range errsOut {
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, r := range ranks {
			r.Abort()
			require.NoError(t, r.Close())
		}
	})
	return ranks
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// planBuilder assembles a Plan worker by worker.
type planBuilder struct{ p snac.Plan }

func (b *planBuilder) worker(channel, index uint16, steps ...snac.Step) {
	b.p.Workers = append(b.p.Workers, snac.Worker{Channel: channel, Index: index, First: uint32(len(b.p.Steps)), Count: uint32(len(steps))})
	b.p.Steps = append(b.p.Steps, steps...)
}

func sendRef(off uint64) snac.Ref { return snac.Ref{Space: snac.SpaceSend, Off: off} }
func recvRef(off uint64) snac.Ref { return snac.Ref{Space: snac.SpaceRecv, Off: off} }
func stageRef(t snac.Topology, rank int, off uint64) snac.Ref {
	return snac.Ref{Space: snac.SpaceStage, Rank: uint8(rank), Off: off, Half: t.StageHalf}
}
func packetRef(t snac.Topology, rank, src int) snac.Ref {
	return snac.Ref{Space: snac.SpacePacket, Rank: uint8(rank), Off: t.PacketOff(src), Half: t.PacketHalf()}
}

func copyStep(dst, src snac.Ref, n uint64, check uint64) snac.Step {
	return snac.Step{Verb: snac.Copy, Dst: dst, Src: [snac.MaxSrc]snac.Ref{src}, Bytes: n, Delta: 1, Check: check}
}
func notifyStep(peer int, slot uint32, delta int64, check uint64) snac.Step {
	return snac.Step{Verb: snac.Notify, Peer: uint8(peer), Slot: slot, Delta: delta, Check: check}
}
func waitStep(slot uint32, delta int64, check uint64) snac.Step {
	return snac.Step{Verb: snac.Wait, Slot: slot, Delta: delta, Check: check}
}

const testDoneCheck = 0xd0d0d0d0d0d0d0d0

// allGather is a one-worker AllGather of size bytes per rank, staged or
// through packets, optionally with the done rule, so calls can be launched
// back to back without synchronizing.
func allGather(t snac.Topology, size uint64, packets, done bool, check uint64) *snac.Plan {
	me := t.Rank
	var steps []snac.Step
	doneSlot := func(reader int) uint32 { return snac.FlagSlot(snac.Collective, snac.FlagDone, reader, 0) }
	readySlot := func(src int) uint32 { return snac.FlagSlot(snac.Collective, snac.FlagReady, src, 0) }
	for q := range t.NRanks {
		if q != me && done {
			steps = append(steps, waitStep(doneSlot(q), snac.DoneDelta, testDoneCheck))
		}
	}
	if packets {
		for q := range t.NRanks {
			if q != me {
				steps = append(steps, copyStep(packetRef(t, q, me), sendRef(0), size, check))
			}
		}
	} else {
		steps = append(steps, copyStep(stageRef(t, me, 0), sendRef(0), size, check))
		for q := range t.NRanks {
			if q != me {
				steps = append(steps, notifyStep(q, readySlot(me), 1, check))
			}
		}
	}
	steps = append(steps, copyStep(recvRef(uint64(me)*size), sendRef(0), size, check))
	for q := range t.NRanks {
		if q == me {
			continue
		}
		if packets {
			steps = append(steps, copyStep(recvRef(uint64(q)*size), packetRef(t, me, q), size, check))
		} else {
			steps = append(steps, waitStep(readySlot(q), 1, check),
				copyStep(recvRef(uint64(q)*size), stageRef(t, q, 0), size, check))
		}
	}
	for q := range t.NRanks {
		if q != me && done {
			steps = append(steps, notifyStep(q, doneSlot(me), snac.EpochAdvance, testDoneCheck))
		}
	}
	var b planBuilder
	b.worker(snac.Collective, 0, steps...)
	b.p.NRanks = t.NRanks
	return &b.p
}

// syncAll waits for every rank and returns their errors.
func syncAll(ranks []*Rank) []error {
	out := make([]error, len(ranks))
	for i, r := range ranks {
		out[i] = r.Synchronize()
	}
	return out
}

func pattern(rank, call int, n uint64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rank*37 + call*11 + i*7 + i>>8)
	}
	return b
}
