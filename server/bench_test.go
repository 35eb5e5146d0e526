package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
)

const benchInput = `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}`

// BenchmarkSessionRoundTrip: one one-step call on an open Session (Call
// out, the write and the Answer back) vs a bare grpc-go bidi echo of the
// same payload over the same kind of connection. Goal: ≤ 2×.
func BenchmarkSessionRoundTrip(b *testing.B) {
	products, err := os.ReadFile("../demo/products.json")
	if err != nil {
		b.Fatal(err)
	}
	// exprd as cmd/exprd runs it, with a memory budget (and so the gate
	// of received messages); without one, for what the budget costs.
	for _, name := range []string{"exprd", "exprd_without_memory_budget"} {
		b.Run(name, func(b *testing.B) {
			budgets := evaluator.DefaultBudgets()
			budgets.Timeout = 60_000_000_000 // a loaded machine must not fail the benchmark
			opts := []server.Option{server.WithBudgets(budgets)}
			if name == "exprd" {
				opts = append(opts, server.WithMemoryBudget(membudget.New(1<<30, 250*time.Millisecond)))
			}
			c := startServer(b, opts...)
			s := openSession(b, c, &exprdv1.Open{})
			s.state(string(products))
			b.ReportAllocs()
			for b.Loop() {
				s.call("c", benchInput)
				if a := s.answer("c"); a.GetReason() != "" {
					b.Fatal(a.GetAnswerJson())
				}
			}
		})
	}
	b.Run("bare_grpc_echo", func(b *testing.B) {
		stream := startEcho(b)
		req := &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "c", InputJson: benchInput}}}
		b.ReportAllocs()
		for b.Loop() {
			if err := stream.SendMsg(req); err != nil {
				b.Fatal(err)
			}
			var resp exprdv1.SessionResponse
			if err := stream.RecvMsg(&resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSessionThroughput: calls per second through one server with 1,
// 8 and 64 Session streams on one connection, each making the benchmark's
// one-step call back to back. ns/op is the wall time per call across all
// streams, so calls/s is its inverse.
func BenchmarkSessionThroughput(b *testing.B) {
	products, err := os.ReadFile("../demo/products.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 8, 64} {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) {
			budgets := evaluator.DefaultBudgets()
			budgets.Timeout = 60_000_000_000
			c := startServer(b, server.WithBudgets(budgets))
			sessions := make([]*rawSession, n)
			for i := range sessions {
				sessions[i] = openSession(b, c, &exprdv1.Open{})
				sessions[i].state(string(products))
			}
			call := &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "c", InputJson: benchInput}}}
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, s := range sessions {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := callOnce(s.stream, call); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// callOnce sends a call and reads until its answer, which must be clean.
func callOnce(stream exprdv1.ExprTool_SessionClient, call *exprdv1.SessionRequest) error {
	if err := stream.Send(call); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if a := m.GetAnswer(); a != nil {
			if a.GetReason() != "" {
				return fmt.Errorf("answer %s", a.GetAnswerJson())
			}
			return nil
		}
	}
}

// echoDesc answers each SessionRequest with its input as the Answer.
var echoDesc = echoService("bench.Echo", func(call *exprdv1.Call, send func(*exprdv1.SessionResponse) error) error {
	return send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_Answer{Answer: &exprdv1.Answer{
		CallId: call.GetCallId(), AnswerJson: call.GetInputJson(),
	}}})
})

// echoService is a bidi service name/Echo answering each SessionRequest's
// call by reply, which sends what it answers.
func echoService(name string, reply func(*exprdv1.Call, func(*exprdv1.SessionResponse) error) error) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName: "Echo", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, stream grpc.ServerStream) error {
				send := func(m *exprdv1.SessionResponse) error { return stream.SendMsg(m) }
				for {
					var req exprdv1.SessionRequest
					if err := stream.RecvMsg(&req); err != nil {
						return nil
					}
					if err := reply(req.GetCall(), send); err != nil {
						return err
					}
				}
			},
		}},
	}
}

// startEcho serves the echo on loopback TCP, as startServer does exprd.
func startEcho(b *testing.B) grpc.ClientStream {
	srv := grpc.NewServer()
	srv.RegisterService(&echoDesc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := conn.NewStream(ctx, &echoDesc.Streams[0], "/bench.Echo/Echo")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); conn.Close(); srv.Stop() })
	return stream
}

// BenchmarkAgentLoopClientToolTurn: the client-run tool turn that
// bench/cmd/agentxsai --workload client-tool measures against xsai, in one
// process, for profiling exprd's share: the model calls get_weather, the
// client answers it over the stream, the model answers; the scripted model on
// loopback, not streamed, as the harness configures it; with every event, and
// with the answer only (omit_events).
func BenchmarkAgentLoopClientToolTurn(b *testing.B) {
	ms, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "It is 18 °C and clear in Paris."},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ms.Close)
	stream := false
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: ms.BaseURL(), Model: "m", Stream: &stream})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		b.Fatal(err)
	}
	// One caller runs turns back to back, faster than the default rate
	// limit admits once its burst is spent.
	c := exprdv1.NewAgentLoopClient(serve(b, newServer(b, server.WithModels(models), server.WithRateLimit(1e6, 1e6))))
	turn := func(b *testing.B, omit []exprdv1.AgentEvent) {
		start := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
			Messages: userMsg("Weather in Paris?"),
			Tools: []*exprdv1.AgentTool{{Name: "get_weather", Description: "The weather in a city.", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT,
				ParametersJson: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`}},
			OmitEvents: omit,
		}}}
		b.ReportAllocs()
		cpu := processCPU()
		defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
		for b.Loop() {
			stream, err := c.Run(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if err := stream.Send(start); err != nil {
				b.Fatal(err)
			}
			done := false
			var end error
			for end == nil {
				var m *exprdv1.AgentLoopRunResponse
				if m, end = stream.Recv(); end != nil {
					break
				}
				if r := m.GetToolCallRequested(); r.GetRunOnClient() {
					out := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: r.GetCall().GetId(), OutputJson: `{"city":"Paris","temp_c":18,"sky":"clear"}`}}}
					if err := stream.Send(out); err != nil {
						b.Fatal(err)
					}
				}
				done = done || m.GetDone() != nil
			}
			if !done || !errors.Is(end, io.EOF) {
				b.Fatalf("the turn ended with %v, done %v", end, done)
			}
		}
	}
	b.Run("all_events", func(b *testing.B) { turn(b, nil) })
	b.Run("answer_only", func(b *testing.B) { turn(b, omittable()) })
}

// processCPU is the CPU time the process has used, user and system, in
// nanoseconds: a benchmark's CPU per operation is less at the mercy of
// what else the machine runs than its wall time.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
