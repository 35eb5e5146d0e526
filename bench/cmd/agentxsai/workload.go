package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exprd/exprd/model/scripted"
)

// A workload is one kind of two-step turn the harness measures: the tool
// the scripted model calls, what the tool answers, the final text, and
// each side's client process. Everything else (exprd, the scripted
// server, the rounds, the checks, the report) is the harness's.
type workload struct {
	name string
	// turn and fairness describe the workload in the report.
	turn, fairness string
	// call is the model's call in the first step; result is the tool's
	// answer, as the model must get it in the second request.
	call   scripted.ToolCall
	result string
	// wantText is the model's answer in the second step.
	wantText string
	// exprdClient says what drives exprd's turns, for the report.
	exprdClient string
	// cpuGoalNS is the exprd CPU per turn to stay under (0: none).
	cpuGoalNS int64
	// floor: the exprd side's client also runs against the gRPC floor
	// (floor.go), each round.
	floor bool
	// exprdCmd and xsaiCmd make a round's client process of each side.
	// The exprd side's takes --sync (see sync in bench/xsai/side.mjs).
	exprdCmd, xsaiCmd func(ctx context.Context, e *env) *exec.Cmd
}

// env is where a round's client processes find the servers and programs.
type env struct {
	node, self        string // the node binary and this program
	moduleDir         string
	xsaiDir           string
	exprdAddr         string // exprd's gRPC address
	modelURL, mathURL string // the scripted server's base URL, the math provider's
	// counts are the --warmup and --turns arguments of every side.
	counts []string
}

// workloads are the ones --workload names; the first is the default.
var workloads = []workload{httpTool(), clientTool(false), clientTool(true)}

func findWorkload(name string) (workload, error) {
	i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
	if i < 0 {
		names := make([]string, len(workloads))
		for j, w := range workloads {
			names[j] = w.name
		}
		return workload{}, fmt.Errorf("unknown workload %q: want one of %s", name, strings.Join(names, ", "))
	}
	return workloads[i], nil
}

// httpTool is the first workload: the math provider's add over HTTP, run
// by exprd's UTCP executor on one side and by the tool's fetch in node on
// the other; exprd is driven by the Go client (worker.go).
func httpTool() workload {
	sc := scenario{Prompt: "What is 2 + 3?", A: 2, B: 3, WantText: "2 + 3 = 5."}
	args, _ := json.Marshal(map[string]float64{"a": sc.A, "b": sc.B})
	return workload{
		name:        "http-tool",
		turn:        "two steps: the model calls add(2, 3) on the math HTTP provider, then answers",
		fairness:    fairnessHTTPTool,
		call:        scripted.ToolCall{Name: "add", Arguments: args},
		result:      sc.wantResult(),
		wantText:    sc.WantText,
		exprdClient: "Go client",
		exprdCmd: func(ctx context.Context, e *env) *exec.Cmd {
			cmd := exec.CommandContext(ctx, e.self, slices.Concat([]string{"-addr", e.exprdAddr, "-sync"}, e.counts, sc.args())...)
			cmd.Env = append(os.Environ(), workerEnv+"=1")
			return cmd
		},
		xsaiCmd: func(ctx context.Context, e *env) *exec.Cmd {
			cmd := exec.CommandContext(ctx, e.node, slices.Concat([]string{"turn.mjs", "--tool", "add",
				"--base-url", e.modelURL, "--math-url", e.mathURL, "--model", "scripted-model", "--max-steps", "10"}, e.counts, sc.args())...)
			cmd.Dir = e.xsaiDir
			return cmd
		},
	}
}

// clientTool is the second workload: get_weather runs in the calling node
// process on both sides. exprd's side is bench/xsai/agentloop.mjs over
// @grpc/grpc-js, the tool declared client-run and answered on the
// AgentLoop stream; xsai's runs it in generateText's loop. answerOnly is
// the third: the same turn, exprd's Start omitting every informational
// event (omit_events), so that exprd sends the tool request and done.
func clientTool(answerOnly bool) workload {
	const (
		city     = "Paris"
		prompt   = "What is the weather in Paris?"
		wantText = "It is 18 °C and clear in Paris."
	)
	args := []string{"--city", city, "--prompt", prompt, "--want-text", wantText}
	w := workload{
		name:        "client-tool",
		turn:        "two steps: the model calls get_weather(Paris), which runs in the calling node process, then answers",
		fairness:    fairnessClientTool,
		call:        scripted.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"` + city + `"}`)},
		result:      `{"city":"` + city + `","temp_c":18,"sky":"clear"}`,
		wantText:    wantText,
		exprdClient: "node client",
		cpuGoalNS:   500_000,
		floor:       true,
		xsaiCmd: func(ctx context.Context, e *env) *exec.Cmd {
			cmd := exec.CommandContext(ctx, e.node, slices.Concat([]string{"turn.mjs", "--tool", "get_weather",
				"--base-url", e.modelURL, "--model", "scripted-model", "--max-steps", "10"}, e.counts, args)...)
			cmd.Dir = e.xsaiDir
			return cmd
		},
	}
	exprdArgs := []string{"agentloop.mjs"}
	if answerOnly {
		w.name += "-answer"
		w.turn += "; exprd's Start omits every informational event, so it sends the tool request and done"
		exprdArgs = append(exprdArgs, "--answer-only")
	}
	w.exprdCmd = func(ctx context.Context, e *env) *exec.Cmd {
		cmd := exec.CommandContext(ctx, e.node, slices.Concat(exprdArgs, []string{"--addr", e.exprdAddr,
			"--proto-dir", filepath.Join(e.moduleDir, "proto"), "--max-steps", "10", "--sync"}, e.counts, args)...)
		cmd.Dir = e.xsaiDir
		return cmd
	}
	return w
}

// shareGoal bounds exprd's share of a node-client turn: its time over
// the gRPC floor's (what grpc-js alone costs the node backend, which no
// gRPC service can go under), as a part of xsai's whole turn.
const shareGoal = 0.4

const (
	fairnessHTTPTool = "exprd's turn crosses gRPC to a separate exprd process (Go client -> exprd -> model and tool, events streamed back); " +
		"xsai runs the loop in the calling node process. Both hit the same scripted OpenAI-compatible server (no delays) and the same HTTP math tool; " +
		"rounds alternate the sides."
	fairnessClientTool = "Both sides' turns start in a node process and the tool runs there: exprd's over one @grpc/grpc-js channel to a separate exprd process " +
		"(node -> exprd -> model, the tool request streamed back to node and its output sent up, events streamed back), xsai's in generateText's loop. " +
		"Both hit the same scripted OpenAI-compatible server (no delays); rounds alternate the sides."
)

// script is the loop both sides replay: a user message gets the
// workload's tool call, the tool's result the final text. No delays.
func script(w workload) scripted.Script {
	return scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"},
			ToolCalls: []scripted.ToolCall{w.call},
			Usage:     &scripted.Usage{PromptTokens: 40, CompletionTokens: 12, TotalTokens: 52}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: w.wantText,
			Usage: &scripted.Usage{PromptTokens: 60, CompletionTokens: 8, TotalTokens: 68}},
	}}
}
