package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/mcpeverything"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp/userinput"
)

// The reference server's tool that asks for user input, and what it
// answers.
const (
	elicitTool    = "ev.http.trigger-elicitation-request"
	elicitTimeout = 2 * time.Second // the server's wait for a reply, in these tests
)

// inputConn is exprd with the reference server registered over streamable
// HTTP as "ev", a scripted model, and the input timeout the tests wait out.
func inputConn(t *testing.T, turns []scripted.Turn) (exprdv1.CodeModeClient, exprdv1.AgentLoopClient, exprdv1.ExprToolClient) {
	t.Helper()
	url := mcpeverything.StartHTTP(t)
	models, _ := scriptedModels(t, scripted.Script{Turns: turns})
	conn := mcpConn(t, server.WithModels(models), server.WithInputTimeout(elicitTimeout))
	if _, err := exprdv1.NewToolRegistryClient(conn).RegisterManual(context.Background(), &exprdv1.RegisterManualRequest{Name: "ev",
		Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(mcpeverything.HTTPManual("http", url))}}); err != nil {
		t.Fatal(err)
	}
	return exprdv1.NewCodeModeClient(conn), exprdv1.NewAgentLoopClient(conn), exprdv1.NewExprToolClient(conn)
}

// inputReply is a client's reply to input request id.
func inputReply(id string, action exprdv1.InputReply_Action, content string) *exprdv1.RunRequest {
	return &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_InputReply{InputReply: &exprdv1.InputReply{InputId: id, Action: action, ContentJson: content}}}
}

// A name of n bytes of JSON content: {"name":"xx…"}.
func nameOf(n int) string { return `{"name":"` + strings.Repeat("x", n-len(`{"name":""}`)) + `"}` }

func TestMCPElicitationRelayedToCodeModeRun(t *testing.T) {
	t.Parallel()
	cm, _, _ := inputConn(t, []scripted.Turn{{Text: "unused"}})
	code := `codemode.CallTool("` + elicitTool + `", {})`
	accept, decline := exprdv1.InputReply_ACTION_ACCEPT, exprdv1.InputReply_ACTION_DECLINE
	type rejection struct {
		code    codes.Code
		field   string // a BadRequest's field, or a QuotaFailure's subject
		message string
	}
	cases := []struct {
		name     string
		replies  []func(id string) *exprdv1.RunRequest // sent in turn, once the request comes
		rejected []rejection                           // what the run refuses of them, in order
		want     string                                // in the run's value; else
		wantErr  string                                // in its error
	}{
		{"accepted", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, accept, `{"name": "Ada", "check": true}`) },
		}, nil, "Name: Ada", ""},
		{"declined", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, decline, "") },
		}, nil, "declined", ""},
		{"a reply that does not match the schema, then one that does", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, accept, `{"name": 3}`) },
			func(id string) *exprdv1.RunRequest { return inputReply(id, accept, `{"name": "Bo"}`) },
		}, []rejection{{codes.InvalidArgument, "input_reply.content_json", "does not match the requested schema"}}, "Name: Bo", ""},
		{"no action", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, exprdv1.InputReply_ACTION_UNSPECIFIED, "") },
			func(id string) *exprdv1.RunRequest { return inputReply(id, decline, "") },
		}, []rejection{{codes.InvalidArgument, "input_reply.action", "ACTION_ACCEPT"}}, "declined", ""},
		{"a reply for another id", []func(string) *exprdv1.RunRequest{
			func(string) *exprdv1.RunRequest { return inputReply("77", decline, "") },
			func(id string) *exprdv1.RunRequest { return inputReply(id, decline, "") },
		}, []rejection{{codes.NotFound, "", `"77"`}}, "declined", ""},
		{"content at MaxInputReplyBytes", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, accept, nameOf(userinput.MaxReplyBytes)) },
		}, nil, "Name: xxx", ""},
		{"content one byte past it, then a decline", []func(string) *exprdv1.RunRequest{
			func(id string) *exprdv1.RunRequest { return inputReply(id, accept, nameOf(userinput.MaxReplyBytes+1)) },
			func(id string) *exprdv1.RunRequest { return inputReply(id, decline, "") },
		}, []rejection{{codes.ResourceExhausted, "max_input_reply_bytes", "over the limit of 65536"}}, "declined", ""},
		{"no reply within the input timeout", nil, nil, "", "input-required: the MCP server asked for user input: the user did not answer within 2s"},
	}
	// One at a time: on a session (the reference server's 2025-11-25) a
	// request is relayed only while its call is the one in flight.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := startRun(t, cm, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: code}, Tools: []string{elicitTool}, RelayInputRequests: true})
			var rejected []rejection
			asked := 0
			res, err := drainRun(stream, func(m *exprdv1.RunResponse) {
				if r := m.GetInputRequest(); r != nil {
					asked++
					if r.GetTool() != elicitTool || !strings.Contains(r.GetMessage(), "Please provide inputs") || !strings.Contains(r.GetRequestedSchemaJson(), `"required":["name"]`) {
						t.Errorf("input request: %v", r)
					}
					for _, reply := range tc.replies {
						if err := stream.Send(reply(r.GetInputId())); err != nil {
							t.Errorf("Send: %v", err)
						}
					}
				}
				if r := m.GetRejected(); r != nil {
					st := rejectedStatus(r)
					field := badRequestField(st)
					if field == "" {
						field = quotaSubject(st)
					}
					rejected = append(rejected, rejection{st.Code(), field, st.Message()})
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if asked != 1 {
				t.Errorf("asked %d times, want once", asked)
			}
			if len(rejected) != len(tc.rejected) {
				t.Fatalf("rejected %v, want %v", rejected, tc.rejected)
			}
			for i, r := range rejected {
				w := tc.rejected[i]
				if r.code != w.code || r.field != w.field || !strings.Contains(r.message, w.message) {
					t.Errorf("rejected[%d]: %v, want %v", i, r, w)
				}
			}
			if tc.wantErr != "" {
				if res.GetError().GetReason() != "host-function" || !strings.Contains(res.GetError().GetMessage(), tc.wantErr) {
					t.Fatalf("got %v, want host-function saying %q", res, tc.wantErr)
				}
			} else if res.GetError() != nil || !strings.Contains(res.GetValueJson(), tc.want) {
				t.Fatalf("got %v, want a value with %q", res, tc.want)
			}
			// The session is intact.
			if r := execute(t, cm, `codemode.CallTool("ev.http.echo", {"message": "after"})`, []string{"ev.http.echo"}, 0); r.Error != nil {
				t.Errorf("after: %v", r)
			}
		})
	}
}

