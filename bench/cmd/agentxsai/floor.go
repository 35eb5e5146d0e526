package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"

	"google.golang.org/grpc"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// floorServer is the gRPC floor of a node-client workload: an AgentLoop
// server that does none of the turn's work (no model, no checks, no
// budgets) and answers each Start at once with the messages exprd sends
// for the workload's turn, the tool's request waiting for its output. What
// the node client takes against it is what the protocol alone costs that
// client: grpc-js opening a stream, encoding and decoding the messages.
// The harness checks that its turns carry the same events, in the same
// order, as exprd's. It runs in a process of its own, as exprd does
// (floorEnv), not in the harness's beside the scripted server.
type floorServer struct {
	exprdv1.UnimplementedAgentLoopServer
	call *exprdv1.AgentToolCall
	text string
}

// floorEnv, set to a workload's name, makes this program (or its test
// binary) serve that workload's floor: it prints the address on stdout
// and serves until its stdin closes.
const floorEnv = "EXPRD_AGENTXSAI_FLOOR"

// floorMain is the floor's process.
func floorMain(name string) error {
	w, err := findWorkload(name)
	if err != nil {
		return err
	}
	addr, stop, err := newFloorServer(w).serve()
	if err != nil {
		return err
	}
	defer stop()
	if _, err := fmt.Println(addr); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, os.Stdin) // until the harness goes
	return err
}

// startFloor starts w's floor in a process of its own (self run again);
// stop ends it.
func startFloor(self string, w workload) (addr string, stop func(), err error) {
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorEnv+"="+w.name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("the floor's process: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

func newFloorServer(w workload) *floorServer {
	return &floorServer{call: &exprdv1.AgentToolCall{Id: "call_floor", Name: w.call.Name, ArgumentsJson: string(w.call.Arguments)}, text: w.wantText}
}

// serve serves f on a loopback port; stop ends it.
func (f *floorServer) serve() (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer()
	exprdv1.RegisterAgentLoopServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), srv.Stop, nil
}

// Run plays the turn: step 0 calls the tool on the client, step 1
// answers; the events Start omits are left out, as exprd does.
func (f *floorServer) Run(s grpc.BidiStreamingServer[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errors.New("the first message is not start")
	}
	var sendErr error
	send := func(kind exprdv1.AgentEvent, ev *exprdv1.AgentLoopRunResponse) {
		if sendErr == nil && !slices.Contains(start.GetOmitEvents(), kind) {
			sendErr = s.Send(ev)
		}
	}
	always := exprdv1.AgentEvent_AGENT_EVENT_UNSPECIFIED
	u0 := &exprdv1.Usage{PromptTokens: 40, CompletionTokens: 12, TotalTokens: 52}
	u1 := &exprdv1.Usage{PromptTokens: 60, CompletionTokens: 8, TotalTokens: 68}
	steps := []*exprdv1.StepFinished{
		{Step: 0, FinishReason: "tool-calls", Usage: u0},
		{Step: 1, FinishReason: "stop", Usage: u1, Text: f.text},
	}

	send(exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepStarted{StepStarted: &exprdv1.StepStarted{Step: 0}}})
	send(exprdv1.AgentEvent_AGENT_EVENT_TOOL_CALL_ANNOUNCED, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{ToolCallRequested: &exprdv1.ToolCallRequested{Step: 0, Call: f.call}}})
	send(always, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{ToolCallRequested: &exprdv1.ToolCallRequested{Step: 0, Call: f.call, RunOnClient: true}}})
	if sendErr != nil {
		return sendErr
	}
	out, err := s.Recv()
	if err != nil {
		return err
	}
	send(exprdv1.AgentEvent_AGENT_EVENT_TOOL_RESULT, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolResult{ToolResult: &exprdv1.ToolResult{
		Step: 0, CallId: f.call.GetId(), Name: f.call.GetName(), OutputJson: out.GetToolOutput().GetOutputJson()}}})
	send(exprdv1.AgentEvent_AGENT_EVENT_STEP_FINISHED, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepFinished{StepFinished: steps[0]}})
	send(exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepStarted{StepStarted: &exprdv1.StepStarted{Step: 1}}})
	send(exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_TextDelta{TextDelta: &exprdv1.TextDelta{Step: 1, Text: f.text}}})
	send(exprdv1.AgentEvent_AGENT_EVENT_STEP_FINISHED, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepFinished{StepFinished: steps[1]}})
	send(always, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Done{Done: &exprdv1.AgentDone{
		Text: f.text, Steps: steps, Usage: &exprdv1.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120},
		StopReason: exprdv1.AgentDone_STOP_REASON_COMPLETED}}})
	return sendErr
}
