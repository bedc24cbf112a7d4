package spec

import "purlin/errs"

// ErrNoCollective is returned by FromLayouts for a layout pair that names no collective.
var ErrNoCollective = &errs.Error{Code: errs.InvalidArgument, Msg: "no such collective"}

// MaxBytes bounds every buffer a call names; larger counts are rejected as
// overflow rather than trusted (1 TiB, far beyond a GPU's memory).
const MaxBytes = 1 << 40
