package evaluator

// What the memory tests outside the package hold the state to.
var (
	// DecodeReserves is what decoding data reserves beforehand.
	DecodeReserves = func(data []byte) int64 { sh, _ := scanShape(data, nil); return sh.memory() }
	// Footprint bounds what a decoded value holds.
	Footprint = footprint
)
