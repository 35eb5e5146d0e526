package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

// TestRateLimitOneBucketPerCaller is the regression test for unary RPCs and
// streams drawing on two buckets, which doubled a caller's rate: with burst
// 2, two unary calls used to leave two streams to pass as well.
func TestRateLimitOneBucketPerCaller(t *testing.T) {
	t.Parallel()
	const unary, stream = "unary", "stream"
	for _, tt := range []struct {
		name  string
		burst int
		rpcs  []string // in order; all but the last fit the burst, the last is one past it
	}{
		{"unary calls use up the streams' tokens", 2, []string{unary, unary, stream}},
		{"streams use up the unary calls' tokens", 2, []string{stream, stream, unary}},
		{"unary then stream, one past with a stream", 2, []string{unary, stream, stream}},
		{"stream then unary, one past with a unary call", 2, []string{stream, unary, unary}},
		{"a burst of three, mixed", 3, []string{unary, stream, unary, stream}},
		{"a burst of one", 1, []string{stream, unary}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A rate so low that no token comes back during the test.
			c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithRateLimit(0.0001, tt.burst))))
			for i, kind := range tt.rpcs {
				var err error
				if kind == unary {
					_, err = c.Describe(context.Background(), &exprdv1.DescribeRequest{})
				} else {
					err = openAndClose(c)
				}
				last := i == len(tt.rpcs)-1
				switch st := status.Convert(err); {
				case !last && err != nil:
					t.Fatalf("rpc %d (%s) within the burst of %d: got %v, want it admitted", i, kind, tt.burst, err)
				case last && (st.Code() != codes.ResourceExhausted || quotaSubject(st) != "rate_limit"):
					t.Fatalf("rpc %d (%s) one past the burst of %d: got %v, want ResourceExhausted with a rate_limit QuotaFailure", i, kind, tt.burst, err)
				}
			}
		})
	}
}

// openAndClose opens a Session, waits for Opened and ends the stream: the
// rate limit's error, if any, comes with the first Recv.
func openAndClose(c exprdv1.ExprToolClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Session(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}}); err != nil {
		// The server may end the stream before it reads Open: its status
		// comes with Recv.
		_, err = s.Recv()
		return err
	}
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
