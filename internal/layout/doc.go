// Package layout holds the test that keeps exprd's imports running one way
// (DESIGN.md): cmd → server → {codemode, agent} → {evaluator, utcp, model};
// client → gen. No core package imports server/ or gRPC; gen/ imports
// nothing of ours.
package layout
