//go:build race

package evaluator

// numberCost bounds a float64 in an interface. The race detector turns the
// tiny allocator off: a box takes a block of 16 bytes of its own.
const numberCost = 16
