package snactest

import (
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// SplitLaunches splits every launch of transfers among units (a rank's
// launches, spectest.Program.Launches) that holds more than most operations
// into the launches of snac.SplitP2P, as comm launches a group larger than
// one launch holds; most 0 puts each round in a launch of its own.
func SplitLaunches(prog *spectest.Program, units [][]spectest.Op, most int) ([][]spectest.Op, error) {
	var out [][]spectest.Op
	for _, unit := range units {
		if prog.Events[unit[0].Event].Calls != nil || len(unit) <= most {
			out = append(out, unit)
			continue
		}
		calls := make([]spec.Call, len(unit))
		for i, op := range unit {
			calls[i] = prog.Events[op.Event].Call(0, prog.NRanks, op.Send)
		}
		launch := make([]int, len(unit))
		n, err := snac.SplitP2P(launch, most, func(i int) *spec.Call { return &calls[i] })
		if err != nil {
			return nil, err
		}
		split := make([][]spectest.Op, n)
		for i, op := range unit {
			split[launch[i]] = append(split[launch[i]], op)
		}
		out = append(out, split...)
	}
	return out, nil
}
