package cluster_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/turnstore"
)

// startNATS runs a NATS server with JetStream on loopback for the test.
func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return ns.ClientURL()
}

// agentReplica serves AgentLoop in this process, with the scripted model
// and its turns kept in NATS at url.
func agentReplica(t *testing.T, url string, script scripted.Script) exprdv1.AgentLoopClient {
	t.Helper()
	ms, err := scripted.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: ms.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		t.Fatal(err)
	}
	st, err := turnstore.OpenNATS(context.Background(), turnstore.NATSConfig{URL: url, Limits: turnstore.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv, err := server.New(server.WithModels(models), server.WithTurnStore(st))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return exprdv1.NewAgentLoopClient(conn)
}

type agentStream = grpc.BidiStreamingClient[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// recvAll receives to the stream's end: the events, and the end (nil
// after done).
func recvAll(s agentStream) ([]*exprdv1.AgentLoopRunResponse, error) {
	var out []*exprdv1.AgentLoopRunResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// A turn started on replica A, its client gone after some events, is
// resumed on replica B sharing the NATS turn store: every event once, in
// order, to done; and an ended turn replays on B from any seq.
func TestTurnResumedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "one two three four five six seven eight", ChunkDelayMS: 30}}}
	a, b := agentReplica(t, url, script), agentReplica(t, url, script)
	for _, tc := range []struct {
		name  string
		after func(last uint64) int64 // the after_seq, of the last seq A sent
	}{
		{"after the last seen", func(last uint64) int64 { return int64(last) }},
		{"from the start", func(uint64) int64 { return 0 }},
		{"two back from the latest", func(uint64) int64 { return -2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, drop := context.WithCancel(context.Background())
			sa, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
				Detach: true, Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Count."}}}}})
			var seen []*exprdv1.AgentLoopRunResponse
			for len(seen) < 3 {
				m, err := sa.Recv()
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, m)
			}
			drop()
			id, last := seen[0].GetTurnId(), seen[len(seen)-1].GetSeq()
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sb, err := b.Run(rctx)
			if err != nil {
				t.Fatal(err)
			}
			after := tc.after(last)
			_ = sb.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: after}}})
			got, err := recvAll(sb)
			if err != nil {
				t.Fatalf("on B: %v", err)
			}
			if len(got) == 0 || got[len(got)-1].GetDone() == nil {
				t.Fatalf("B sent %d events, the last %v; want them to done", len(got), got)
			}
			if got[0].GetTurnId() != id {
				t.Errorf("B's first event names %q, want %q", got[0].GetTurnId(), id)
			}
			first := got[0].GetSeq()
			if after >= 0 && first != uint64(after)+1 {
				t.Errorf("B started at seq %d, want %d", first, after+1)
			}
			for i, m := range got {
				if m.GetSeq() != first+uint64(i) {
					t.Fatalf("B's event %d has seq %d, want %d", i, m.GetSeq(), first+uint64(i))
				}
			}
			// The ended turn replays on B to done, from the start.
			sr, _ := b.Run(rctx)
			_ = sr.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id}}})
			all, err := recvAll(sr)
			if err != nil || len(all) == 0 || uint64(len(all)) != all[len(all)-1].GetSeq() || all[len(all)-1].GetDone() == nil {
				t.Fatalf("replay: %d events, %v; want seq 1 to done", len(all), err)
			}
		})
	}
}

// A turn running on replica A is stopped by AgentLoop.Cancel on replica
// B, which shares the NATS turn store: the stop is recorded, A's watch
// sees it, and A's stream ends CANCELLED; a second Cancel on B finds the
// turn ended.
func TestTurnCancelledFromAnotherReplica(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	// A slow reply: the turn still runs when B cancels it.
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: strings.Repeat("word ", 200), ChunkDelayMS: 50}}}
	a, b := agentReplica(t, url, script), agentReplica(t, url, script)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Talk."}}}}})
	first, err := sa.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetTurnId()
	resp, err := b.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: id})
	if err != nil || resp.GetEnded() {
		t.Fatalf("Cancel on B: %v, %v; want the running turn stopped", resp, err)
	}
	events, err := recvAll(sa)
	if status.Code(err) != codes.Canceled {
		t.Fatalf("A's stream ended %v after %d more events, want CANCELLED", err, len(events))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err = b.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: id})
		if err != nil || resp.GetEnded() || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !resp.GetEnded() {
		t.Errorf("a second Cancel on B: %v, %v; want the turn ended", resp, err)
	}
}
