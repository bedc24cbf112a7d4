package cuda

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// devicePlan is a Plan in memory the kernel reads, its image:
//
//	[header (imageHeader bytes: images.go) | steps (snac.Step, byte-identical to csrc's Step) | workers | fill (uint16 per worker)
//	 | epilogues (uint32 per worker, 4-byte aligned; only in a Plan with Epilogue steps)
//	 | segments (8-byte aligned; only in a Plan of the copy engine: engine.go)]
//
// fill[w] is the number of workers of w's channel in the Plan: the worker
// of index 0 advances the channel's unused epoch slots from there on.
// epilogues[w] is the number of w's Epilogue steps, which lie after its
// other steps, outside its Count: purlin_run never meets one, and
// purlin_epilogue runs them after it (csrc/run.cu; see epilogueTails).
type devicePlan struct {
	steps, workers, fill uint64
	nworkers             uint32
	// epilogue holds, for each buffer index, the kinds of the Plan's
	// Epilogue steps there (none: no purlin_epilogue to launch), which
	// Launch checks the buffers of.
	epilogue [MaxBuffers]spec.EpilogueKind
	// epilogueSplit is purlin_epilogue's blocks per worker (its grid's y):
	// a worker's rows are spread over that many blocks, so that a large
	// epilogue has about epilogueBlocks blocks whatever the Plan's workers.
	epilogueSplit uint32
	// engine, for a Plan of the copy engine, is each worker's operations,
	// and segments where their descriptors lie (engine.go); nil for a
	// Plan that purlin_run runs.
	engine   [][]engineOp
	segments uint64
	kernel   bool // purlin_run runs some of the Plan's workers (always, without engine)

	// Where the image lies and how long it stays (images.go): its
	// allocation, header included; its bytes' hash; the blocks a launch
	// counts in its header; its counts (nil: it stays while the rank
	// lives); the launches the last reclaim saw; and the Plan pointers that
	// name it in plans.cache.
	base   devicePtr
	size   uintptr
	key    uint64
	blocks uint64 // the blocks of the kernels a launch runs on it
	counts *imageCounts
	seen   uint64
	names  []*snac.Plan
}

// epilogueBlocks is the most blocks a separate epilogue runs on: two waves
// of an H200's 132 SMs (a block of the epilogue kernel fills an SM).
// epilogueFuseRows is the most rows a worker's block runs itself, after its
// other steps, in one kernel, and the rows of a block of a separate one: a
// kernel more in a graph costs about 2.3 us on an H200, and 16 rows on a
// block (a warp a row) take about as long as on 4 blocks (a block a row)
// once the GPU is full; tests/gpu/stepbench.cu times both.
const (
	epilogueBlocks   = 264
	epilogueFuseRows = 16
)

// planBytes encodes plan's device image, checking what the kernel relies on.
func planBytes(p *snac.Plan) ([]byte, error) { return appendPlan(nil, p) }

