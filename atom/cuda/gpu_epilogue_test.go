package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
)

var le = binary.LittleEndian

// epilogueKinds are the epilogues the GPU tests run: residual add, RMSNorm,
// both, then quantized with the tensor's scale and with a scale a row.
var epilogueKinds = []spec.EpilogueKind{
	spec.EpilogueResidualAdd,
	spec.EpilogueRMSNorm,
	spec.EpilogueResidualAdd | spec.EpilogueRMSNorm,
	spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8,
	spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
	spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
}

// epilogueGPUCase is one AllReduce with an epilogue on every rank, or with
// gather an AllGatherV of its rows (each rank a share of them, the last
// phase of an AllReduce across nodes); shift moves every buffer by that
// many elements off its allocation's alignment.
type epilogueGPUCase struct {
	typ          spec.DataType
	kind         spec.EpilogueKind
	hidden, rows uint64
	inPlace      bool
	shift        uint64
	gather       bool
}

func (c epilogueGPUCase) String() string {
	coll := spec.AllReduce
	if c.gather {
		coll = spec.AllGatherV
	}
	return fmt.Sprintf("%s %s %s hidden=%d rows=%d inplace=%v shift=%d", coll, c.typ, c.kind, c.hidden, c.rows, c.inPlace, c.shift)
}

// epilogueMem is one rank's device memory for the cases, reused by each.
type epilogueMem struct {
	send, recv, residual, weight, quant, scales devicePtr
}

// TestGPUAllReduceEpilogue: AllReduce with every epilogue kind on float32,
// float16 and bfloat16, rows of 1 to 16384 elements (whole 16-byte vectors
// and not, and buffers off their alignment), 1 to 300 rows and a few
// multi-MiB calls (gpuTopology's staged, chunked and ring regimes), in place
// and apart, and AllGatherV of rows with an epilogue (each rank a share of
// the rows, as across nodes), on every GPU up to 2 (one rank a GPU). Each
// rank's output, residual, quantized output and scales are checked against
// numeric's: numeric.EpilogueRows on numeric.Reduce of every rank's input
// (gathered: the reduced tensor, shared out). Inputs lie
// on a grid (multiples of 1/8 in [-2, 2]), so the reduction and the
// residual sum are exact; the GPU sums a row's squares in another order than
// numeric (threads apart, then combined), so where RMSNorm's sum of squares
// rounds, its output and residual may differ from numeric's by 1 unit in the
// last place of the type, the quantized output by 1 e4m3 step, and a row
// scale by the largest output's last place; a row whose outputs are exact
// must have the exact scale and quantized output.
func TestGPUAllReduceEpilogue(t *testing.T) {
	needGPUs(t, 1)
	var devices int32
	driver.DeviceGetCount(&devices)
	n := min(int(devices), 2)
	ranks := newGPURanks(t, n, int64(20*time.Second))
	var cases []epilogueGPUCase
	types := []spec.DataType{spec.Bfloat16, spec.Float16, spec.Float32}
	i := 0
	for _, hidden := range []uint64{1, 3, 200, 1024, 4096, 16384} {
		for _, rows := range []uint64{1, 5, 64, 300} {
			for _, kind := range epilogueKinds {
				cases = append(cases, epilogueGPUCase{typ: types[i%3], kind: kind, hidden: hidden, rows: rows, inPlace: i%2 == 1, shift: uint64(i/7%2) * uint64(i%3)})
				i++
			}
		}
	}
	for k, kind := range epilogueKinds { // multi-MiB
		cases = append(cases,
			epilogueGPUCase{typ: spec.Bfloat16, kind: kind, hidden: 4096, rows: 512, inPlace: k%2 == 0},
			epilogueGPUCase{typ: spec.Float16, kind: kind, hidden: 1000, rows: 2100, inPlace: k%2 == 1, shift: 1},
			epilogueGPUCase{typ: spec.Float32, kind: kind, hidden: 16384, rows: 96, inPlace: k%2 == 1})
	}
	for _, hidden := range []uint64{3, 1024, 4096} { // AllGatherV, never in place
		for _, rows := range []uint64{1, 5, 300} {
			for _, kind := range epilogueKinds {
				cases = append(cases, epilogueGPUCase{typ: types[i%3], kind: kind, hidden: hidden, rows: rows, shift: uint64(i/7%2) * uint64(i%3), gather: true})
				i++
			}
		}
	}
	cases = append(cases, epilogueGPUCase{typ: spec.Bfloat16, kind: epilogueKinds[3], hidden: 4096, rows: 1024, gather: true})
	most := uint64(0)
	for _, c := range cases {
		most = max(most, (c.hidden*c.rows+c.shift)*uint64(c.typ.Size()))
	}
	mems := make([]epilogueMem, n)
	for r, g := range ranks {
		m := &mems[r]
		m.send, m.recv, m.residual = g.alloc(t, int(most)), g.alloc(t, int(most)), g.alloc(t, int(most))
		m.weight, m.quant, m.scales = g.alloc(t, 16384*4+64), g.alloc(t, int(most)), g.alloc(t, 4*3000+64)
	}
	// A small budget of Plan images: most calls' images are freed after
	// them, and those of the separate epilogue kernel (the multi-MiB calls)
	// among them, once both kernels' blocks are done with them.
	const budget = 16 << 10
	for _, g := range ranks {
		g.plans.mu.Lock()
		g.plans.budget = budget
		g.plans.mu.Unlock()
	}
	rng := rand.New(rand.NewPCG(21, 22))
	rows, inexact := 0, 0
	var split []*devicePlan
	for _, c := range cases {
		inexact += runEpilogueGPU(t, ranks, mems, c, rng)
		rows += n * int(c.rows)
		ranks[0].plans.mu.Lock()
		for _, d := range ranks[0].plans.evictable {
			if d.blocks > uint64(d.nworkers) && !slices.Contains(split, d) {
				split = append(split, d)
			}
		}
		ranks[0].plans.mu.Unlock()
	}
	t.Logf("%d calls on %d ranks: %d of %d rows' outputs differ from numeric's in the last place", len(cases), n, inexact, rows)
	require.NotEmpty(t, split, "calls with a separate epilogue kernel")
	freed := 0
	for _, d := range split {
		if d.counts.status().Load() == imageFreed {
			freed++
		}
	}
	t.Logf("%d images with a separate epilogue, %d freed", len(split), freed)
	require.Positive(t, freed, "images of two kernels freed")
}

