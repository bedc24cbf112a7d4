//go:build race

package snac_test

// raceEnabled shrinks the property tests under -race, whose instrumented
// simulator runs about twenty times slower.
const raceEnabled = true
