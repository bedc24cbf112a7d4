package atom

import (
	"fmt"
	"strings"

	"purlin/errs"
)

// Agree tells every rank whether this one's step succeeded, and returns mine,
// or else the first other rank's failure: a collective setup step (a window,
// a mapping) that fails on one rank fails on all, so none is left holding
// half a result. what names the step for the error texts.
func Agree(ex Exchange, what string, mine error) error {
	var text []byte
	if mine != nil {
		text = []byte(strings.TrimPrefix(mine.Error(), "purlin: "))
	}
	all, err := ex.AllGather(text)
	if mine != nil {
		return mine
	}
	if err != nil {
		return fmt.Errorf("%s rank %d: agreeing on the outcome: %w", what, ex.Rank(), err)
	}
	for q, t := range all {
		if len(t) > 0 {
			return errs.New(errs.ErrInvalidUsage, "%s: rank %d failed: %s", what, q, t)
		}
	}
	return nil
}
