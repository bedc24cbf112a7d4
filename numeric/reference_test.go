package numeric

import (
	"math"
	"sort"
)

// refFormat is a test-only description of a narrow float format, written
// from the formats' definitions and independent of format.go: values come
// from the textbook formula with math.Pow, rounding from the sorted list of
// representable values.
type refFormat struct {
	name              string
	expBits, manBits  int
	bias              int
	ieee              bool // all-ones exponent is inf/NaN; otherwise only all-ones code is NaN
	saturate          bool
	values            []float64 // values[c] for the positive finite codes 0..maxCode
	maxCode, infCode  uint32
	signBit, nanProbe uint32
}

func newRefFormat(name string, expBits, manBits, bias int, ieee, saturate bool) *refFormat {
	f := &refFormat{name: name, expBits: expBits, manBits: manBits, bias: bias, ieee: ieee, saturate: saturate}
	f.signBit = 1 << (expBits + manBits)
	allOnesExp := uint32(1<<expBits-1) << manBits
	if ieee {
		f.maxCode = allOnesExp - 1
		f.infCode = allOnesExp
	} else {
		f.maxCode = allOnesExp | uint32(1<<manBits-2)
	}
	for c := uint32(0); c <= f.maxCode; c++ {
		f.values = append(f.values, f.value(c))
	}
	if !sort.Float64sAreSorted(f.values) {
		panic("reference values not increasing for " + name)
	}
	return f
}

// value is the definition: (-1)^s * 2^(E-bias) * 1.M, or 2^(1-bias) * 0.M when E = 0.
func (f *refFormat) value(c uint32) float64 {
	m := float64(c & (1<<f.manBits - 1))
	e := int(c>>f.manBits) & (1<<f.expBits - 1)
	frac := m / math.Pow(2, float64(f.manBits))
	v := math.Pow(2, float64(1-f.bias)) * frac
	if e != 0 {
		v = math.Pow(2, float64(e-f.bias)) * (1 + frac)
	}
	if c&f.signBit != 0 {
		v = -v
	}
	return v
}

func (f *refFormat) isNaN(c uint32) bool {
	mag := c &^ f.signBit
	if f.ieee {
		return mag > f.infCode
	}
	return mag == f.maxCode+1
}

// decode is the value of any code, specials included.
func (f *refFormat) decode(c uint32) float64 {
	switch mag := c &^ f.signBit; {
	case f.isNaN(c):
		return math.NaN()
	case f.ieee && mag == f.infCode:
		if c&f.signBit != 0 {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	return f.value(c)
}

// round is the code nearest x, ties to the even code; beyond the largest
// finite value, IEEE formats overflow to infinity at max + ulp/2 and
// saturating ones clamp. NaN gives any NaN code (ok reports that).
func (f *refFormat) round(x float64) (code uint32, isNaN bool) {
	if x != x {
		return 0, true
	}
	var sign uint32
	if math.Signbit(x) {
		sign, x = f.signBit, -x
	}
	max := f.values[f.maxCode]
	if x >= max {
		overflow := math.IsInf(x, 1) || x >= max+(max-f.values[f.maxCode-1])/2
		if overflow && !f.saturate {
			return sign | f.infCode, false
		}
		return sign | f.maxCode, false
	}
	lo := uint32(sort.SearchFloat64s(f.values, x)) // first value >= x
	if f.values[lo] == x {
		return sign | lo, false
	}
	lo--
	hi := lo + 1
	switch twice, sum := 2*x, f.values[lo]+f.values[hi]; {
	case twice < sum:
		return sign | lo, false
	case twice > sum:
		return sign | hi, false
	case lo%2 == 0:
		return sign | lo, false
	}
	return sign | hi, false
}

var (
	refFloat16  = newRefFormat("float16", 5, 10, 15, true, false)
	refBfloat16 = newRefFormat("bfloat16", 8, 7, 127, true, false)
	refE4M3     = newRefFormat("e4m3", 4, 3, 7, false, true)
	refE5M2     = newRefFormat("e5m2", 5, 2, 15, true, true)
)
