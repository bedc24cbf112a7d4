package comm

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// Split by parity with keys that reverse the order; NoColor gets nil.
func TestSplit(t *testing.T) {
	const n = 5
	parents := startComms(t, n, testConfig())
	children := make([]*Comm, n)
	var wg sync.WaitGroup
	for r, c := range parents {
		color := r % 2
		if r == 4 {
			color = NoColor
		}
		wg.Go(func() {
			child, err := c.Split(color, -r, nil)
			assert.NoError(t, err, "rank %d", r)
			children[r] = child
		})
	}
	wg.Wait()
	t.Cleanup(func() { destroyAll(children) })
	assert.Nil(t, children[4])
	// color 0: parents 0, 2 with keys 0, -2: order 2, 0. color 1: parents 1, 3: order 3, 1.
	want := map[int][2]int{0: {1, 2}, 2: {0, 2}, 1: {1, 2}, 3: {0, 2}}
	for r, rc := range want {
		require.NotNil(t, children[r])
		assert.Equal(t, rc[0], children[r].Rank(), "parent %d", r)
		assert.Equal(t, rc[1], children[r].Count())
	}
	rng := rand.New(rand.NewPCG(5, 5))
	even := []*Comm{children[2], children[0]}
	odd := []*Comm{children[3], children[1]}
	runShapes(t, even, []shape{randomShape(rng, spec.AllReduce, 2, 777)}, rng, false)
	runShapes(t, odd, []shape{randomShape(rng, spec.AllGather, 2, 99)}, rng, false)
	// The parent still works.
	runShapes(t, parents, []shape{randomShape(rng, spec.ReduceScatter, n, 50)}, rng, false)
}

// Split from one thread inside a group.
func TestSplitInGroup(t *testing.T) {
	const n = 4
	parents := startComms(t, n, testConfig())
	children := make([]*Comm, n)
	onThread(func() {
		require.NoError(t, GroupStart())
		for r, c := range parents {
			child, err := c.Split(0, r, nil)
			require.NoError(t, err)
			children[r] = child
		}
		require.NoError(t, GroupEnd())
	})
	t.Cleanup(func() { destroyAll(children) })
	rng := rand.New(rand.NewPCG(6, 6))
	runShapes(t, children, []shape{randomShape(rng, spec.AllReduce, n, 300)}, rng, false)
}

// Shrink without a rank that never takes part.
func TestShrink(t *testing.T) {
	const n = 4
	parents := startComms(t, n, testConfig())
	children := make([]*Comm, n)
	var wg sync.WaitGroup
	for r, c := range parents {
		if r == 1 {
			continue // "dead"
		}
		wg.Go(func() {
			child, err := c.Shrink([]int{1}, nil, 0)
			assert.NoError(t, err, "rank %d", r)
			children[r] = child
		})
	}
	wg.Wait()
	t.Cleanup(func() { destroyAll(children) })
	survivors := []*Comm{children[0], children[2], children[3]}
	for i, c := range survivors {
		require.NotNil(t, c)
		assert.Equal(t, i, c.Rank())
		assert.Equal(t, 3, c.Count())
	}
	rng := rand.New(rand.NewPCG(8, 8))
	runShapes(t, survivors, []shape{randomShape(rng, spec.AllReduce, 3, 1000), randomShape(rng, spec.AllToAll, 3, 10)}, rng, false)
	_, err := parents[0].Shrink([]int{0}, nil, 0)
	assert.Error(t, err, "a rank may not exclude itself")
}