// Where nobody can be asked, the server's request fails the call with
// input-required: CodeMode's Execute, a Run that did not opt in, an
// ExprTool host function.
func TestMCPElicitationWithNoUser(t *testing.T) {
	t.Parallel()
	cm, _, et := inputConn(t, []scripted.Turn{{Text: "unused"}})
	code := `codemode.CallTool("` + elicitTool + `", {})`
	const want = "input-required: the MCP server asked for user input (elicitation), and exprd has no user to ask for this call"
	if r := execute(t, cm, code, []string{elicitTool}, 0); !strings.Contains(r.GetError().GetMessage(), want) {
		t.Errorf("Execute: got %v, want %q", r, want)
	}
	stream := startRun(t, cm, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: code}, Tools: []string{elicitTool}})
	res, err := drainRun(stream, func(m *exprdv1.RunResponse) {
		if m.GetInputRequest() != nil {
			t.Errorf("a Run that did not opt in was asked: %v", m)
		}
	})
	if err != nil || !strings.Contains(res.GetError().GetMessage(), want) {
		t.Errorf("Run without relay_input_requests: got %v, %v; want %q", res, err, want)
	}
	resp, err := et.Call(context.Background(), &exprdv1.CallRequest{
		Settings:  &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{{Name: "ask", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: elicitTool}}},
		InputJson: `{"read": "ask({})"}`,
	})
	if err != nil || !strings.Contains(resp.GetAnswerJson(), "input-required") || !strings.Contains(resp.GetAnswerJson(), "host-function") {
		t.Errorf("ExprTool host function: got %v, %v; want a host-function error saying input-required", resp, err)
	}
}

// An AgentLoop turn that opted in: the request names the step and the
// model's call, and the reply reaches the server.
func TestMCPElicitationRelayedToAgentLoop(t *testing.T) {
	t.Parallel()
	_, al, _ := inputConn(t, []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask", Arguments: args(map[string]any{})}}},
		{Text: "Asked."},
	})
	stream := startAgent(t, al, &exprdv1.AgentStart{
		Messages:           []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask me."}},
		Tools:              []*exprdv1.AgentTool{{Name: "ask", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: elicitTool}},
		RelayInputRequests: true,
	})
	var result string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if r := m.GetInputRequest(); r != nil {
			if r.GetCallId() != "c1" || r.GetStep() != 0 || r.GetTool() != elicitTool || r.GetRequestedSchemaJson() == "" {
				t.Errorf("input request: %v", r)
			}
			if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_InputReply{InputReply: &exprdv1.AgentInputReply{
				InputId: r.GetInputId(), Action: exprdv1.AgentInputReply_ACTION_ACCEPT, ContentJson: `{"name": "Cy"}`}}}); err != nil {
				t.Fatal(err)
			}
		}
		if r := m.GetToolResult(); r != nil {
			result = r.GetOutputJson()
		}
		if m.GetDone() != nil {
			break
		}
	}
	if !strings.Contains(result, "Name: Cy") {
		t.Errorf("the tool's result: %s, want the name given", result)
	}
}
