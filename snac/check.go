package snac

import "purlin/spec"

// DoneCheck is the check word of every FlagDone notify and wait. Done flags
// are read two calls after they were raised, by calls of any shape, so they
// cannot carry a call's fingerprint. It is 0, the value check words hold
// from init, so the first calls' done waits (satisfied at once, before any
// done flag was raised) compare equal too.
const DoneCheck uint64 = 0

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
	return x
}

// callCheck is the fingerprint of a call's shape as every rank sees it:
// fields that differ legitimately between ranks (buffers, this rank, the root
// of unrooted collectives, the op of copies) are left out.
func callCheck(c *spec.Call) uint64 {
	f := fnvOffset.mix(uint64(c.Coll), uint64(c.Type), uint64(c.NRanks), c.Count)
	if c.Coll.Reduces() {
		f = f.mix(uint64(c.Op.Kind))
	}
	if c.Coll.Rooted() {
		f = f.mix(uint64(c.Root))
	}
	if c.Coll == spec.AllGatherV || c.Coll == spec.ReduceScatterV {
		f = f.mix(c.Counts...)
	}
	return f.sum()
}

// pairCheck is the fingerprint of one pair's transfer (AllToAllV, SendRecv):
// only the pair's byte count is known to both ends.
func pairCheck(c *spec.Call, bytes uint64) uint64 {
	return fnvOffset.mix(uint64(c.Coll), uint64(c.Type), uint64(c.NRanks), bytes).sum()
}
