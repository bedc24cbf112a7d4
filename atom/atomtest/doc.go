// Package atomtest provides what tests of the Atoms and of the layers above
// them need: Local, n in-process Exchanges standing in for comm's bootstrap.
//
//	exs := atomtest.Local(4)
//	for r, ex := range exs {
//		go func() { rank, err := host.NewRank(topo(r), ex, atom.Options{}); ... }()
//	}
//
// Every rank must make the same sequence of AllGather and AllGatherFD calls
// (the rounds are matched by their order), each from its own goroutine.
package atomtest
