//go:build race

package comm

// raceEnabled: under -race, sync.Pool drops what is put in it at random, so
// pooled paths allocate (TestHotPathsAllocateNothing checks without it).
const raceEnabled = true
