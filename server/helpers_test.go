package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
)

// quietLog keeps the servers of tests from logging.
var quietLog = slog.New(slog.DiscardHandler)

// startServer serves on a loopback port and returns a client of it.
func startServer(t testing.TB, opts ...server.Option) exprdv1.ExprToolClient {
	t.Helper()
	return exprdv1.NewExprToolClient(serve(t, newServer(t, opts...)))
}

// rawSession is a Session stream driven message by message.
type rawSession struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[exprdv1.SessionRequest, exprdv1.SessionResponse]
	opened *exprdv1.Opened
}

func openSession(t testing.TB, c exprdv1.ExprToolClient, open *exprdv1.Open) *rawSession {
	t.Helper()
	return openSessionCtx(t, context.Background(), c, open)
}

// openSessionCtx is openSession with ctx's metadata (a caller's token).
func openSessionCtx(t testing.TB, ctx context.Context, c exprdv1.ExprToolClient, open *exprdv1.Open) *rawSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(cancel)
	stream, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSession{t: t, stream: stream}
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: open}})
	m := s.recv()
	if m.GetOpened() == nil {
		t.Fatalf("got %v, want Opened", m)
	}
	s.opened = m.GetOpened()
	return s
}

func (s *rawSession) send(m *exprdv1.SessionRequest) {
	s.t.Helper()
	if err := s.stream.Send(m); err != nil {
		s.t.Fatalf("Send: %v", err)
	}
}

func (s *rawSession) recv() *exprdv1.SessionResponse {
	s.t.Helper()
	m, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("Recv: %v", err)
	}
	return m
}

func (s *rawSession) state(js string) {
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: js}}})
}

func (s *rawSession) patch(js string) {
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: js}}})
}

func (s *rawSession) call(id, input string) {
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: id, InputJson: input}}})
}

// answer receives until the answer of call id, failing on anything but
// writes of that call.
func (s *rawSession) answer(id string) *exprdv1.Answer {
	s.t.Helper()
	for {
		m := s.recv()
		switch {
		case m.GetAnswer() != nil && m.GetAnswer().GetCallId() == id:
			return m.GetAnswer()
		case m.GetStepWrite() != nil && m.GetStepWrite().GetCallId() == id:
		default:
			s.t.Fatalf("got %v while waiting for the answer of %q", m, id)
		}
	}
}

// read returns the session's state as the read of a call.
func (s *rawSession) read(expr string) string {
	s.t.Helper()
	in, _ := json.Marshal(map[string]any{"read": expr})
	s.call("read", string(in))
	return string(s.answer("read").GetAnswerJson())
}

// rejectedStatus is the status a Rejected carries (OK when r is nil).
func rejectedStatus(r *exprdv1.Rejected) *status.Status { return status.FromProto(r.GetStatus()) }

func protoMarshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

// scriptedModels serves script on a scripted model server and returns a
// model registry whose one provider, "scripted", is an OpenAI-compatible
// client of it; the server records what it was sent.
func scriptedModels(t testing.TB, script scripted.Script) (*model.Registry, *scripted.Server) {
	t.Helper()
	return scriptedModelsWith(t, script, openaicompat.ProviderConfig{})
}

// scriptedModelsWith is scriptedModels with the provider's cfg (its
// BaseURL and Model are the scripted server's).
func scriptedModelsWith(t testing.TB, script scripted.Script, cfg openaicompat.ProviderConfig) (*model.Registry, *scripted.Server) {
	t.Helper()
	srv, err := scripted.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg.BaseURL, cfg.Model = srv.BaseURL(), "m"
	p, err := openaicompat.New("scripted", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		t.Fatal(err)
	}
	return models, srv
}
