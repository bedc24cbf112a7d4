package comm

import (
	"purlin/snac"
	"purlin/spec"
)

// planCacheSize bounds the Plans one communicator keeps (one per shape).
const planCacheSize = 256

// planner gives a communicator the Plan of a call: from its cache when the
// shape was seen, else built by SNAC for its topology.
type planner struct {
	topo  snac.Topology
	cache *snac.Cache
}

func newPlanner(topo snac.Topology) *planner {
	return &planner{topo: topo, cache: snac.NewCache(planCacheSize)}
}

func (p *planner) get(call *spec.Call) (*snac.Plan, error) {
	return p.cache.Plan(call, p.topo)
}
