package snactest

import (
	"purlin/snac"
	"purlin/spec/spectest"
)

// InRounds splits every launch of transfers among units (a rank's launches,
// spectest.Program.Launches) that holds more than most operations into the
// rounds of snac.P2PRounds, as comm launches a group larger than one launch
// holds; most 0 splits every one.
func InRounds(prog *spectest.Program, units [][]spectest.Op, most int) ([][]spectest.Op, error) {
	var out [][]spectest.Op
	for _, unit := range units {
		if prog.Events[unit[0].Event].Calls != nil || len(unit) <= most {
			out = append(out, unit)
			continue
		}
		var r snac.P2PRounds
		var split [][]spectest.Op
		for _, op := range unit {
			c := prog.Events[op.Event].Call(0, prog.NRanks, op.Send)
			k, err := r.Next(&c)
			if err != nil {
				return nil, err
			}
			if k == len(split) {
				split = append(split, nil)
			}
			split[k] = append(split[k], op)
		}
		out = append(out, split...)
	}
	return out, nil
}
