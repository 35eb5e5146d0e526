package server_test

import (
	"context"
	"testing"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// BenchmarkSessionEcho isolates what exprd's evaluation adds to a Session
// round trip (BenchmarkSessionRoundTrip/exprd): the same call answered by
// an echo served by an exprd server, so through the same interceptors,
// stats handler and transport settings, answering with the two messages
// the call gets (its write, then its answer), each carrying the input.
// SessionRoundTrip/exprd over this is the evaluator's and the Session
// protocol's share; this over SessionRoundTrip/bare_grpc_echo is the
// server's.
func BenchmarkSessionEcho(b *testing.B) {
	b.Run("exprd_server", func(b *testing.B) {
		s := newServer(b)
		s.GRPC().RegisterService(&echo2Desc, struct{}{})
		conn := serve(b, s)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		stream, err := conn.NewStream(ctx, &echo2Desc.Streams[0], "/bench.Echo2/Echo")
		if err != nil {
			b.Fatal(err)
		}
		req := &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "c", InputJson: benchInput}}}
		b.ReportAllocs()
		for b.Loop() {
			if err := stream.SendMsg(req); err != nil {
				b.Fatal(err)
			}
			for range 2 {
				var resp exprdv1.SessionResponse
				if err := stream.RecvMsg(&resp); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// echo2Desc answers each SessionRequest with a StepWrite and an Answer.
var echo2Desc = echoService("bench.Echo2", func(call *exprdv1.Call, send func(*exprdv1.SessionResponse) error) error {
	if err := send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_StepWrite{StepWrite: &exprdv1.StepWrite{
		CallId: call.GetCallId(), Path: "scopes.root.selected", ValueJson: call.GetInputJson(),
	}}}); err != nil {
		return err
	}
	return send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_Answer{Answer: &exprdv1.Answer{
		CallId: call.GetCallId(), AnswerJson: call.GetInputJson(),
	}}})
})
