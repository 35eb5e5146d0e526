//go:build !race

package search

// raceEnabled: the tests run under the race detector (make test), where
// the evaluation's ablation, which only reports figures, is left out.
const raceEnabled = false