// appendPlan is planBytes into dst's memory where it has room (an upload's
// buffer, reused from one upload to the next).
func appendPlan(dst []byte, p *snac.Plan) ([]byte, error) {
	nw, ns := len(p.Workers), len(p.Steps)
	if nw > snac.MaxWorkers {
		return nil, errs.New(errs.ErrInternal, "cuda plan: %d workers, at most %d", nw, snac.MaxWorkers)
	}
	perChannel := map[uint16]uint16{}
	for i, w := range p.Workers {
		if uint64(w.First)+uint64(w.Count) > uint64(ns) {
			return nil, errs.New(errs.ErrInternal, "cuda plan: worker %d's steps [%d,+%d) past %d", i, w.First, w.Count, ns)
		}
		if int(w.Channel) >= snac.NumChannels || int(w.Index) >= snac.MaxWorkers {
			return nil, errs.New(errs.ErrInternal, "cuda plan: worker %d's epoch slot (%d,%d) out of range", i, w.Channel, w.Index)
		}
		perChannel[w.Channel]++
	}
	if err := p.LoopsValid(); err != nil { // csrc/run.cu runs a loop's body as snac's Unroll does
		return nil, errs.New(errs.ErrInternal, "cuda plan: %v", err)
	}
	for i, w := range p.Workers { // LoopsValid checked the marks
		if w.Engine == snac.EngineCopy && w.Loops != 0 {
			return nil, errs.New(errs.ErrInternal, "cuda plan: worker %d of the copy engine holds a loop", i)
		}
	}
	for i, s := range p.Steps {
		if int(s.NSrc) > snac.MaxSrc || (s.Verb == snac.Reduce && s.NSrc == 0) || s.Verb > snac.Repeat {
			return nil, errs.New(errs.ErrInternal, "cuda plan: step %d: bad verb %d or %d sources", i, s.Verb, s.NSrc)
		}
		if s.Verb == snac.Epilogue {
			if err := epilogueValid(p, i, &s); err != nil {
				return nil, err
			}
		}
		if (s.Verb == snac.Copy || s.Verb == snac.Reduce) && !s.RowsValid() { // csrc/run.cu runRows trusts them
			return nil, errs.New(errs.ErrInternal, "cuda plan: step %d: strided Refs out of shape (row %d, col %d)", i, s.Row, s.Col)
		}
		if s.Verb == snac.Notify && int(s.Peer) >= p.NRanks { // the kernel reads its flags' base out of a run's lanes unchecked
			return nil, errs.New(errs.ErrInternal, "cuda plan: step %d notifies rank %d of %d", i, s.Peer, p.NRanks)
		}
	}
	steps, tails, err := epilogueTails(p, epilogueSplitOf(p))
	if err != nil {
		return nil, err
	}
	ops, table := engineSegments(p)
	workers := p.Workers
	if tails != nil || ops == nil {
		workers = append([]snac.Worker(nil), p.Workers...)
		for i := range workers {
			if tails != nil {
				workers[i].Count -= tails[i]
			}
			if ops == nil { // purlin_run runs every worker (engine.go)
				workers[i].Engine = snac.EngineSM
			}
		}
	}
	const stepSize, workerSize = int(unsafe.Sizeof(snac.Step{})), int(unsafe.Sizeof(snac.Worker{}))
	b := slices.Grow(dst[:0], ns*stepSize+nw*workerSize+2*nw+3+4*nw)
	if ns > 0 {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&steps[0])), ns*stepSize)...)
	}
	if nw > 0 {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&workers[0])), nw*workerSize)...)
	}
	for _, w := range workers {
		b = binary.LittleEndian.AppendUint16(b, perChannel[w.Channel])
	}
	if tails != nil { // where csrc/run.cu purlin_epilogue looks: after fill, 4-byte aligned
		b = append(b, make([]byte, -len(b)&3)...)
		for _, n := range tails {
			b = binary.LittleEndian.AppendUint32(b, n)
		}
	}
	for _, w := range workers {
		for k, run := range signalRuns(steps[w.First : w.First+w.Count]) {
			if run > 0 {
				b[(int(w.First)+k)*stepSize+int(unsafe.Offsetof(snac.Step{}.NSrc))] = run
			}
		}
	}
	if table != nil {
		b = append(b, make([]byte, -len(b)&7)...)
		b = append(b, table...)
	}
	return b, nil
}

// segmentsOff is where a copy-engine Plan's segments lie in its image
// (planBytes: after fill, 8-byte aligned; such a Plan has no epilogues).
func segmentsOff(p *snac.Plan) uint64 {
	n := uint64(len(p.Steps))*uint64(unsafe.Sizeof(snac.Step{})) + uint64(len(p.Workers))*(uint64(unsafe.Sizeof(snac.Worker{}))+2)
	return (n + 7) &^ 7
}

