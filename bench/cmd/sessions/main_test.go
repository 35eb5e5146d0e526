package main

import "testing"

// TestRun opens a few sessions of each kind against a real exprd: every
// active session's call must succeed, and the server's RSS must be read.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts exprd")
	}
	r, err := run("../../..", 20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 20 || r.BaseRSSMiB <= 0 || r.StateBytes == 0 {
		t.Fatalf("got %+v", r)
	}
}
