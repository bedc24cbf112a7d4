package cuda

import (
	"fmt"

	"purlin/errs"
)

var sprintf = fmt.Sprintf

// Status codes a failed block writes (csrc/status.cuh).
const (
	statusOK       = 0
	statusTimeout  = 1
	statusAborted  = 2
	statusMismatch = 3
	statusStopped  = 4
	statusBadRef   = 5
)

// statusError turns a kernel's status word (code<<56 | worker<<48 | step<<32
// | slot) into an error of the errs vocabulary, naming where it happened.
func statusError(word uint64, rank int) error {
	if word == 0 {
		return nil
	}
	code := word >> 56
	where := func() string { return statusWhere(word, rank) }
	switch code {
	case statusTimeout:
		return errs.New(errs.ErrTimeout, "cuda kernel wait: %s: timed out waiting for a peer", where())
	case statusAborted:
		return errs.New(errs.ErrAborted, "cuda kernel wait: %s: communicator aborted", where())
	case statusMismatch:
		return errs.New(errs.ErrMismatch, "cuda kernel wait: %s: %s", where(), errs.Disagree)
	case statusBadRef:
		return errs.New(errs.ErrInternal, "cuda kernel: %s: a Ref outside the launch's memory", where())
	}
	return errs.New(errs.ErrInternal, "cuda kernel: %s: unknown status %#x", where(), word)
}

// statusWhere names the block, step and slot a status word reports.
func statusWhere(word uint64, rank int) string {
	return sprintf("rank %d worker %d step %d slot %d", rank, (word>>48)&0xff, (word>>32)&0xffff, uint32(word))
}