// runEpilogueGPU runs case c on every rank and checks every rank's buffers;
// it returns the number of rows, over the ranks, whose output is not exact.
func runEpilogueGPU(t *testing.T, ranks []*gpuRank, mems []epilogueMem, c epilogueGPUCase, rng *rand.Rand) int {
	n, size := len(ranks), uint64(c.typ.Size())
	count := c.hidden * c.rows
	bytes := count * size
	grid := func(b []byte) []byte {
		for i := range len(b) / int(size) {
			numeric.SetFloat64(c.typ, b, i, float64(rng.IntN(33)-16)/8)
		}
		return b
	}
	pattern := func(m int, v byte) []byte {
		b := make([]byte, m)
		for i := range b {
			b[i] = v
		}
		return b
	}
	inputs := make([][]byte, n)
	for r := range inputs {
		inputs[r] = grid(make([]byte, bytes))
	}
	residual := grid(make([]byte, bytes)) // every rank's alike, as in tensor parallelism
	weight := grid(make([]byte, c.hidden*size))
	const tensorScale = 0.25
	scales := pattern(4*int(c.rows), 0xff)
	if c.kind&spec.EpilogueRowScale == 0 {
		scales = make([]byte, 4)
		le.PutUint32(scales, math.Float32bits(tensorScale))
	}

	want := make([]byte, bytes)
	numeric.Reduce(want, inputs, c.typ, spec.Op{Kind: spec.Sum}, n, 0)
	var counts, displs []uint64 // gather: rank r's share of the rows
	if c.gather {
		counts, displs = make([]uint64, n), make([]uint64, n)
		for r := range n {
			lo, hi := c.rows*uint64(r)/uint64(n), c.rows*uint64(r+1)/uint64(n)
			counts[r], displs[r] = (hi-lo)*c.hidden, lo*c.hidden
			inputs[r] = append([]byte(nil), want[displs[r]*size:(displs[r]+counts[r])*size]...)
		}
	}
	wantResidual := append([]byte(nil), residual...)
	wantQuant, wantScales := pattern(int(count), 0x5a), append([]byte(nil), scales...)
	var wr, ww, wq, ws []byte
	if c.kind&spec.EpilogueResidualAdd != 0 {
		wr = wantResidual
	}
	if c.kind&spec.EpilogueRMSNorm != 0 {
		ww = weight
	}
	if c.kind&spec.EpilogueQuantFP8 != 0 {
		wq, ws = wantQuant, wantScales
	}
	const eps = 1e-5
	numeric.EpilogueRows{Type: c.typ, Kind: c.kind, Hidden: int(c.hidden), Eps: eps}.Run(want, wr, ww, wq, ws)

	at := func(p devicePtr) devicePtr { return p + devicePtr(c.shift*size) }
	for r, g := range ranks {
		m := mems[r]
		send, recv := at(m.send), at(m.recv)
		if c.inPlace {
			recv = send
		}
		g.upload(t, send, inputs[r])
		e := spec.Epilogue{Kind: c.kind, Hidden: c.hidden, Eps: eps}
		if wr != nil {
			e.Residual = uintptr(at(m.residual))
			g.upload(t, at(m.residual), residual)
		}
		if ww != nil {
			e.Weight = uintptr(at(m.weight))
			g.upload(t, at(m.weight), weight)
		}
		if wq != nil {
			e.Quant, e.Scales = uintptr(m.quant+devicePtr(c.shift)), uintptr(m.scales)
			g.upload(t, devicePtr(e.Quant), pattern(int(count), 0x5a))
			g.upload(t, m.scales, scales)
		}
		sc := &spec.Call{Coll: spec.AllReduce, Type: c.typ, Op: spec.Op{Kind: spec.Sum}, Count: count,
			Send: uintptr(send), Recv: uintptr(recv), Rank: r, NRanks: n, Epilogue: e}
		if c.gather {
			sc.Coll, sc.Count, sc.Counts, sc.Displs = spec.AllGatherV, 0, counts, displs
		}
		require.NoError(t, sc.Validate(), "%s", c)
		require.Equal(t, c.inPlace, sc.InPlace(), "%s", c)
		plan, err := snac.Build(sc, g.topo)
		require.NoError(t, err, "%s", c)
		bufs := []atom.Buffers{{Send: sc.Send, Recv: sc.Recv, Residual: e.Residual, Weight: e.Weight, Quant: e.Quant, Scales: e.Scales}}
		require.NoError(t, g.Launch(plan, bufs, uintptr(g.stream)), "%s", c)
	}
	inexact := 0
	for r, g := range ranks {
		g.sync(t)
		require.NoError(t, g.AsyncError(), "%s", c)
		m := mems[r]
		recv := at(m.recv)
		if c.inPlace {
			recv = at(m.send)
		}
		what := fmt.Sprintf("rank %d of %d, %s", r, n, c)
		got := g.download(t, recv, int(bytes))
		exact := checkRows(t, c, got, want, "output", what)
		for _, e := range exact {
			if !e {
				inexact++
			}
		}
		if wr != nil {
			checkRows(t, c, g.download(t, at(m.residual), int(bytes)), wantResidual, "residual", what)
		}
		if wq != nil {
			checkQuant(t, c, g.download(t, m.quant+devicePtr(c.shift), int(count)), wantQuant, exact, what)
			gotScales := g.download(t, m.scales, len(wantScales))
			for row := range len(wantScales) / 4 {
				g, w := math.Float32frombits(le.Uint32(gotScales[4*row:])), math.Float32frombits(le.Uint32(wantScales[4*row:]))
				if exact[row] {
					require.Equal(t, w, g, "scale of row %d, %s", row, what)
				} else {
					require.InEpsilon(t, w, g, lastPlace(c.typ), "scale of row %d, %s", row, what)
				}
			}
		}
	}
	return inexact
}

