// Package hostiletest loads the table of hostile manuals
// (utcp/testdata/hostile_manuals.json) that utcp's and the server's tests
// run, each against a recording provider of its own: a manual's {{P}}
// becomes the provider's host:port and {{PORT}} its port.
package hostiletest

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Case is one hostile manual and what must become of it.
type Case struct {
	Name       string          `json:"name"`
	ManualName string          `json:"manual_name"`
	Manual     json.RawMessage `json:"manual"`
	Want       struct {
		// Refused is the gRPC code the registration gets ("" when the
		// manual registers), Field what its BadRequest names.
		Refused string `json:"refused"`
		Field   string `json:"field"`
		// CallRefused, when set, is the manual registering and its call
		// failing, for that utcp reason ("" for any).
		CallRefused *string `json:"call_refused"`
	} `json:"want"`
	// Why says what the manual tries.
	Why string `json:"why"`
}

// MinCases is the fewest cases the table may have.
const MinCases = 30

// Load reads the table with hostPort (the recording provider's) filled in.
func Load(tb testing.TB, hostPort string) []Case {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "testdata", "hostile_manuals.json"))
	if err != nil {
		tb.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(hostPort)
	text := strings.NewReplacer("{{P}}", hostPort, `"{{PORT}}"`, port, "{{PORT}}", port).Replace(string(raw))
	var cases []Case
	if err := json.Unmarshal([]byte(text), &cases); err != nil {
		tb.Fatal(err)
	}
	if len(cases) < MinCases {
		tb.Fatalf("%d hostile manuals, want at least %d", len(cases), MinCases)
	}
	return cases
}
