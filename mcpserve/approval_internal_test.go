package mcpserve

import (
	"strings"
	"testing"
	"time"
)

// A request state is taken back until ApprovalTTL has passed, and not a
// second after.
func TestStateExpires(t *testing.T) {
	s, err := newSigner([]byte(strings.Repeat("k", MinApprovalKeyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return at }
	state := s.sign(approvalState{Caller: "ops", Tool: "call_tool_chain", Tools: []string{"math.divide"}, Expires: at.Add(ApprovalTTL).Unix()})
	for _, tc := range []struct {
		after time.Duration
		ok    bool
	}{{0, true}, {ApprovalTTL, true}, {ApprovalTTL + time.Second, false}} {
		s.now = func() time.Time { return at.Add(tc.after) }
		_, err := s.open(state)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "expired")) {
			t.Errorf("after %v: %v, want taken %v", tc.after, err, tc.ok)
		}
	}
}

// A key shorter than MinApprovalKeyBytes is refused; one of that length
// is taken.
func TestApprovalKeyLength(t *testing.T) {
	if _, err := newSigner([]byte(strings.Repeat("k", MinApprovalKeyBytes-1))); err == nil {
		t.Error("a key one byte short was taken")
	}
	if _, err := newSigner([]byte(strings.Repeat("k", MinApprovalKeyBytes))); err != nil {
		t.Error(err)
	}
}

// No state but one the signer made is taken back, whatever a client
// sends.
func FuzzOpenState(f *testing.F) {
	s, _ := newSigner([]byte(strings.Repeat("k", MinApprovalKeyBytes)))
	good := s.sign(approvalState{Caller: "ops", Tool: "call_tool_chain", Expires: time.Now().Add(time.Hour).Unix()})
	for _, seed := range []string{"", ".", good, good + "x", "e30.AAAA", strings.Repeat("a.", 100)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, state string) {
		if _, err := s.open(state); err == nil && state != good {
			t.Fatalf("%q was taken as a state this signer made", state)
		}
	})
}

// A state of maxStateBytes is read; one byte more is refused unread.
func TestStateSizeBound(t *testing.T) {
	s, _ := newSigner([]byte(strings.Repeat("k", MinApprovalKeyBytes)))
	exp := time.Now().Add(time.Hour).Unix()
	sized := func(n int) string {
		// The caller's name pads the signed state to n bytes: base64
		// grows by 4 a 3 bytes, so pad a byte at a time until it fits.
		for pad := 0; ; pad++ {
			st := s.sign(approvalState{Caller: strings.Repeat("c", pad), Tool: "t", Expires: exp})
			if len(st) == n {
				return st
			}
			if len(st) > n {
				return ""
			}
		}
	}
	var at string
	for n := maxStateBytes; at == "" && n > maxStateBytes-4; n-- {
		at = sized(n)
	}
	if _, err := s.open(at); len(at) > maxStateBytes || err != nil {
		t.Errorf("a state of %d bytes (bound %d): %v", len(at), maxStateBytes, err)
	}
	var past string
	for n := maxStateBytes + 1; past == ""; n++ {
		past = sized(n)
	}
	if _, err := s.open(past); err == nil {
		t.Errorf("a state of %d bytes, past the bound of %d, was read", len(past), maxStateBytes)
	}
}
