package main

import (
	"io"
	"testing"
)

// Each turn flag bounded below is refused under its bound, named, and
// taken at it.
func TestTurnFlagsInRange(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "": taken
	}{
		{[]string{"--turn-max-per-caller", "0"}, "turn-max-per-caller 0: want at least 1"},
		{[]string{"--turn-max-per-caller", "1"}, ""},
		{[]string{"--turn-max-takeovers", "0"}, "turn-max-takeovers 0: want at least 1"},
		{[]string{"--turn-max-takeovers", "1"}, ""},
	} {
		_, err := parseConfig(tt.args, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: got %v, want none", tt.args, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}
