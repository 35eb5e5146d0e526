package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Case 13: a hostile model. hostileModel is an OpenAI-compatible
// chat-completions server on loopback (plain replies: the providers are
// configured with stream: false) whose every reply is a tool call; exprd
// reaches it through --models-config as two providers:
//
//   - flood: every reply calls a tool that does not exist, floodCalls
//     times;
//   - forever: every reply calls the client-run tool fetch once, and
//     never answers; the harness answers each fetch with foreverBytes.
type hostileModel struct {
	srv      *http.Server
	url      string
	requests atomic.Int64
	maxBody  atomic.Int64
}

const (
	floodCalls   = 600
	foreverBytes = 256 << 10
	fetchTool    = "fetch"
	missingTool  = "no_such_tool"
)

func startHostileModel() (*hostileModel, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &hostileModel{url: "http://" + lis.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /flood/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		m.reply(w, r, missingTool, floodCalls)
	})
	mux.HandleFunc("POST /forever/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		m.reply(w, r, fetchTool, 1)
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = m.srv.Serve(lis) }()
	return m, nil
}

func (m *hostileModel) Close() error { return m.srv.Close() }

// reply reads the request (its size is kept: the history exprd sends) and
// answers calls calls of tool.
func (m *hostileModel) reply(w http.ResponseWriter, r *http.Request, tool string, calls int) {
	n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
	m.requests.Add(1)
	for {
		old := m.maxBody.Load()
		if n <= old || m.maxBody.CompareAndSwap(old, n) {
			break
		}
	}
	seq := m.requests.Load()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	tc := make([]call, calls)
	for i := range tc {
		tc[i] = call{ID: fmt.Sprintf("call_%d_%d", seq, i), Type: "function", Function: fn{Name: tool, Arguments: `{"q":"more"}`}}
	}
	body := map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", seq), "object": "chat.completion", "created": 0, "model": "hostile",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": tc}}},
		"usage": map[string]int{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// writeModelsConfig writes the --models-config naming the two providers.
func writeModelsConfig(dir, url string) (string, error) {
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, name := range []string{"flood", "forever"} {
		fmt.Fprintf(&b, "  %s:\n    base_url: %s/%s/v1\n    model: %s\n    stream: false\n", name, url, name, name)
	}
	path := filepath.Join(dir, "models.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// agentTurns runs n AgentLoop turns at once against provider, in a loop;
// each must end typed: done, or a gRPC status other than UNKNOWN.
func agentTurns(ctx context.Context, e *env, t *tally, provider string, n int) error {
	conns, err := dialPool(e.addr, caseSource(13), 2, withToken(e.tokens.cases[13]))
	if err != nil {
		return err
	}
	defer conns.Close()
	start := &exprdv1.AgentStart{
		Provider: provider,
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Look everything up."}},
		Tools: []*exprdv1.AgentTool{{
			Name: fetchTool, Description: "Fetches more.", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT,
			ParametersJson: `{"type":"object","properties":{"q":{"type":"string"}}}`,
		}},
		Stop: &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: 100}},
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cl := exprdv1.NewAgentLoopClient(conns.get(i))
			for first := true; first || ctx.Err() == nil; first = false {
				agentTurn(e, cl, start, provider, t)
			}
		})
	}
	wg.Wait()
	return nil
}

// agentTurn runs one turn, answering each client-run call with
// foreverBytes of JSON, and tallies how it ended.
func agentTurn(e *env, cl exprdv1.AgentLoopClient, start *exprdv1.AgentStart, provider string, t *tally) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
	defer cancel()
	t0 := time.Now()
	what := provider + " turn"
	stream, err := cl.Run(ctx)
	if err != nil {
		t.rpcError(err, nil, false, time.Since(t0))
		pauseIfRefused(err)
		return
	}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
		recvStatus(stream.Recv, t, what, t0)
		return
	}
	steps := 0
	for {
		m, err := stream.Recv()
		if err != nil {
			code, typed := statusCode(err)
			switch {
			case !typed:
				t.untypedError(err)
			case code == codes.DeadlineExceeded && ctx.Err() != nil && steps == 0:
				t.noAnswer(what + " (no step)")
			case code == codes.DeadlineExceeded && ctx.Err() != nil:
				// The turn was streaming its steps when the client's own
				// deadline ran out: answered, and ended by the deadline.
				t.answer(what+": the client's deadline ran out mid-turn", fmt.Sprintf("%d steps", steps), false, time.Since(t0))
			default:
				// A limit of the turn is a status of its own (RESOURCE_EXHAUSTED
				// for the history, ...); INTERNAL says exprd did not expect it.
				t.rpcError(err, func(c codes.Code) bool { return c != codes.Internal }, false, time.Since(t0))
			}
			return
		}
		switch {
		case m.GetStepStarted() != nil:
			steps++
		case m.GetToolCallRequested().GetRunOnClient():
			out := &exprdv1.ToolOutput{CallId: m.GetToolCallRequested().GetCall().GetId(), OutputJson: e.foreverJSON}
			if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: out}}); err != nil {
				recvStatus(stream.Recv, t, what, t0)
				return
			}
		case m.GetDone() != nil:
			t.answer(fmt.Sprintf("%s: done, %s", what, m.GetDone().GetStopReason()), fmt.Sprintf("%d steps", len(m.GetDone().GetSteps())), true, time.Since(t0))
			return
		}
	}
}

// recvStatus reads to the stream's status after a failed send.
func recvStatus(recv func() (*exprdv1.AgentLoopRunResponse, error), t *tally, what string, t0 time.Time) {
	for {
		if _, err := recv(); err != nil {
			t.rpcError(err, func(codes.Code) bool { return true }, false, time.Since(t0))
			return
		}
	}
}

// modelFlood is 13a: turns whose model calls a missing tool 600 times a
// reply.
func modelFlood(ctx context.Context, e *env, t *tally) (string, error) {
	err := agentTurns(ctx, e, t, "flood", e.cfg.agentTurns)
	return fmt.Sprintf("%d AgentLoop turns at once, in a loop, against a model whose every reply calls the missing tool %s %d times (stop: max_steps 100)",
		e.cfg.agentTurns, missingTool, floodCalls), err
}

// modelForever is 13b: turns whose model calls the client-run fetch at
// every step and never answers; each fetch is answered with 256 KiB.
func modelForever(ctx context.Context, e *env, t *tally) (string, error) {
	err := agentTurns(ctx, e, t, "forever", e.cfg.agentTurns)
	return fmt.Sprintf("%d AgentLoop turns at once, in a loop, against a model that calls the client-run tool %s at every step and never answers, each call answered with %d KiB of JSON (stop: max_steps 100)",
		e.cfg.agentTurns, fetchTool, foreverBytes>>10), err
}
