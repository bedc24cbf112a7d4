package snac

import (
	"unsafe"

	"purlin/spec"
)

// Limits shared by every Plan and every Atom. They size the shared state, so
// all ranks (and both Atoms) must agree on them: they are constants.
const (
	MaxRanks   = 8   // ranks in one communicator (one NVLink server)
	MaxWorkers = 128 // workers (GPU thread blocks, host goroutines) in one Plan
	MaxSrc     = MaxRanks

	// EpochAdvance is what every call adds to its workers' epochs: a Plan
	// adds it once per call it holds (see Advance). It is odd, so
	// consecutive calls use opposite staging halves, and constant, so every
	// rank advances alike without agreeing on anything first, and a Plan can
	// name the epoch of an earlier call (see DoneDelta). Flag deltas inside
	// one call stay below it.
	EpochAdvance = 1<<20 + 1
	// DoneDelta is the Wait delta that means "the call two calls ago is done":
	// a producer waits for it before it overwrites the staging half that call used.
	DoneDelta = -EpochAdvance
)

// Verb is one of the things an Atom does.
type Verb uint8

const (
	// Copy moves Bytes from Src[0] to Dst. A packet-space Src is waited for
	// packet by packet; a packet-space Dst is written as packets.
	Copy Verb = iota
	// Reduce combines Src[0..NSrc) element by element, in that (rank) order,
	// into Dst, with the Plan's type and op (fp32 accumulation for 16- and
	// 8-bit floats). Packet-space sources are waited for as in Copy. Under
	// PreMulSum, the sources marked in Scale are multiplied by this rank's
	// scalar (the product rounded to the type) and the others added as they
	// are; a one-source Reduce with Scale set is how a rank's input leaves it
	// pre-multiplied.
	Reduce
	// Notify writes Check into rank Peer's check word for Slot, then raises
	// its flag Slot to epoch+Delta with release ordering.
	Notify
	// Wait blocks, bounded by the abort flag and PURLIN_TIMEOUT, until this
	// rank's flag Slot is >= epoch+Delta (acquire), then compares the check
	// word with Check: a difference means the ranks disagree on the call.
	Wait
	// Advance adds EpochAdvance to the worker's epoch: the steps after it
	// are the next call on the worker's channel, run as if launched alone
	// (Merge chains the calls of a group this way). It uses no other field.
	Advance
	// Epilogue applies an AllReduce epilogue (spec.Epilogue, arithmetic in
	// numeric.EpilogueRows) to Bytes of whole rows of Dst, a SpaceRecv Ref
	// whose rows are final, in place. Peer holds the spec.EpilogueKind,
	// Slot the row length in elements, and Check the epsilon's float32
	// bits. The other buffers lie alongside the output in the Launch's
	// Buffers of Dst.Rank: the residual at the same byte offset, the
	// weight from its start, the quantized output at one byte per element,
	// and the scales one float32 per row (EpilogueRowScale) or the one.
	Epilogue
	// Repeat runs the Slot steps after it Bytes times (loop.go): in
	// repetition r (from 0), each of them runs with r*Delta added to its
	// Delta (Notify, Wait) and r*Check to the Off of its Refs in the
	// caller's buffers (SpaceSend, SpaceRecv, SpacePeerRecv). A ring's chunks that cycle
	// through the staging slots are one such body, so a Plan's length does
	// not grow with the message.
	Repeat
)

var verbNames = [...]string{"copy", "reduce", "notify", "wait", "advance", "epilogue", "repeat"}

func (v Verb) String() string { return verbNames[v] }

// Space names memory an Atom resolves to an address when it runs a Plan.
type Space uint8

const (
	SpaceSend   Space = iota // the caller's input on this rank
	SpaceRecv                // the caller's output on this rank
	SpaceStage               // rank Ref.Rank's symmetric staging buffer
	SpacePacket              // rank Ref.Rank's symmetric packet buffer (16-byte packets: 8 data + 8 flag)
	// SpacePeerRecv is a peer's output of the call, where the outputs are
	// symmetric (Topology.Direct): at the same offset of a window every
	// rank registered. Ref.Rank is its peer slot, PeerSlot(buffer, peer):
	// the peer itself in a Plan of one call, and in a merged Plan the
	// peer's output of the call whose buffers are the Launch's buffer.
	SpacePeerRecv
	NumSpaces
)

