package cuda

import (
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// TestEngineSegments: a copy-engine Plan becomes, per worker, its copies
// in order with the signals between them as segments; each worker's last
// segment (empty if it ends in a copy) advances its epoch. The image holds
// the segments where Launch looks for them.
func TestEngineSegments(t *testing.T) {
	for _, coll := range []spec.Collective{spec.AllGather, spec.Broadcast, spec.Scatter, spec.AllToAll} {
		for rank := range 2 {
			c := typedCall(coll, spec.Float32, spec.Op{Kind: spec.Sum}, 2, rank, 3<<20)
			p, err := snac.Build(c, engineTopology(2, rank))
			require.NoError(t, err)
			ops, table := engineSegments(p)
			require.Len(t, ops, len(p.Workers), "%s", c)
			segs := 0
			for w, list := range ops {
				wk := p.Workers[w]
				require.NotEmpty(t, list)
				covered := map[int]bool{}
				for k, op := range list {
					if op.step >= 0 {
						require.Equal(t, snac.Copy, p.Steps[op.step].Verb)
						covered[op.step] = true
						continue
					}
					require.Equal(t, uint32(segs), op.segment, "segments in order")
					segs++
					d := table[int(op.segment)*segmentSize:]
					var seg snac.Worker
					copy(unsafe.Slice((*byte)(unsafe.Pointer(&seg)), unsafe.Sizeof(seg)), d)
					used := binary.LittleEndian.Uint32(d[unsafe.Sizeof(seg)+4:])
					require.Equal(t, wk.Index, seg.Index)
					require.Equal(t, wk.Channel, seg.Channel)
					for i := seg.First; i < seg.First+seg.Count; i++ {
						require.NotEqual(t, snac.Copy, p.Steps[i].Verb)
						covered[int(i)] = true
					}
					if k == len(list)-1 {
						require.Equal(t, uint32(len(p.Workers)), used, "the last segment advances")
					} else {
						require.Zero(t, used)
					}
				}
				for i := wk.First; i < wk.First+wk.Count; i++ {
					require.True(t, covered[int(i)] || p.Steps[i].Bytes == 0 && p.Steps[i].Verb == snac.Copy, "%s worker %d: step %d in no operation", c, w, i)
				}
			}
			image, err := planBytes(p)
			require.NoError(t, err)
			require.Equal(t, table, image[segmentsOff(p):])
		}
	}
	// A Plan of thread blocks has none; one mixing the two has them for
	// its copy-engine workers, and purlin_run runs the rest; one whose copy
	// a copy engine cannot take runs whole in purlin_run, its image marking
	// no worker for the copy engine.
	c := typedCall(spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, 2, 0, 3<<20)
	p, err := snac.Build(c, gpuTopology(2, 0))
	require.NoError(t, err)
	ops, _ := engineSegments(p)
	require.Nil(t, ops)
	pe, err := snac.Build(c, engineTopology(2, 0))
	require.NoError(t, err)
	mixed := *pe
	mixed.Workers = append([]snac.Worker(nil), pe.Workers...)
	mixed.Workers[0].Engine = snac.EngineSM
	ops, _ = engineSegments(&mixed)
	require.Len(t, ops, len(mixed.Workers))
	require.Nil(t, ops[0])
	require.NotNil(t, ops[1])
	odd := *pe
	odd.Steps = append([]snac.Step(nil), pe.Steps...)
	for i := range odd.Steps {
		if odd.Steps[i].Verb == snac.Copy {
			odd.Steps[i].Dst.Half = 1 << 20 // a copy whose address changes from call to call
			break
		}
	}
	ops, _ = engineSegments(&odd)
	require.Nil(t, ops)
	image, err := planBytes(&odd)
	require.NoError(t, err)
	workers := image[len(odd.Steps)*int(unsafe.Sizeof(snac.Step{})):]
	for w := range odd.Workers {
		require.Zero(t, workers[w*int(unsafe.Sizeof(snac.Worker{}))+int(unsafe.Offsetof(snac.Worker{}.Engine))], "worker %d", w)
	}
}

// A copy-engine call whose operations fail part way still joins every
// side stream it forked back into the caller's stream, so the caller's
// next work follows what was issued and a capture is not left unjoined;
// the call returns the operation's error.
func TestEngineJoinsAfterFailure(t *testing.T) {
	const caller, side0, side1, side2 cuStream = 0x10, 0x20, 0x30, 0x40
	const fork, join cuEvent = 1, 2
	copyStep := func(off uint64) snac.Step {
		return snac.Step{Verb: snac.Copy, Bytes: 256,
			Dst: snac.Ref{Space: snac.SpaceRecv, Off: off}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: off}}}
	}
	p := &snac.Plan{Steps: []snac.Step{copyStep(0), copyStep(256), copyStep(512), copyStep(768)}}
	d := &devicePlan{engine: [][]engineOp{{{step: 0}, {step: 1}}, nil, {{step: 2}}, {{step: 3}}}}
	bufs := []atom.Buffers{{Send: 0x100000, Recv: 0x200000}}
	for _, tc := range []struct {
		name     string
		failCopy int // the copy that fails (from 1); 0: none
		failWait cuStream
		want     []string
	}{
		{"all issued", 0, 0, []string{"record 1 on 16", "32 waits 1", "48 waits 1", "64 waits 1",
			"copy on 32", "copy on 48", "copy on 64", "copy on 32",
			"record 2 on 32", "16 waits 2", "record 2 on 48", "16 waits 2", "record 2 on 64", "16 waits 2"}},
		{"a copy fails", 2, 0, []string{"record 1 on 16", "32 waits 1", "48 waits 1", "64 waits 1",
			"copy on 32", "copy on 48",
			"record 2 on 32", "16 waits 2", "record 2 on 48", "16 waits 2", "record 2 on 64", "16 waits 2"}},
		{"a fork fails", 0, side1, []string{"record 1 on 16", "32 waits 1", "48 waits 1",
			"record 2 on 32", "16 waits 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := driver
			t.Cleanup(func() { driver = saved })
			var log []string
			copies := 0
			driver.EventRecord = func(e cuEvent, s cuStream) cuResult {
				log = append(log, fmt.Sprintf("record %d on %d", e, s))
				return cuSuccess
			}
			driver.StreamWaitEvent = func(s cuStream, e cuEvent, _ uint32) cuResult {
				log = append(log, fmt.Sprintf("%d waits %d", s, e))
				if s == tc.failWait {
					return 1
				}
				return cuSuccess
			}
			driver.MemcpyAsync = func(dst, src devicePtr, size uintptr, s cuStream) cuResult {
				copies++
				log = append(log, fmt.Sprintf("copy on %d", s))
				if copies == tc.failCopy {
					return 1
				}
				return cuSuccess
			}
			driver.GetErrorName = nil
			r := &Rank{engine: engineStreams{side: [maxEngineWorkers]cuStream{side0, side1, side2}, fork: fork, join: join}}
			err := r.enqueueEngine(p, d, bufs, caller, nil, 0)
			require.Equal(t, tc.want, log)
			if tc.failCopy == 0 && tc.failWait == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errs.ErrCuda)
		})
	}
}
