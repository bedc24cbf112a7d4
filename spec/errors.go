package spec

import "purlin/errs"

// ErrNoCollective is returned by FromLayouts for a layout pair that names no collective.
var ErrNoCollective = &errs.Error{Code: errs.InvalidArgument, Msg: "no such collective"}