// MaxPeerSlots is the most peers' outputs one Plan names (SpacePeerRecv):
// a merge of calls that push into peers' outputs stays within it (Merge).
const MaxPeerSlots = 16

// PeerSlot is the Ref.Rank of a SpacePeerRecv Ref into peer's output of
// the call whose buffers are a Launch's buffer, on nranks ranks; an Atom
// finds that output in its Launch's buffers (atom.Buffers.PeerRecv).
func PeerSlot(buffer, peer, nranks int) int { return buffer*nranks + peer }

// caller reports whether s is a caller's buffer (this rank's input or
// output, or a peer's output): where a Ref may be strided, and where a
// loop's repetitions move it on (Repeat).
func (s Space) caller() bool { return s == SpaceSend || s == SpaceRecv || s == SpacePeerRecv }

// Ref is a byte address in a Space. The Atom resolves it as
//
//	base(Space, Rank) + Off + (epoch&1)*Half
//
// so a staging Ref with Half set lands in the half picked by the epoch's
// parity: consecutive calls never share a half. For SpacePacket, Off and
// Half count packet-buffer bytes (two per payload byte).
//
// For SpaceSend and SpaceRecv, Rank is not a rank but an index into the
// Launch's buffer list: a Plan merged from several calls of one group (Merge)
// reads and writes several callers' buffers.
//
// A Ref with Pitch set is strided (only in the caller's buffers): its
// step's bytes lie in rows of Step.Row bytes, Pitch bytes apart, and Off is
// where the first byte lies, Step.Col bytes into its row (see Step.At).
type Ref struct {
	Off   uint64
	Half  uint64
	Space Space
	Rank  uint8
	_     [2]byte
	Pitch uint32
}

// Step is one instruction of a worker. Its layout is shared with csrc/plan.cuh.
type Step struct {
	Verb Verb
	NSrc uint8 // Reduce: number of sources; Copy always has one (Src[0]) and leaves NSrc 0
	Peer uint8 // Notify: the rank whose flag is raised
	// Scale marks, for a PreMulSum Reduce, the sources that are this rank's
	// own input (bit j: Src[j]): only they meet this rank's scalar, exactly
	// once; peers' contributions arrive already multiplied by theirs, and
	// partial sums are never multiplied again. 0 for every other step.
	Scale uint8
	Slot  uint32 // Notify, Wait; packet copies: unused
	// Delta: flags and packets carry epoch+Delta.
	Delta int64
	// Check is the call's fingerprint: Notify writes it beside the flag,
	// Wait compares it, packets carry its low 32 bits in their flag word.
	Check uint64
	Bytes uint64
	Dst   Ref
	Src   [MaxSrc]Ref
	// Row and Col: where a Ref of the step is strided, its rows hold Row
	// bytes and the step starts Col bytes into one (0 for steps of plain Refs).
	Row, Col uint32
}

// At is where byte k of the step lies in Ref r, relative to r's base: Off+k
// for a plain Ref; for a strided one, k bytes on from Off through rows of
// Row bytes, Pitch bytes apart.
func (s *Step) At(r Ref, k uint64) uint64 {
	if r.Pitch == 0 {
		return r.Off + k
	}
	c := uint64(s.Col) + k
	row := uint64(s.Row)
	return r.Off - uint64(s.Col) + c/row*uint64(r.Pitch) + c%row
}

// RowsValid reports whether the step's strided Refs are well formed: only
// in the caller's buffers, with rows (Row > 0, Col inside one) no longer
// than their pitch, and Off at least Col (the first row starts in the
// buffer); a step through packets also cuts its rows at packet ends (Row
// and Col multiples of 8), so every run starts a packet.
func (s *Step) RowsValid() bool {
	ok, packets := s.rowsValid(s.Dst), s.Dst.Space == SpacePacket
	for _, r := range s.Src[:max(1, int(s.NSrc))] {
		ok = ok && s.rowsValid(r)
		packets = packets || r.Space == SpacePacket
	}
	return ok && (!packets || s.Row%8 == 0 && s.Col%8 == 0)
}

