package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		code Code
	}{
		{nil, Success},
		{ErrInvalidArgument, InvalidArgument},
		{New(ErrInvalidArgument, "count %d", 3), InvalidArgument},
		{fmt.Errorf("rank 1: %w", New(ErrTimeout, "flag")), RemoteError},
		{errors.New("plain"), InternalError},
		{ErrUnsupported, InvalidUsage},
	}
	for _, c := range cases {
		assert.Equal(t, c.code, CodeOf(c.err), "%v", c.err)
	}
}

func TestNewKeepsSentinel(t *testing.T) {
	err := fmt.Errorf("ncclAllReduce: %w", New(ErrMismatch, "rank 1 sent count 4, rank 0 count 5"))
	assert.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), "rank 1 sent count 4")
}
