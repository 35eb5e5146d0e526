package cluster_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/turnstore"
	"google.golang.org/protobuf/proto"
)

// benchNATS runs a NATS server with JetStream on loopback until tb ends
// (or its Shutdown).
func benchNATS(tb testing.TB) *natsserver.Server {
	tb.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	ns.Start()
	tb.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	return ns
}

// benchAgent serves AgentLoop in this process with the model at base and
// its turns in st.
func benchAgent(b *testing.B, base string, st turnstore.Store) exprdv1.AgentLoopClient {
	b.Helper()
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: base, Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.WithModels(models), server.WithTurnStore(st), server.WithRateLimit(1e9, 1e9))
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return exprdv1.NewAgentLoopClient(conn)
}

// oneTurn runs a detached turn of one step to done.
func oneTurn(b *testing.B, c exprdv1.AgentLoopClient) {
	s, err := c.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	start := &exprdv1.AgentStart{Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hi"}}}
	if err := s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
		b.Fatal(err)
	}
	events, err := recvAll(s)
	if err != nil || len(events) == 0 || events[len(events)-1].GetDone() == nil {
		b.Fatalf("%v %v", err, events)
	}
}

// BenchmarkTurnStore runs a turn with a 50 ms model (ten deltas) on a
// replica keeping its turns in JetStream (lease, journal, events) and on
// one keeping them in memory, one of each an iteration, and reports the
// wall time's ratio (goal ≤ 1.05×), then how many events a second one
// replica records in JetStream.
func BenchmarkTurnStore(b *testing.B) {
	url := benchNATS(b).ClientURL()
	ms, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "one two three four five six seven eight nine ten", DelayMS: 50}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ms.Close)
	nats, err := turnstore.OpenNATS(context.Background(), turnstore.NATSConfig{URL: url, Limits: turnstore.DefaultLimits()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = nats.Close() })
	mem, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.DefaultLimits(), MaxTotalBytes: turnstore.DefaultMemoryBytes})
	if err != nil {
		b.Fatal(err)
	}
	durable, local := benchAgent(b, ms.BaseURL(), nats), benchAgent(b, ms.BaseURL(), mem)
	b.Run("interleaved", func(b *testing.B) {
		benchpair.Interleave(b, func(b *testing.B) { oneTurn(b, durable) }, func(b *testing.B) { oneTurn(b, local) })
	})
	turns := 0 // the append's turns, on over its runs (-count): each a new one
	b.Run("append", func(b *testing.B) {
		ctx := context.Background()
		data := make([]byte, 200) // a text delta's size, about
		var lat []time.Duration
		for b.Loop() {
			id := newBenchID(turns)
			turns++
			if err := nats.Create(ctx, id, "bench"); err != nil {
				b.Fatal(err)
			}
			for seq := uint64(1); seq <= 100; seq++ {
				t0 := time.Now()
				if err := nats.Append(ctx, id, turnstore.Event{Seq: seq, Data: data}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}

func newBenchID(i int) string {
	const hex = "0123456789abcdef"
	id := []byte("b0000000000000000000000000000000")
	for k := 31; i > 0 && k > 0; k-- {
		id[k] = hex[i%16]
		i /= 16
	}
	return string(id)
}
