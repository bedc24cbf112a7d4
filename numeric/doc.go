// Package numeric is the arithmetic of Purlin's data types on the host: the
// conversions between the stored bytes of every spec.DataType and Go numbers,
// and Reduce, the inner loop of the host datapath (atom/host) and the
// reference the GPU datapath is checked against.
//
// Formats:
//   - Float16: IEEE 754 binary16. Conversion from wider floats rounds to
//     nearest even; overflow gives infinity.
//   - Bfloat16: the top half of a float32. Rounds to nearest even; overflow
//     gives infinity.
//   - Float8e4m3: OCP "e4m3fn": bias 7, no infinities, largest 448, NaN is
//     S.1111.111 only.
//   - Float8e5m2: IEEE-like with bias 15 and infinities, largest finite 57344.
//
// Both fp8 conversions round to nearest even and saturate: a value (or an
// infinity) beyond the largest finite magnitude becomes that magnitude with
// its sign, as CUDA's __NV_SATFINITE does. NaN stays NaN in every format,
// with its sign and as much of its payload as the format holds.
//
// Reduce combines sources element by element in the order given (rank
// order), accumulating in float32 for the 16- and 8-bit floats (one rounding
// at the end) and in the type itself otherwise (integers wrap):
//
//	numeric.Reduce(dst, [][]byte{a, b, c}, spec.Bfloat16, spec.Op{Kind: spec.Sum}, 3, 0)
//
// Copying needs nothing from this package: it is Go's copy.
package numeric
