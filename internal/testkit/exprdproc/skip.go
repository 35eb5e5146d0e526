package exprdproc

import "os"

// TB is what SkipOrFailInCI needs of a test: testing.TB's methods, an
// interface so that the programs built on this package do not link
// package testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// SkipOrFailInCI ends a test this machine cannot run (a tool not on PATH,
// an address it cannot listen on, a single P): a skip, but a failure when
// the CI variable is set, where a skip must not pass silently.
func SkipOrFailInCI(t TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
