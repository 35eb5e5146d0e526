package server

import (
	"context"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// What a running turn answers on the relay, as a hostile peer on it would
// try it: only the identity that started the turn is answered (anyone
// else is NOT_FOUND, never sees a pending request nor answers one); only
// replies are carried; a malformed message is refused; the first reply
// to a request wins, a second is NOT_FOUND.
func TestServeRelayAnswersOnlyTheOwner(t *testing.T) {
	tr := newTurn(context.Background(), nil)
	tr.owner = "token:alice"
	request := &exprdv1.AgentLoopRunResponse{Seq: 4, Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{ToolCallRequested: &exprdv1.ToolCallRequested{
		Call: &exprdv1.AgentToolCall{Id: "c1", Name: "ask_user"}, RunOnClient: true}}}
	tr.pending = map[uint64]*exprdv1.AgentLoopRunResponse{4: request}
	got := make(chan *exprdv1.ToolOutput, 1)
	waiting := make(chan struct{})
	go func() {
		out, err := tr.outputs.Ask(context.Background(), "c1", nil, func() error { close(waiting); return nil })
		if err == nil {
			got <- out
		}
	}()
	<-waiting
	serve := tr.serveRelay(1 << 20)
	reply := func(id, out string) []byte {
		b, _ := proto.Marshal(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: id, OutputJson: out}}})
		return append([]byte{relayReply}, b...)
	}
	state, _ := proto.Marshal(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_State{State: &exprdv1.State{StateJson: "{}"}}})
	question := []byte{relayPending, 0, 10}
	for _, tc := range []struct {
		name  string
		owner string
		data  []byte
		want  codes.Code
	}{
		{"another's question", "token:bob", question, codes.NotFound},
		{"another's reply", "token:bob", reply("c1", `"bob"`), codes.NotFound},
		{"another's hold", "peer:127.0.0.1", []byte{relayHold}, codes.NotFound},
		{"nothing", "token:alice", nil, codes.NotFound},
		{"a malformed question", "token:alice", []byte{relayPending, 0x80}, codes.InvalidArgument},
		{"a malformed reply", "token:alice", []byte{relayReply, 0xff}, codes.InvalidArgument},
		{"not a reply", "token:alice", append([]byte{relayReply}, state...), codes.InvalidArgument},
		{"an unknown kind", "token:alice", []byte{'x'}, codes.InvalidArgument},
		{"a reply to no request", "token:alice", reply("c9", `"alice"`), codes.NotFound},
		{"the owner's question", "token:alice", question, codes.OK},
		{"the owner's reply", "token:alice", reply("c1", `"alice"`), codes.OK},
		{"the owner's reply again", "token:alice", reply("c1", `"again"`), codes.NotFound},
	} {
		ans := serve(tc.owner, tc.data)
		if len(ans) == 0 {
			t.Fatalf("%s: no answer", tc.name)
		}
		code := codes.OK
		if ans[0] == relayRefused {
			var sp spb.Status
			if err := proto.Unmarshal(ans[1:], &sp); err != nil {
				t.Fatal(err)
			}
			code = status.FromProto(&sp).Code()
		}
		if code != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, code, tc.want)
		}
		if tc.data != nil && tc.data[0] == relayPending && code == codes.OK {
			var m exprdv1.AgentLoopRunResponse
			if err := proto.Unmarshal(ans[1:], &m); err != nil || m.GetSeq() != 4 || m.GetToolCallRequested().GetCall().GetId() != "c1" {
				t.Errorf("%s: %v, %v; want the request of seq 4", tc.name, &m, err)
			}
		}
	}
	select {
	case out := <-got:
		if out.GetOutputJson() != `"alice"` {
			t.Errorf("the call got %v, want alice's reply", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the owner's reply did not reach the call")
	}
}
