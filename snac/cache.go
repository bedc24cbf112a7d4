package snac

import (
	"slices"
	"sync"
	"sync/atomic"

	"purlin/spec"
)

// Cache keeps Plans per call shape, so a repeated call skips Build. It holds
// at most its capacity of Plans, and of their bytes (Plan.Bytes: a ring's
// Plan grows with its message, to 30 MB for 1 GiB on 8 ranks), and drops the
// least recently used ones past either; the most recent stays whatever its
// size. It is safe for concurrent use; a hit allocates nothing, and a call
// of the same shape as the one before it (a loop of one collective, the
// common case) takes no lock either. Cached Plans are shared: callers must
// not modify them.
type Cache struct {
	mu       sync.Mutex
	capacity int
	maxBytes uint64
	bytes    uint64                   // of the Plans held; guarded by mu
	entries  map[shapeKey]*cacheEntry // guarded by mu
	lru      cacheEntry               // sentinel of the recency list, most recent first; guarded by mu
	// last is the entry Plan returned last, the head of the recency list:
	// a hit on it needs neither the map nor the list.
	last atomic.Pointer[cacheEntry]
}

// shapeKey is everything Build depends on, buffers excluded. V vectors are
// hashed; the entry keeps a copy to confirm a hit.
type shapeKey struct {
	topo                Topology
	coll                spec.Collective
	typ                 spec.DataType
	op                  spec.Op
	count, rows, width  uint64
	root, peer, rank, n int
	isSend, inPlace     bool
	vectors             uint64
	epilogue            spec.EpilogueKind
	hidden              uint64
	eps                 float32
}

type cacheEntry struct {
	key        shapeKey
	vectors    [6][]uint64
	plan       *Plan
	prev, next *cacheEntry
}

// NewCache returns a Cache holding at most capacity Plans (at least one)
// and maxBytes of them.
func NewCache(capacity int, maxBytes uint64) *Cache {
	c := &Cache{capacity: max(1, capacity), maxBytes: maxBytes, entries: map[shapeKey]*cacheEntry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Plan returns the Plan of call on topo, building and caching it on a miss.
func (c *Cache) Plan(call *spec.Call, topo Topology) (*Plan, error) {
	key := keyOf(call, topo)
	if e := c.last.Load(); e != nil && e.key == key && e.sameVectors(call) {
		return e.plan, nil
	}
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && e.sameVectors(call) {
		c.unlinkLocked(e)
		c.pushLocked(e)
		c.last.Store(e)
		c.mu.Unlock()
		return e.plan, nil
	}
	c.mu.Unlock()
	return c.build(key, *call, topo)
}

// build is Plan's miss for key: it builds from a copy of the call, so that
// the caller's call stays on its stack on a hit (Build's errors keep theirs).
func (c *Cache) build(key shapeKey, cp spec.Call, topo Topology) (*Plan, error) {
	call := &cp
	plan, err := Build(call, topo)
	if err != nil {
		return nil, err
	}
	e := &cacheEntry{key: key, vectors: vectorsOf(call), plan: plan}
	for i := range e.vectors {
		e.vectors[i] = slices.Clone(e.vectors[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.dropLocked(old)
	}
	c.entries[key] = e
	c.pushLocked(e)
	c.bytes += plan.Bytes()
	c.last.Store(e)
	for len(c.entries) > 1 && (len(c.entries) > c.capacity || c.bytes > c.maxBytes) {
		c.dropLocked(c.lru.prev)
	}
	return plan, nil
}

// Len is the number of cached Plans.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *Cache) unlinkLocked(e *cacheEntry) { e.prev.next, e.next.prev = e.next, e.prev }

// dropLocked forgets e.
func (c *Cache) dropLocked(e *cacheEntry) {
	c.unlinkLocked(e)
	delete(c.entries, e.key)
	c.bytes -= e.plan.Bytes()
}

func (c *Cache) pushLocked(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func keyOf(call *spec.Call, topo Topology) shapeKey {
	k := shapeKey{topo: topo, coll: call.Coll, typ: call.Type, op: call.Op, count: call.Count, rows: call.Rows, width: call.Width,
		root: call.Root, peer: call.Peer, rank: call.Rank, n: call.NRanks, isSend: call.IsSend, inPlace: call.InPlace(),
		epilogue: call.Epilogue.Kind, hidden: call.Epilogue.Hidden, eps: call.Epilogue.Eps}
	f := fnvOffset
	for _, v := range vectorsOf(call) {
		f = f.mix(uint64(len(v))).mix(v...)
	}
	k.vectors = f.sum()
	return k
}

func vectorsOf(c *spec.Call) [6][]uint64 {
	return [6][]uint64{c.Counts, c.Displs, c.SendCounts, c.SendDispls, c.RecvCounts, c.RecvDispls}
}

func (e *cacheEntry) sameVectors(c *spec.Call) bool {
	v := vectorsOf(c)
	for i := range v {
		if !slices.Equal(v[i], e.vectors[i]) {
			return false
		}
	}
	return true
}