// epilogueValid checks Epilogue step i against what the kernel runs
// (csrc/epilogue.cuh): whole rows of a float32, float16 or bfloat16 output
// in one of the Launch's buffers, of a kind it knows.
func epilogueValid(p *snac.Plan, i int, s *snac.Step) error {
	k, hidden, _ := s.EpilogueOf()
	row := uint64(hidden) * uint64(p.Type.Size())
	switch {
	case !p.Type.EpilogueType():
		return errs.New(errs.ErrInternal, "cuda plan: step %d: epilogue on %s", i, p.Type)
	case !k.Valid():
		return errs.New(errs.ErrInternal, "cuda plan: step %d: epilogue of kind %s", i, k)
	case s.Dst.Space != snac.SpaceRecv || s.Dst.Pitch != 0 || s.Dst.Half != 0 || int(s.Dst.Rank) >= MaxBuffers:
		return errs.New(errs.ErrInternal, "cuda plan: step %d: epilogue on space %d buffer %d, not an output", i, s.Dst.Space, s.Dst.Rank)
	case row == 0 || s.Bytes%row != 0 || s.Dst.Off%row != 0:
		return errs.New(errs.ErrInternal, "cuda plan: step %d: epilogue of %d bytes at %d, not rows of %d elements", i, s.Bytes, s.Dst.Off, s.Slot)
	}
	return nil
}

// epilogueTails returns p's steps with each worker's Epilogue steps moved,
// in order, after its other steps, and how many each worker has (p's own
// steps and nil when it has none). purlin_epilogue runs them after
// purlin_run has run the others: no step touches a row after its epilogue
// (snac places it after the last one that does), so later is as good, and
// purlin_run never meets one (an epilogue wants every register, and a call
// of it from purlin_run makes the compiler spill the run loop's state).
// Each gets its first row and its number of rows in its Src[0] (Off and
// Half), so that the kernel divides nothing, and in Src[0].Pitch the group
// that runs one of its rows, from split, purlin_epilogue's blocks a worker
// (csrc/epilogue.cuh).
func epilogueTails(p *snac.Plan, split uint32) ([]snac.Step, []uint32, error) {
	has := false
	for i := range p.Steps {
		has = has || p.Steps[i].Verb == snac.Epilogue
	}
	if !has {
		return p.Steps, nil, nil
	}
	steps := append([]snac.Step(nil), p.Steps...)
	tails := make([]uint32, len(p.Workers))
	var moved [][2]uint32 // the step ranges reordered
	for i, w := range p.Workers {
		var rest, tail []snac.Step
		for _, s := range p.Steps[w.First : w.First+w.Count] {
			if s.Verb != snac.Epilogue {
				rest = append(rest, s)
				continue
			}
			row := uint64(s.Slot) * uint64(p.Type.Size())
			s.Src[0].Off, s.Src[0].Half = s.Dst.Off/row, s.Bytes/row
			s.Src[0].Pitch = epilogueGroup(s.Bytes/row, split, (row+15)/16)
			tail = append(tail, s)
		}
		if len(tail) == 0 {
			continue
		}
		r := [2]uint32{w.First, w.First + w.Count}
		for _, m := range moved {
			if r[0] < m[1] && m[0] < r[1] && r != m { // a range shared whole is reordered alike
				return nil, nil, errs.New(errs.ErrInternal, "cuda plan: worker %d's steps [%d,%d) with epilogues overlap [%d,%d)", i, r[0], r[1], m[0], m[1])
			}
		}
		moved = append(moved, r)
		tails[i] = uint32(len(tail))
		copy(steps[w.First:], append(rest, tail...))
	}
	return steps, tails, nil
}

// maxRun is the most steps one signal run holds: the lanes of a warp.
const maxRun = 32

