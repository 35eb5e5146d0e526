// Package bench holds exprd's benchmarks against its peers (cel-go, goja,
// npm xsai) and the scale measurements, in a module of its own so that the
// peers never become dependencies of exprd. `make bench` runs them all and
// writes BENCHMARKS.md's tables and scale.png.
package bench