func (s *Step) rowsValid(r Ref) bool {
	return r.Pitch == 0 || r.Space.caller() && s.Row > 0 && s.Col < s.Row && r.Pitch >= s.Row && r.Off >= uint64(s.Col)
}

// Runs calls f for each run of the step's bytes [k, k+n) that lies
// contiguous in every Ref: the whole step, or where a Ref is strided, the
// pieces between row ends.
func (s *Step) Runs(f func(k, n uint64)) {
	if s.Row == 0 {
		f(0, s.Bytes)
		return
	}
	row := uint64(s.Row)
	for k := uint64(0); k < s.Bytes; {
		n := min(row-(uint64(s.Col)+k)%row, s.Bytes-k)
		f(k, n)
		k += n
	}
}

// Worker is one lane of a Plan: its steps run in order. Its epoch lives in
// the shared state at EpochSlot(Channel, Index), never on the host. All
// workers of one channel in a Plan hold the same number of Advance steps.
type Worker struct {
	Channel uint16 // Collective, or a point-to-point channel (see SendChannel, RecvChannel)
	Index   uint16 // epoch slot within the channel
	First   uint32 // first step in Plan.Steps
	Count   uint32 // number of steps
	Engine  Engine // what may run the worker's copies (an Atom without a copy engine runs every worker alike)
	// Loops is 1 when the worker's steps hold a loop (Repeat), which an
	// Atom reads again for each repetition: one without may let its
	// steps' memory go once it has read them all (markLoops sets it).
	Loops uint8
	_     [2]byte
}

// Engine says what moves a worker's bytes.
type Engine uint8

const (
	// EngineSM: the Atom's processors (GPU thread blocks, host goroutines).
	EngineSM Engine = iota
	// EngineCopy: the worker's steps are Copy, Notify, Wait and Advance
	// only, and each Copy is a few large contiguous runs between the
	// caller's buffers and staging whose Refs carry no Half (the same
	// addresses in every call), so an Atom may hand each Copy to a copy
	// engine as one bulk transfer in the worker's order, and run only the
	// signals itself (Topology.EngineMin).
	EngineCopy
)

var engineNames = [...]string{"sm", "copy"}

func (e Engine) String() string { return engineNames[e] }

// Plan is what SNAC derives for one rank from a call, the topology and the size.
// It holds no pointers to user memory: a cached Plan serves any buffers of its shape.
type Plan struct {
	Workers []Worker
	Steps   []Step
	Type    spec.DataType
	Op      spec.Op
	NRanks  int // Avg divides by it, unless Op.Divisor names another count
	Rank    int // the rank that runs it (Merge joins chained collectives on it)
	Regime  Regime
}

// Regime says how a Plan moves its bytes; it is informative (logs, tests):
// the Steps alone define the protocol.
type Regime uint8

const (
	RegimeEmpty   Regime = iota // nothing to move
	RegimePacket                // 16-byte packets: data and flag in one store, no separate notify
	RegimeStaged                // staged once, one flag per worker
	RegimeChunked               // chunked and pipelined within one staging half
	RegimeRing                  // more chunks than slots: a ring with drain signals
	RegimeDirect                // pushed straight into the consumers' outputs (Topology.Direct)
)

var regimeNames = [...]string{"empty", "packet", "staged", "chunked", "ring", "direct"}

func (r Regime) String() string { return regimeNames[r] }

// PushesIntoPeers reports whether a step of p writes into a peer's output
// (SpacePeerRecv): a direct Plan, or an AllReduce that pushes its reduced
// shards there, whatever its Regime says.
func (p *Plan) PushesIntoPeers() bool {
	for i := range p.Steps {
		if st := &p.Steps[i]; (st.Verb == Copy || st.Verb == Reduce) && st.Dst.Space == SpacePeerRecv {
			return true
		}
	}
	return false
}

// Bytes is the memory of p's steps and workers.
func (p *Plan) Bytes() uint64 {
	return uint64(len(p.Steps))*uint64(unsafe.Sizeof(Step{})) + uint64(len(p.Workers))*uint64(unsafe.Sizeof(Worker{}))
}

// WorkerSteps returns the steps of worker w.
func (p *Plan) WorkerSteps(w int) []Step {
	wk := p.Workers[w]
	return p.Steps[wk.First : wk.First+wk.Count]
}
