package server_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/server"
)

// A client that sends calls and never reads what they write fills its
// stream's flow-control window, then its queue: after the slow-reader
// timeout its calls are let go and its next message ends the stream
// RESOURCE_EXHAUSTED, instead of the calls and the receiving goroutine
// waiting forever. What was sent before stays readable, in order, ahead of
// the status.
func TestSessionClientThatDoesNotReadIsEnded(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	c := startServer(t, server.WithSlowReaderTimeout(timeout))
	s := openSession(t, c, readOpen())
	var steps []string
	for i := range 50 {
		steps = append(steps, fmt.Sprintf(`{"set": "scopes.root.v%d", "expr": "repeat(\"x\", 20000)"}`, i))
	}
	input := `{"steps": [` + strings.Join(steps, ",") + `]}`
	for i := range 64 {
		s.call(fmt.Sprintf("c%d", i), input) // 64 calls × 50 writes of 20 KB: far past the window and the queue
	}
	// The property is a timeout's: let it pass, without reading.
	time.Sleep(10 * timeout)
	s.call("after", `{"steps": []}`)
	var last error
	writes := 0
	for {
		m, err := s.stream.Recv()
		if err != nil {
			last = err
			break
		}
		if m.GetStepWrite() != nil {
			writes++
		}
	}
	if errors.Is(last, io.EOF) || status.Code(last) != codes.ResourceExhausted {
		t.Fatalf("after %d writes the stream ended with %v, want RESOURCE_EXHAUSTED", writes, last)
	}
	var subject string
	for _, d := range status.Convert(last).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			subject = q.GetViolations()[0].GetSubject()
		}
	}
	if subject != "slow_reader_timeout" {
		t.Errorf("QuotaFailure subject: got %q, want slow_reader_timeout", subject)
	}
	if writes == 0 || writes >= 64*50 {
		t.Errorf("writes read before the end: got %d, want some and not all %d", writes, 64*50)
	}
}
