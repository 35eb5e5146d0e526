//go:build !race

package evaluator

// numberCost bounds a float64 in an interface: 8 bytes, two to a block of
// the tiny allocator.
const numberCost = 8
