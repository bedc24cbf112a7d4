package comm

import (
	"sync"

	"purlin/snac"
	"purlin/spec"
)

// planCacheSize and planCacheBytes bound the Plans one communicator keeps
// (one per shape), and their memory.
const (
	planCacheSize  = 256
	planCacheBytes = 256 << 20
)

// planner gives a communicator the Plan of a call: from its cache when the
// shape was seen, else built by SNAC for its topology.
type planner struct {
	topo   snac.Topology
	direct snac.Topology // topo with Direct set
	cache  *snac.Cache

	mu     sync.Mutex
	merged map[mergeKey]*snac.Plan // guarded by mu
}

// mergeKey names a merged Plan by its parts, in order. Holding the parts
// keeps them alive, so a key can never match a different Plan at a reused
// address. Groups of more parts are merged on every call.
type mergeKey struct {
	n     int
	parts [mergeKeyParts]*snac.Plan
}

const (
	mergeKeyParts = 16
	mergeCacheMax = 64 // entries; the map is emptied when it fills
)

// merge returns snac.Merge(plans...), the same *Plan every time for the same
// parts: an Atom recognises a Plan by its pointer (a new one costs
// atom/cuda an encoding and a look-up by content, or an upload), so a
// group's merged point-to-point Plan must be stable.
func (p *planner) merge(plans []*snac.Plan) (*snac.Plan, error) {
	if len(plans) > mergeKeyParts {
		return snac.Merge(plans...)
	}
	k := mergeKey{n: len(plans)}
	copy(k.parts[:], plans)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.merged[k]; ok {
		return m, nil
	}
	m, err := snac.Merge(plans...)
	if err != nil {
		return nil, err
	}
	if p.merged == nil || len(p.merged) >= mergeCacheMax {
		p.merged = map[mergeKey]*snac.Plan{}
	}
	p.merged[k] = m
	return m, nil
}

func newPlanner(topo snac.Topology) *planner {
	direct := topo
	direct.Direct = true
	return &planner{topo: topo, direct: direct, cache: snac.NewCache(planCacheSize, planCacheBytes)}
}

// get returns call's Plan; direct: its output is symmetric (direct.go).
func (p *planner) get(call *spec.Call, direct bool) (*snac.Plan, error) {
	if direct {
		return p.cache.Plan(call, p.direct)
	}
	return p.cache.Plan(call, p.topo)
}

// pushes reports whether call's Plan pushes straight into its outputs
// where they are symmetric (snac.DirectOn).
func (p *planner) pushes(call *spec.Call) bool { return snac.DirectOn(call, p.direct) }
