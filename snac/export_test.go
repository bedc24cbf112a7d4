package snac

// WriteChunksOut makes Builds write every chunk out, with no loop (loopsOff),
// until the returned function is called.
func WriteChunksOut() (restore func()) {
	loopsOff = true
	return func() { loopsOff = false }
}

// MaxEngineChunks is maxEngineChunks.
const MaxEngineChunks = maxEngineChunks
