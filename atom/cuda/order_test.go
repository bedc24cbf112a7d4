package cuda

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// fakeOrderDriver stands in for the driver calls launchOrder makes: each
// stream's capture state, and a log of the event records and waits.
type fakeOrderDriver struct {
	capture map[cuStream]captureState
	log     []string
}

func (f *fakeOrderDriver) install(t *testing.T) {
	saved := driver
	t.Cleanup(func() { driver = saved })
	driver.StreamGetCaptureInfo = func(s cuStream, status *uint32, id *uint64, _, _, _ unsafe.Pointer) cuResult {
		c := f.capture[s]
		*status, *id = c.status, c.id
		return cuSuccess
	}
	driver.EventRecord = func(e cuEvent, s cuStream) cuResult {
		f.log = append(f.log, fmt.Sprintf("record %d", s))
		return cuSuccess
	}
	driver.StreamWaitEvent = func(s cuStream, e cuEvent, flags uint32) cuResult {
		f.log = append(f.log, fmt.Sprintf("wait %d", s))
		return cuSuccess
	}
}

// What a launch onto a new stream does: wait for the rank's previous launch
// where both are eager or in one capture, nothing across a capture boundary
// (where a wait would be illegal or would pull an eager stream into the
// capture), and the per-thread stream marked at its launch. Launches on the
// previous stream take the hot path and never get here.
func TestLaunchOrderAcrossStreams(t *testing.T) {
	const s1, s2, s3 cuStream = 0x1000, 0x2000, 0x3000
	active := func(id uint64) captureState { return captureState{status: streamCaptureStatusActive, id: id} }
	invalid := captureState{status: 2}
	cases := []struct {
		name    string
		capture map[cuStream]captureState
		prev    cuStream // the previous launch's stream
		next    cuStream
		want    []string // driver calls at the launch on next
	}{
		{"eager", nil, s1, s2, []string{"record 4096", "wait 8192"}},
		{"legacy stream after another", nil, s1, 0, []string{"record 4096", "wait 0"}},
		{"one capture", map[cuStream]captureState{s1: active(7), s2: active(7)}, s1, s2, []string{"record 4096", "wait 8192"}},
		{"captured, then eager", map[cuStream]captureState{s1: active(7)}, s1, s2, []string{"record 4096"}},
		{"eager, then captured", map[cuStream]captureState{s2: active(7)}, s1, s2, []string{"record 4096"}},
		{"two captures", map[cuStream]captureState{s1: active(7), s2: active(8)}, s1, s2, []string{"record 4096"}},
		{"invalidated capture", map[cuStream]captureState{s1: invalid}, s1, s2, nil},
		{"per-thread stream, then eager", nil, streamPerThread, s2, []string{"wait 8192"}},
		{"per-thread stream again", nil, streamPerThread, streamPerThread, []string{"wait 2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeOrderDriver{capture: tc.capture}
			f.install(t)
			o := launchOrder{last: newWord(), event: 1}
			defer freeWord(o.last)
			require.NoError(t, o.launched(tc.prev))
			if tc.prev == streamPerThread {
				require.Equal(t, []string{"record 2"}, f.log, "the per-thread stream is marked at its launch")
			}
			f.log = nil
			require.NoError(t, o.follow(^cuStream(o.last.Load()), tc.next))
			require.Equal(t, tc.want, f.log)
		})
	}

	// The hot path: the stream of the previous launch (stream 0 included),
	// never the per-thread stream, which is another stream on each thread.
	o := launchOrder{last: newWord()}
	defer freeWord(o.last)
	f := &fakeOrderDriver{}
	f.install(t)
	require.False(t, o.sameStream(0), "no launch yet")
	for _, s := range []cuStream{0, s3} {
		require.NoError(t, o.launched(s))
		require.True(t, o.sameStream(s))
		require.False(t, o.sameStream(s1))
	}
	require.NoError(t, o.launched(streamPerThread))
	require.False(t, o.sameStream(streamPerThread))
	require.False(t, o.sameStream(s3))
}
