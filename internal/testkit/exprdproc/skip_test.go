package exprdproc_test

import (
	"fmt"
	"testing"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// recorder is a TB that notes how the test would have ended.
type recorder struct{ ended string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.ended == "" {
		r.ended = "fail: " + fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Skipf(format string, args ...any) {
	if r.ended == "" {
		r.ended = "skip: " + fmt.Sprintf(format, args...)
	}
}

// TestSkipOrFailInCI: a skip, a failure where CI is set (to anything).
func TestSkipOrFailInCI(t *testing.T) {
	for _, tc := range []struct{ ci, want string }{
		{"", "skip: node is not on PATH"},
		{"true", "fail: node is not on PATH"},
		{"1", "fail: node is not on PATH"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			var r recorder
			exprdproc.SkipOrFailInCI(&r, "%s is not on PATH", "node")
			if r.ended != tc.want {
				t.Errorf("got %q, want %q", r.ended, tc.want)
			}
		})
	}
}