// signalRuns returns, for each Notify or Wait step of one worker, its run:
// how many steps from it on the kernel runs at once, one per lane (csrc/run.cu
// signalRun), and 0 for other steps. A run holds consecutive steps of one
// verb, since waits that follow each other are satisfied in any order and
// notifies that follow each other are independent; it ends before a step
// whose flag (peer and slot) an earlier step of it names, since two raises of
// one flag must land in order. The kernel cuts a run where its batch of steps
// ends, and a batch ends at a loop's body's end, so a run never reaches past
// a body into the steps after it. The device image carries it in the step's
// NSrc, which Notify and Wait do not use.
func signalRuns(steps []snac.Step) []uint8 {
	runs := make([]uint8, len(steps))
	flag := func(s *snac.Step) uint64 { return uint64(s.Peer)<<32 | uint64(s.Slot) }
	for k := range steps {
		verb := steps[k].Verb
		if verb != snac.Notify && verb != snac.Wait {
			continue
		}
		m := 1
	grow:
		for ; m < maxRun && k+m < len(steps) && steps[k+m].Verb == verb; m++ {
			for j := k; j < k+m; j++ {
				if flag(&steps[j]) == flag(&steps[k+m]) {
					break grow
				}
			}
		}
		runs[k] = uint8(m)
	}
	return runs
}

// epilogueSplitOf is purlin_epilogue's blocks a worker for p
// (devicePlan.epilogueSplit): a block per epilogueFuseRows rows of the
// worker with the most, up to epilogueBlocks in all; 1 (the worker's own
// block, in purlin_run_epilogue) up to epilogueFuseRows rows.
func epilogueSplitOf(p *snac.Plan) uint32 {
	var most uint64 // the rows of the worker with the most
	for w := range p.Workers {
		var rows uint64
		for _, s := range p.WorkerSteps(w) {
			if s.Verb == snac.Epilogue {
				rows += s.Bytes / (uint64(s.Slot) * uint64(p.Type.Size()))
			}
		}
		most = max(most, rows)
	}
	return uint32(max(1, min((most+epilogueFuseRows-1)/epilogueFuseRows, uint64(epilogueBlocks/max(1, len(p.Workers))))))
}

// epilogueGroup is the threads that run one row of an Epilogue step of
// rows rows of vectors 16-byte vectors each, spread over split blocks: a
// power of two from a warp to the block (csrc/epilogue.cuh epilogueGroup).
// It takes the group that gives a thread the fewest vectors to run, the
// narrower of two alike (fewer threads wait at its barriers): for rows of
// 4096 bfloat16 that is a block for one row a block, 128 threads for 4, a
// warp for 16, the fastest width stepbench measures for each.
func epilogueGroup(rows uint64, split uint32, vectors uint64) uint32 {
	perBlock := (rows + uint64(split) - 1) / uint64(split)
	best, least := uint32(threadsPerBlock), ^uint64(0)
	for g := uint64(threadsPerBlock); g >= 32; g /= 2 {
		n := (perBlock + threadsPerBlock/g - 1) / (threadsPerBlock / g) * ((vectors + g - 1) / g)
		if n <= least {
			best, least = uint32(g), n
		}
	}
	return best
}

func (d *devicePlan) place(base uint64, p *snac.Plan) {
	for w := range p.Workers {
		for _, s := range p.WorkerSteps(w) {
			if s.Verb == snac.Epilogue {
				k, _, _ := s.EpilogueOf()
				d.epilogue[s.Dst.Rank] |= k // planBytes checked the index
			}
		}
	}
	d.epilogueSplit = epilogueSplitOf(p)
	d.blocks = uint64(len(p.Workers)) // purlin_run's
	if d.epilogue != [MaxBuffers]spec.EpilogueKind{} && d.epilogueSplit > 1 {
		d.blocks += uint64(len(p.Workers)) * uint64(d.epilogueSplit) // purlin_epilogue's
	}
	d.steps = base
	d.workers = base + uint64(len(p.Steps))*uint64(unsafe.Sizeof(snac.Step{}))
	d.fill = d.workers + uint64(len(p.Workers))*uint64(unsafe.Sizeof(snac.Worker{}))
	d.nworkers = uint32(len(p.Workers))
	d.kernel = true
	if ops, _ := engineSegments(p); ops != nil {
		d.engine, d.segments, d.kernel = ops, base+segmentsOff(p), false
		for _, o := range ops {
			d.kernel = d.kernel || o == nil
		}
	}
}
