//go:build race

package cuda

// raceEnabled trims the largest plan-size sweeps under -race, whose
// instrumented Plan builder runs many times slower.
const raceEnabled = true
