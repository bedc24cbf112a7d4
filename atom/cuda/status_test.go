package cuda

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
)

func TestStatusError(t *testing.T) {
	word := func(code, worker, step, slot uint64) uint64 { return code<<56 | worker<<48 | step<<32 | slot }
	for _, tc := range []struct {
		word uint64
		want *errs.Error
		text string
	}{
		{word(statusTimeout, 3, 7, 1234), errs.ErrTimeout, "worker 3 step 7 slot 1234"},
		{word(statusAborted, 0, 0, 0), errs.ErrAborted, "rank 1"},
		{word(statusMismatch, 63, 65535, 9), errs.ErrMismatch, "disagree"},
		{word(statusBadRef, 1, 2, 0), errs.ErrInternal, "Ref"},
		{word(99, 1, 2, 0), errs.ErrInternal, "unknown status"},
	} {
		err := statusError(tc.word, 1)
		require.True(t, errors.Is(err, tc.want), "%v", err)
		require.Contains(t, err.Error(), tc.text)
	}
	require.NoError(t, statusError(0, 0))
}
