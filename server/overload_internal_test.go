package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// endOr ends a shed stream as soon as no send is in flight; while one is,
// the handler's own end wins if it comes first; a send that starts after
// the end fails and is not sent.
func TestTrackedStreamEndOr(t *testing.T) {
	handlerErr := errors.New("the handler's own end")
	for _, tt := range []struct {
		name    string
		sending time.Duration // how long a send is in flight when the shed comes; 0: none, -1: for good
		handler bool          // the handler ends while the send is in flight
		wantEnd bool
	}{
		{"no send in flight", 0, false, true},
		{"a send that finishes", 3 * endRetry, false, true},
		{"a send for good, the handler ends", -1, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := &trackedStream{ctx: context.Background()}
			ended := make(chan error, 1)
			release := make(chan struct{})
			if tt.sending != 0 {
				ts.mu.Lock()
				go func() {
					if tt.sending > 0 {
						time.Sleep(tt.sending)
					} else {
						<-release
					}
					ts.mu.Unlock()
				}()
			}
			if tt.handler {
				go func() { time.Sleep(3 * endRetry); ended <- handlerErr }()
			}
			ok, err := ts.endOr(ended)
			close(release)
			if ok != tt.wantEnd || (!ok && err != handlerErr) {
				t.Fatalf("endOr: %v, %v; want ended %v", ok, err, tt.wantEnd)
			}
			if ok {
				sent := false
				if err := ts.sending(func() error { sent = true; return nil }); err == nil || sent {
					t.Errorf("a send after the end: sent %v, error %v; want refused", sent, err)
				}
			}
		})
	}
}
