//go:build !race

package snac_test

const raceEnabled = false
