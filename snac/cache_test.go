package snac_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

func TestCacheHitsAreSharedAndAllocationFree(t *testing.T) {
	cache := snac.NewCache(4, 1<<40)
	topo := testTopo(2)
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Count: 1000, NRanks: 2, Send: base, Recv: base + 8192}
	p1, err := cache.Plan(call, topo)
	require.NoError(t, err)
	other := *call
	other.Send, other.Recv = base+1<<20, base+2<<20 // other buffers, same shape
	p2, err := cache.Plan(&other, topo)
	require.NoError(t, err)
	require.Same(t, p1, p2)
	allocs := testing.AllocsPerRun(100, func() { _, _ = cache.Plan(call, topo) })
	require.Zero(t, allocs)
}

func TestCacheKeysEveryShapeField(t *testing.T) {
	cache := snac.NewCache(64, 1<<40)
	topo := testTopo(2)
	base := spec.Call{Coll: spec.AllGatherV, Type: spec.Float32, Count: 0, NRanks: 2, Counts: []uint64{3, 4}, Displs: []uint64{0, 3}}
	first, err := cache.Plan(&base, topo)
	require.NoError(t, err)
	variants := []func(c *spec.Call){
		func(c *spec.Call) { c.Counts = []uint64{3, 5} },
		func(c *spec.Call) { c.Displs = []uint64{4, 0} },
		func(c *spec.Call) { c.Type = spec.Int32 },
	}
	for _, v := range variants {
		c := base
		v(&c)
		p, err := cache.Plan(&c, topo)
		require.NoError(t, err)
		require.NotSame(t, first, p)
	}
	other := topo
	other.Workers = 1
	p, err := cache.Plan(&base, other)
	require.NoError(t, err)
	require.NotSame(t, first, p)
}

// int8Sums returns an int8 AllReduce of count n on nranks ranks.
func int8Sums(nranks int) func(n uint64) *spec.Call {
	return func(n uint64) *spec.Call {
		return &spec.Call{Coll: spec.AllReduce, Type: spec.Int8, Count: n, NRanks: nranks}
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	cache, topo, call := snac.NewCache(2, 1<<40), testTopo(1), int8Sums(1)
	a, _ := cache.Plan(call(1), topo)
	_, _ = cache.Plan(call(2), topo)
	again, _ := cache.Plan(call(1), topo) // 1 is now the most recent
	require.Same(t, a, again)
	_, _ = cache.Plan(call(3), topo) // evicts 2
	require.Equal(t, 2, cache.Len())
	again, _ = cache.Plan(call(1), topo)
	require.Same(t, a, again)
}

// TestCacheBoundsBytes: past its bytes the cache drops the least recently
// used Plans, however few it holds, but keeps the most recent one whatever
// its size; Plans of 2 ranks grow with their size up to the ring (whose
// loop then holds them).
func TestCacheBoundsBytes(t *testing.T) {
	topo, call := testTopo(2), int8Sums(2)
	size := func(n uint64) uint64 {
		p, err := snac.Build(call(n), topo)
		require.NoError(t, err)
		return p.Bytes()
	}
	small, large := size(16<<10), size(256<<10)
	require.Greater(t, large, 3*small, "Plans grow with their message")
	cache := snac.NewCache(100, large+size(16<<10+64))
	a, _ := cache.Plan(call(16<<10), topo)
	b, _ := cache.Plan(call(16<<10+64), topo)
	require.Equal(t, 2, cache.Len())
	_, _ = cache.Plan(call(256<<10), topo) // past the bytes: drops the older small one
	require.Equal(t, 2, cache.Len())
	again, _ := cache.Plan(call(16<<10+64), topo)
	require.Same(t, b, again, "kept")
	again, _ = cache.Plan(call(16<<10), topo)
	require.NotSame(t, a, again, "dropped, built anew")

	one := snac.NewCache(100, small)
	_, _ = one.Plan(call(16<<10), topo)
	huge, _ := one.Plan(call(256<<10), topo)
	require.Equal(t, 1, one.Len(), "the most recent stays alone")
	again, _ = one.Plan(call(256<<10), topo)
	require.Same(t, huge, again)
}

// A repeated call hits without the map (the entry returned last); that
// entry is always the most recent, so eviction order is as if the map had
// been consulted, and a V call whose vectors differ is not taken for it.
func TestCacheRepeatedCallKeepsRecency(t *testing.T) {
	cache, topo, call := snac.NewCache(2, 1<<40), testTopo(2), int8Sums(2)
	a, _ := cache.Plan(call(1), topo)
	b, _ := cache.Plan(call(2), topo)
	again, _ := cache.Plan(call(2), topo) // the last entry: no map
	require.Same(t, b, again)
	_, _ = cache.Plan(call(3), topo) // evicts 1, the least recent
	again, _ = cache.Plan(call(2), topo)
	require.Same(t, b, again)
	again, _ = cache.Plan(call(1), topo)
	require.NotSame(t, a, again, "1 was evicted and rebuilt")

	v := func(counts ...uint64) *spec.Call {
		return &spec.Call{Coll: spec.AllGatherV, Type: spec.Int8, Counts: counts, Displs: []uint64{0, 8}, NRanks: 2}
	}
	p1, err := cache.Plan(v(1, 2), topo)
	require.NoError(t, err)
	p2, err := cache.Plan(v(2, 1), topo)
	require.NoError(t, err)
	require.NotSame(t, p1, p2)
	again, _ = cache.Plan(v(2, 1), topo)
	require.Same(t, p2, again)
}

func TestCacheConcurrentUse(t *testing.T) {
	cache := snac.NewCache(8, 1<<40)
	topo := testTopo(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				c := &spec.Call{Coll: spec.AllGather, Type: spec.Uint8, Count: uint64(1 + (i+g)%12), NRanks: 4}
				p, err := cache.Plan(c, topo)
				if err != nil || p == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, cache.Len(), 8)
}
