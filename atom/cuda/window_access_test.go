package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"purlin/errs"
)

// Read and Write refuse ranks and ranges outside the window before any
// driver call, so they run without a GPU.
func TestWindowAccessBounds(t *testing.T) {
	w := &UserWindow{size: 4096, peers: []uintptr{0x1000, 0x2000}}
	for _, tc := range []struct {
		rank int
		off  uint64
		n    int
	}{
		{-1, 0, 1}, {2, 0, 1}, {0, 4096, 1}, {1, 4000, 97}, {0, 1 << 63, 1}, {0, 0, 4097},
	} {
		assert.ErrorIs(t, w.Read(tc.rank, tc.off, make([]byte, tc.n)), errs.ErrInvalidArgument, "%+v", tc)
		assert.ErrorIs(t, w.Write(tc.rank, tc.off, make([]byte, tc.n)), errs.ErrInvalidArgument, "%+v", tc)
	}
	assert.NoError(t, w.Read(1, 4096, nil), "an empty read at the end touches nothing")
}