// lastPlace is the relative size of a unit in the last place of typ.
func lastPlace(typ spec.DataType) float64 {
	switch typ {
	case spec.Bfloat16:
		return 0x1p-7
	case spec.Float16:
		return 0x1p-10
	}
	return 0x1p-23
}

// ordered is element i of b (of typ) as an integer that counts units in
// the last place: the encodings' order, with negatives below zero.
func ordered(typ spec.DataType, b []byte, i int) int64 {
	var bits, sign uint64
	switch typ.Size() {
	case 1:
		bits, sign = uint64(b[i]), 0x80
	case 2:
		bits, sign = uint64(le.Uint16(b[2*i:])), 0x8000
	default:
		bits, sign = uint64(le.Uint32(b[4*i:])), 0x80000000
	}
	if bits&sign != 0 {
		return -int64(bits &^ sign)
	}
	return int64(bits)
}

// checkRows compares rows of typ (got against want) allowing 1 unit in the
// last place where the case sums squares in a rounding order (RMSNorm); it
// returns which rows are exact.
func checkRows(t *testing.T, c epilogueGPUCase, got, want []byte, name, what string) []bool {
	t.Helper()
	exact := make([]bool, c.rows)
	for row := range int(c.rows) {
		exact[row] = true
		for j := range int(c.hidden) {
			i := row*int(c.hidden) + j
			d := ordered(c.typ, got, i) - ordered(c.typ, want, i)
			if d == 0 {
				continue
			}
			exact[row] = false
			if c.kind&spec.EpilogueRMSNorm == 0 || d < -1 || d > 1 {
				t.Fatalf("%s: %s row %d element %d: got %v want %v", what, name, row, j,
					numeric.GetFloat64(c.typ, got, i), numeric.GetFloat64(c.typ, want, i))
			}
		}
	}
	return exact
}

// checkQuant compares the quantized output: equal in rows whose output is
// exact, within 1 e4m3 step elsewhere.
func checkQuant(t *testing.T, c epilogueGPUCase, got, want []byte, exact []bool, what string) {
	t.Helper()
	for row := range int(c.rows) {
		for j := range int(c.hidden) {
			i := row*int(c.hidden) + j
			d := ordered(spec.Float8e4m3, got, i) - ordered(spec.Float8e4m3, want, i)
			if d != 0 && (exact[row] || d < -1 || d > 1) {
				t.Fatalf("%s: quant row %d element %d: got %#02x want %#02x", what, row, j, got[i], want[i])
			}
		}
	}
}
