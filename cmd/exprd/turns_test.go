package main

import (
	"io"
	"os"
	"strings"
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

// CodeMode's candidate limit is read once, at the start: the flag, else
// go-utcp's UTCP_CODEMODE_CANDIDATE_LIMIT, else the default; a bad value
// stops exprd there, named, rather than failing requests.
func TestCodeModeCandidates(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  string // "": unset
		args []string
		want int
		err  string
	}{
		{"the default", "", nil, 16, ""},
		{"from the variable", "3", nil, 3, ""},
		{"the flag first", "3", []string{"--codemode-candidates", "5"}, 5, ""},
		{"a variable not a number", "zero", nil, 0, `UTCP_CODEMODE_CANDIDATE_LIMIT="zero": want a positive integer`},
		{"a variable at 0", "0", nil, 0, `UTCP_CODEMODE_CANDIDATE_LIMIT="0": want a positive integer`},
		{"the flag at 1", "", []string{"--codemode-candidates", "1"}, 1, ""},
		{"the flag negative", "", []string{"--codemode-candidates", "-1"}, 0, "codemode-candidates"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("UTCP_CODEMODE_CANDIDATE_LIMIT", tt.env) // restored after
			if tt.env == "" {
				_ = os.Unsetenv("UTCP_CODEMODE_CANDIDATE_LIMIT")
			}
			c, err := parseConfig(tt.args, io.Discard)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error naming %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case c.runLimits.codeModeCandidates != tt.want:
				t.Fatalf("got %d candidates, want %d", c.runLimits.codeModeCandidates, tt.want)
			}
		})
	}
}
