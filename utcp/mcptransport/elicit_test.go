package mcptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp/mcptransport"
	"github.com/exprd/exprd/utcp/userinput"
)

// askerFunc is a userinput.Asker.
type askerFunc func(context.Context, *userinput.Request) (userinput.Reply, error)

func (f askerFunc) AskInput(ctx context.Context, req *userinput.Request) (userinput.Reply, error) {
	return f(ctx, req)
}

// askSchema is what the test servers' tool asks for.
const askSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// askTool asks for input the SDK's way: an input-required result, which
// a go-sdk server turns into an elicitation/create request of its session
// for a client of a revision before 2026-07-28; then it answers with the
// user's action and content. Its message is the call's "message"
// argument ("who?" when none); "url" asks in URL mode.
func askTool(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok {
				content, _ := json.Marshal(r.Content)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Action + " " + string(content)}}}, nil
			}
			var args struct{ Message, Mode string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if args.Message == "" {
				args.Message = "who?"
			}
			p := &mcp.ElicitParams{Message: args.Message, RequestedSchema: json.RawMessage(askSchema)}
			if args.Mode == "url" {
				p = &mcp.ElicitParams{Mode: "url", Message: args.Message, URL: "https://example.com/login", ElicitationID: "e1"}
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": p}}, nil
		})
}

func TestElicitationRelayed(t *testing.T) {
	t.Parallel()
	// The request's message and schema at userinput.MaxRequestBytes, and one
	// byte past it.
	atLimit := strings.Repeat("x", userinput.MaxRequestBytes-len(compact(askSchema)))
	cases := []struct {
		name    string
		args    map[string]any
		asker   userinput.Asker // nil: the call has no user to ask
		want    string          // the tool's answer
		wantErr string          // else: an input-required error saying this
	}{
		{"accepted", nil, answer(userinput.Reply{Action: userinput.Accept, Content: map[string]any{"name": "Ada"}}), `accept {"name":"Ada"}`, ""},
		{"declined", nil, answer(userinput.Reply{Action: userinput.Decline}), "decline null", ""},
		{"cancelled", nil, answer(userinput.Reply{Action: userinput.Cancel}), "cancel null", ""},
		{"no user to ask", nil, nil, "", "exprd has no user to ask for this call"},
		{"the user does not answer", nil, askerFunc(func(context.Context, *userinput.Request) (userinput.Reply, error) {
			return userinput.Reply{}, errors.New("the user did not answer within 1s")
		}), "", "the user did not answer within 1s"},
		{"a request at MaxInputRequestBytes", map[string]any{"message": atLimit}, answer(userinput.Reply{Action: userinput.Decline}), "decline null", ""},
		{"a request one byte past it", map[string]any{"message": atLimit + "x"}, answer(userinput.Reply{Action: userinput.Decline}), "",
			fmt.Sprintf("over the limit of %d (userinput.MaxRequestBytes)", userinput.MaxRequestBytes)},
		{"URL mode is not relayed", map[string]any{"mode": "url"}, answer(userinput.Reply{Action: userinput.Accept}), "", "the MCP server asked for"},
	}
	for _, stateless := range []bool{true, false} {
		srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
			askTool(s)
			textTool(s, "echo", func(map[string]any) string { return "still here" })
		})
		reg, _ := newRegistry(t)
		register(t, reg, srv.URL)
		for _, tc := range cases {
			t.Run(fmt.Sprintf("stateless=%v/%s", stateless, tc.name), func(t *testing.T) {
				ctx := context.Background()
				var asked *userinput.Request
				if tc.asker != nil {
					ctx = userinput.WithAsker(ctx, askerFunc(func(ctx context.Context, req *userinput.Request) (userinput.Reply, error) {
						asked = req
						return tc.asker.AskInput(ctx, req)
					}))
				}
				v, err := reg.Call(ctx, "m.s.ask", tc.args)
				if tc.wantErr != "" {
					if reason(err) != mcptransport.ReasonInputRequired || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("got %v, %v; want input-required saying %q", v, err, tc.wantErr)
					}
				} else if err != nil || v != tc.want {
					t.Fatalf("got %v, %v; want %q", v, err, tc.want)
				}
				if asked != nil && (asked.Tool != "m.s.ask" || !strings.Contains(string(asked.Schema), `"name"`)) {
					t.Errorf("the asker was asked %+v", asked)
				}
				// The session is intact.
				if v, err := reg.Call(context.Background(), "m.s.echo", nil); err != nil || v != "still here" {
					t.Errorf("after: %v, %v", v, err)
				}
			})
		}
	}
}

// answer is an asker that checks the reply as a stream does, and gives it.
func answer(r userinput.Reply) userinput.Asker {
	return askerFunc(func(_ context.Context, req *userinput.Request) (userinput.Reply, error) {
		content, _ := json.Marshal(r.Content)
		if r.Content == nil {
			content = nil
		}
		return req.CheckReply(r.Action, content)
	})
}

func compact(s string) string {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	b, _ := json.Marshal(v)
	return string(b)
}

// On a session, the SDK does not tie a server's request to the call it was
// sent for: with two calls in flight it is nobody's, and is not relayed to
// either caller's user.
func TestElicitationWithSeveralCallsInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	srv := startGoServer(t, false, nil, func(s *mcp.Server) {
		askTool(s)
		s.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil
			})
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	reg, _ := newRegistry(t)
	register(t, reg, srv.URL)
	asked := 0
	ctx := userinput.WithAsker(context.Background(), askerFunc(func(context.Context, *userinput.Request) (userinput.Reply, error) {
		asked++
		return userinput.Reply{Action: userinput.Decline}, nil
	}))
	waited := make(chan error, 1)
	go func() {
		_, err := reg.Call(ctx, "m.s.wait", nil)
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond) // the wait is in flight
	_, err := reg.Call(ctx, "m.s.ask", nil)
	if reason(err) != mcptransport.ReasonInputRequired || !strings.Contains(err.Error(), "several calls were in flight") {
		t.Errorf("got %v, want input-required: several calls in flight", err)
	}
	once.Do(func() { close(release) })
	if err := <-waited; err != nil {
		t.Errorf("the other call: %v", err)
	}
	if asked != 0 {
		t.Errorf("asked %d times, want 0", asked)
	}
}
