package snac

import (
	"purlin/errs"
)

// Sizing rules. They are functions of the topology and of lengths both ends
// of every transfer know, so every rank derives the same geometry.
const (
	unit = 16 // transfers split among workers and chunks in 16-byte units
	// workerGrain is the fewest bytes of the longest transfer that justify
	// one more worker in the staged regimes; packetGrain the same for packets.
	workerGrain = 8 << 10
	packetGrain = 1 << 10
	// maxChunks bounds the chunks of one worker, so flag deltas stay far
	// below EpochAdvance.
	maxChunks = 1 << 12
	// packetWorkers bounds the workers of a call of packets: its time is
	// the flight of one packet, not bandwidth, so more workers only cost
	// their start (the staged regimes take every worker the topology has).
	packetWorkers = 32
	// localGrain is the bytes of a local copy that justify one more worker
	// of a staged call's local copies (build), and the most a call of
	// packets copies on its one aside worker (emit).
	localGrain = 64 << 10
	// maxLocalWorkers bounds the workers a staged call keeps for its local
	// copies (localWorkers).
	maxLocalWorkers = 8
)

// localWorkers is how many of w workers a staged call that copies locally
// keeps for those copies. A data worker both pushes and copies out what it
// receives, so at a few blocks the local copy (about 49 GB/s a block within
// an H200) bounds the call unless it gets about a third of them; past 8
// (about 390 GB/s) the link bounds it instead. On 2x H200, AllGather of
// 1 GiB with an eighth of the blocks for its copy moved 49, 98 and 195
// GB/s at 8, 16 and 32 blocks: one, two and four blocks' copy rate.
func localWorkers(w int) int {
	return max(1, min(w/3, maxLocalWorkers))
}

// geometry is how one Plan lays transfers over workers, chunks and staging.
type geometry struct {
	workers int
	// grain is the bytes transfers are split in among workers and chunks:
	// unit, or whole rows of an AllReduce with an epilogue (Grain).
	grain  uint64
	chunk  uint64 // bytes of one transfer's chunk (multiple of grain)
	region uint64 // bytes of staging each worker owns in a half
	segs   int    // chunk-sized segments in one slot (one per destination, or one)
	slots  int    // slots in a worker's region
}

// newGeometry sizes workers, chunks and slots for transfers of at most
// longest bytes, staged into a half of half bytes with segs segments a slot.
// longest must be known to every rank; when it is not (AllToAllV), pass
// fixed: the Plan then uses all topo.Workers and a chunk size that does not
// depend on any length. Pieces are whole multiples of split bytes (unit, or
// Grain's rows).
func newGeometry(t Topology, half, longest uint64, segs int, packetOnly, fixed bool, split uint64) (geometry, error) {
	grain := uint64(workerGrain)
	if packetOnly {
		grain = packetGrain
	}
	w := int(min(ceilDiv(longest, grain), uint64(MaxWorkers)))
	if fixed {
		w = MaxWorkers
	}
	w = max(1, min(w, t.Workers, MaxWorkers))
	if packetOnly {
		w = min(w, packetWorkers)
	}
	if !fixed {
		w = max(1, min(w, int(min(ceilDiv(longest, split), MaxWorkers)))) // no worker without a grain (an epilogue's rows)
	}
	for w > 1 && half/uint64(w) < uint64(segs)*split {
		w--
	}
	g := geometry{workers: w, segs: segs, grain: split}
	if packetOnly {
		return g, nil
	}
	g.region = half / uint64(w) / unit * unit
	g.chunk = min(max(t.ChunkMax/split, 1)*split, g.region/uint64(segs)/split*split)
	if g.chunk == 0 {
		return g, errs.New(errs.ErrInvalidUsage, "snac: staging half of %d bytes cannot hold %d segments of %d bytes", half, segs, split)
	}
	g.slots = int(g.region / (uint64(segs) * g.chunk))
	if fixed {
		return g, nil
	}
	return g.within(longest, maxChunks)
}

// within is g with chunks grown, where they fit its region, so that no
// worker moves more than most chunks of a transfer of longest bytes.
func (g geometry) within(longest uint64, most int) (geometry, error) {
	if g.chunks(longest) <= most {
		return g, nil
	}
	g.chunk = roundUp(ceilDiv(longest, uint64(g.workers)*uint64(most)), g.grain)
	if uint64(g.segs)*g.chunk > g.region {
		return g, errs.New(errs.ErrUnsupported, "snac: %d bytes need more than %d chunks of staging", longest, most)
	}
	g.slots = int(g.region / (uint64(g.segs) * g.chunk))
	return g, nil
}

// span returns worker w's byte range of a transfer of length bytes: the
// transfer's grains split as evenly as possible among the workers.
func (g geometry) span(length uint64, w int) (lo, hi uint64) {
	return split(length, g.grain, g.workers, w)
}

// split returns part i of n of length bytes cut in grains of grain bytes,
// as evenly as possible.
func split(length, grain uint64, n, i int) (lo, hi uint64) {
	grains := ceilDiv(length, grain)
	lo = min(grains*uint64(i)/uint64(n)*grain, length)
	hi = min(grains*uint64(i+1)/uint64(n)*grain, length)
	return lo, hi
}

// piece returns chunk c of worker w's range of a transfer; lo == hi when empty.
func (g geometry) piece(length uint64, w, c int) (lo, hi uint64) {
	a, b := g.span(length, w)
	lo = min(a+uint64(c)*g.chunk, b)
	hi = min(lo+g.chunk, b)
	return lo, hi
}

// chunks is the number of chunks of the longest worker range of a transfer.
func (g geometry) chunks(length uint64) int {
	if g.chunk == 0 {
		return 0
	}
	longestRange := ceilDiv(ceilDiv(length, g.grain), uint64(g.workers)) * g.grain
	return int(ceilDiv(min(longestRange, roundUp(length, g.grain)), g.chunk))
}

// ring reports whether a transfer reuses slots (needs drain signals).
func (g geometry) ring(length uint64) bool { return g.chunks(length) > g.slots }

// stageOff is where segment seg of chunk c of worker w lies in a half.
func (g geometry) stageOff(w, c, seg int) uint64 {
	return uint64(w)*g.region + uint64(c%g.slots)*uint64(g.segs)*g.chunk + uint64(seg)*g.chunk
}

// regime names what the longest staged transfer needs.
func (g geometry) regime(length uint64) Regime {
	switch k := g.chunks(length); {
	case k <= 1:
		return RegimeStaged
	case k <= g.slots:
		return RegimeChunked
	}
	return RegimeRing
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }
