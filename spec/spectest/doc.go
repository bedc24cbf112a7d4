// Package spectest is the reference every datapath test checks against:
// random inputs per data type, the expected output of any collective for all
// ranks, and a comparison with a tight per-type tolerance.
//
// Expected results are computed exactly (integers, wrapping in the type as
// the Atoms do) or in float64 and rounded once to the type; Compare allows
// what an fp32 (or native) accumulation in rank order may differ from that.
// Each rank's call carries its own op: PreMulSum multiplies rank r's input
// by calls[r].Op's scalar (ranks may differ), the product rounded to the
// type, as the pre-multiplied input a rank sends is held:
//
//	calls := ...                    // one spec.Call per rank
//	in := spectest.Inputs(rng, calls) // Send contents per rank
//	want := spectest.Expected(calls, in)
//	if err := spectest.Compare(calls[r], got, want[r]); err != nil { ... }
package spectest
