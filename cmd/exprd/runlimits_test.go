package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp/utcpall"
)

// Each maximum's flag must be positive, named when it is not.
func TestRunLimitFlagsMustBePositive(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent-max-steps", "0"}, "agent-max-steps: 0, want a positive value"},
		{[]string{"--agent-max-tool-timeout", "0s"}, "agent-max-tool-timeout: 0s, want a positive duration"},
		{[]string{"--agent-max-step-timeout", "-1s"}, "agent-max-step-timeout: -1s, want a positive duration"},
		{[]string{"--agent-max-turn-timeout", "0s"}, "agent-max-turn-timeout: 0s, want a positive duration"},
		{[]string{"--agent-max-calls-per-step", "0"}, "agent-max-calls-per-step: 0, want a positive value"},
		{[]string{"--agent-max-history-bytes", "-1"}, "agent-max-history-bytes: -1, want a positive value"},
		{[]string{"--codemode-max-timeout", "0s"}, "codemode-max-timeout: 0s, want a positive duration"},
	} {
		if _, err := parseConfig(tt.args, io.Discard); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
	args := []string{"--agent-max-steps", "1", "--agent-max-tool-timeout", "1ms", "--agent-max-step-timeout", "1ms", "--agent-max-turn-timeout", "1ms",
		"--agent-max-calls-per-step", "1", "--agent-max-history-bytes", "1", "--codemode-max-timeout", "1ms"}
	if _, err := parseConfig(args, io.Discard); err != nil {
		t.Errorf("the smallest positive values: got %v, want none", err)
	}
}

// The flags reach the server: a request at --agent-max-steps and
// --codemode-max-timeout runs, one past each is INVALID_ARGUMENT naming
// its field.
func TestRunLimitFlagsReachTheServer(t *testing.T) {
	c, err := parseConfig([]string{"--agent-max-steps", "2", "--codemode-max-timeout", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.serverOptions(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "done"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	p, err := openaicompat.New("m", openaicompat.ProviderConfig{BaseURL: ms.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	models := model.NewRegistry()
	if err := models.Register("m", p); err != nil {
		t.Fatal(err)
	}
	reg, err := utcpall.New()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv, err := server.New(append(opts, server.WithModels(models), server.WithRegistry(reg))...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()

	field := func(err error) string {
		for _, d := range status.Convert(err).Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
				return br.GetFieldViolations()[0].GetField()
			}
		}
		return ""
	}
	turn := func(steps uint32) error {
		stream, err := exprdv1.NewAgentLoopClient(conn).Run(ctx)
		if err != nil {
			return err
		}
		start := &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hi"}},
			Stop: &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: steps}}}
		if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if err != nil || m.GetDone() != nil {
				return err
			}
		}
	}
	if err := turn(2); err != nil {
		t.Errorf("max_steps at --agent-max-steps: %v", err)
	}
	if err := turn(3); status.Code(err) != codes.InvalidArgument || field(err) != "start.stop.max_steps" {
		t.Errorf("max_steps one past --agent-max-steps: got %v, want INVALID_ARGUMENT naming start.stop.max_steps", err)
	}
	cm := exprdv1.NewCodeModeClient(conn)
	if _, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: "1", TimeoutMs: 1000}); err != nil {
		t.Errorf("timeout_ms at --codemode-max-timeout: %v", err)
	}
	if _, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: "1", TimeoutMs: 1001}); status.Code(err) != codes.InvalidArgument || field(err) != "timeout_ms" {
		t.Errorf("timeout_ms one past --codemode-max-timeout: got %v, want INVALID_ARGUMENT naming timeout_ms", err)
	}
}
