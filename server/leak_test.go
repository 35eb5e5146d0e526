package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// What an upstream's error may carry and must never pass on: an internal
// host, an address and a key.
var upstreamLeaks = []string{"db-7", "internal.corp", "10.1.2.3", "sk-live-XYZ0123456789"}

const leakyText = "database db-7.internal.corp:5432 unreachable from 10.1.2.3 (key sk-live-XYZ0123456789)"

// leakyProvider is a UTCP provider whose one tool, fail, answers 500 with
// leakyText as its JSON error.
func leakyProvider(t *testing.T) string {
	t.Helper()
	return oneToolProvider(t, "fail", "Fails.", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": leakyText})
	})
}

// No text a tool provider or a model server sends reaches a client or a
// model, but what exprd writes: through ExprTool, CodeMode (direct and
// prompt mode, unary and streamed) and AgentLoop, with the provider's own
// messages off (the default) and on (then redacted).
func TestUpstreamTextReachesNoOne(t *testing.T) {
	t.Parallel()
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "upstream says: " + leakyText, "type": "invalid_request_error"}})
	modelError := scripted.Turn{Error: &scripted.ErrorReply{Status: http.StatusBadRequest, Body: body}}
	for _, tc := range []struct {
		name string
		opts []utcp.Option
	}{
		{"provider messages off", nil},
		{"provider messages on", []utcp.Option{utcp.WithProviderMessages()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg, err := utcpall.New(append([]utcp.Option{loopbackEgress}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reg.Close() })
			if _, err := reg.Register(context.Background(), "leaky", utcp.FromURL(leakyProvider(t)+"/utcp")); err != nil {
				t.Fatal(err)
			}
			// The agent's turn: the model calls the failing tool, then its
			// server fails with the leaky text; CodeMode's prompt fails at once.
			models, ms := scriptedModels(t, scripted.Script{Turns: []scripted.Turn{
				{Match: &scripted.Match{LastRole: "user", LastUser: "agent:"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "fail", Arguments: json.RawMessage(`{}`)}}},
				{Match: &scripted.Match{LastRole: "tool"}, Error: modelError.Error},
				modelError,
			}, Loop: true})
			conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithModels(models)))
			ctx := context.Background()
			var seen []string
			keep := func(m proto.Message, err error) {
				if m != nil {
					seen = append(seen, protojson.Format(m))
				}
				if err != nil && !errors.Is(err, io.EOF) {
					seen = append(seen, protojson.Format(status.Convert(err).Proto()))
				}
			}

			et := exprdv1.NewExprToolClient(conn)
			keep(et.Call(ctx, &exprdv1.CallRequest{
				Settings:  &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{utcpFn("fail", "leaky.fail")}},
				InputJson: `{"read": "fail({})"}`,
			}))
			cm := exprdv1.NewCodeModeClient(conn)
			keep(cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("leaky.fail", {})`, Tools: []string{"leaky.fail"}}))
			keep(cm.CallTool(ctx, &exprdv1.CallToolRequest{Prompt: "fail please"}))
			run := openStream(t, cm.Run, &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "fail please"}}}})
			for {
				m, err := run.Recv()
				keep(m, err)
				if err != nil {
					break
				}
			}
			turn := startAgent(t, exprdv1.NewAgentLoopClient(conn), &exprdv1.AgentStart{
				Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "agent: call fail"}},
				Tools:    []*exprdv1.AgentTool{{Name: "fail", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "leaky.fail"}},
			})
			for {
				m, err := turn.Recv()
				keep(m, err)
				if err != nil {
					break
				}
			}
			if len(seen) < 6 {
				t.Fatalf("saw %d answers, want one from each service at least", len(seen))
			}
			// What the model was sent: the tool's failure, as a tool result.
			for _, r := range ms.Requests() {
				seen = append(seen, string(r.Body))
			}
			for _, s := range seen {
				for _, leak := range upstreamLeaks {
					if strings.Contains(s, leak) {
						t.Errorf("%q reached a client or a model: %s", leak, s)
					}
				}
			}
		})
	}
}

// What no client reads, the operator's log has: a failed tool call's and
// a failed model request's upstream text.
func TestUpstreamTextIsLogged(t *testing.T) {
	t.Parallel()
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	reg, err := utcpall.New(loopbackEgress, utcp.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "leaky", utcp.FromURL(leakyProvider(t)+"/utcp")); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "upstream says: model-side-detail"}})
	models, _ := scriptedModels(t, scripted.Script{Turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: http.StatusBadRequest, Body: body}}}, Loop: true})
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithModels(models), server.WithLogger(log)))
	cm := exprdv1.NewCodeModeClient(conn)
	ctx := context.Background()
	if _, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("leaky.fail", {})`, Tools: []string{"leaky.fail"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.CallTool(ctx, &exprdv1.CallToolRequest{Prompt: "fail please"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"db-7.internal.corp", "model-side-detail"} {
		if !strings.Contains(logBuf.String(), want) {
			t.Errorf("the log does not hold %q:\n%s", want, logBuf.String())
		}
	}
}

// syncBuffer is a bytes.Buffer a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
