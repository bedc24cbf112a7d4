package snac

import "purlin/spec"

// DoneCheck is the check word of every FlagDone notify and wait. Done flags
// are read two calls after they were raised, by calls of any shape, so they
// cannot carry a call's fingerprint. It is 0, the value check words hold
// from init, so the first calls' done waits (satisfied at once, before any
// done flag was raised) compare equal too. No call's fingerprint is 0
// (sum), so an Atom may skip the check word of a DoneCheck flag: writing
// and comparing it could tell nothing.
const DoneCheck uint64 = 0

// directWord stands for Topology.Direct in a call's fingerprint.
const directWord = 0xd1ec7

// fingerprint mixes words into a 64-bit check (FNV-1a over 64-bit words,
// then a final avalanche so nearby shapes differ in every bit).
type fingerprint uint64

const fnvOffset fingerprint = 14695981039346656037

func (f fingerprint) mix(words ...uint64) fingerprint {
	for _, w := range words {
		f ^= fingerprint(w)
		f *= 1099511628211
		f ^= f >> 29
	}
	return f
}

func (f fingerprint) sum() uint64 {
	x := uint64(f)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	if x == DoneCheck {
		x = 1
	}
	return x
}

// callCheck is the fingerprint of a call's shape as every rank sees it, and
// of the topology its Plan is derived for: fields that differ legitimately
// between ranks (buffers, this rank, the root of unrooted collectives, the op
// of copies) are left out. Ranks whose topologies differ (a setting that
// shapes Plans, given differently to one process) split a call differently,
// so their calls disagree whatever their sizes.
func callCheck(c *spec.Call, t Topology) uint64 {
	f := fnvOffset.mix(uint64(c.Coll), uint64(c.Type), uint64(c.NRanks), c.Count).mix(t.shared()...)
	if c.Coll.Reduces() {
		f = f.mix(uint64(c.Op.Kind))
	}
	if c.Coll.Rooted() {
		f = f.mix(uint64(c.Root))
	}
	if c.Coll.Vectored() && !c.Coll.PairCounts() { // counts equal on every rank
		f = f.mix(c.Counts...)
	}
	if c.Coll.Columns() {
		f = f.mix(c.Rows, c.Width)
	}
	if e := &c.Epilogue; e.Kind != 0 { // its rows split the transfers
		f = f.mix(uint64(e.Kind), e.Hidden)
	}
	return f.sum()
}

// pairCheck is the fingerprint of one pair's transfer (AllToAllV, SendRecv):
// only the pair's byte count is known to both ends, and the topology.
func pairCheck(c *spec.Call, t Topology, bytes uint64) uint64 {
	return fnvOffset.mix(uint64(c.Coll), uint64(c.Type), uint64(c.NRanks), bytes).mix(t.shared()...).sum()
}

// shared are the fields of t that every rank must share (all but Rank).
// LaunchWorkers, the copy engine's and Direct join them where they are set
// (the words of the others stay what they were): ranks that disagree on
// Direct disagree on the call, and so do ranks of which one has a copy
// engine the other has not, or another (its Plans keep no halves apart).
func (t Topology) shared() []uint64 {
	words := []uint64{uint64(t.NRanks), uint64(t.Workers), t.StageHalf, t.P2PHalf, t.PacketMax, t.ChunkMax}
	if t.LaunchWorkers != 0 {
		words = append(words, uint64(t.LaunchWorkers))
	}
	if t.EngineMin != 0 {
		words = append(words, t.EngineMin, uint64(t.EngineWorkers), t.EngineChunk)
	}
	if t.Direct {
		words = append(words, directWord)
	}
	return words
}
