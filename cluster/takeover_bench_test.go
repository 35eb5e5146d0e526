package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/model/scripted"
	"google.golang.org/protobuf/proto"
)

// takeoverTurns is how many turns run on the replica each round kills,
// their starts spread over a third of the lease (the renewal period), so
// that the kill falls at a different point of each one's renewal.
const takeoverTurns = 20

// takeoverStep is the scripted model's time to answer: the one step of
// each turn, in flight when its replica dies and sent again after.
const takeoverStep = 3 * time.Second

// startNATSReplica starts an exprd keeping its turns in the NATS at
// natsURL with this package's short lease, its models those of
// modelsConfig, and extra flags.
func startNATSReplica(tb testing.TB, name, natsURL, modelsConfig string, extra ...string) *turnReplica {
	tb.Helper()
	log := &exprdproc.LogBuffer{}
	args := append([]string{"--turn-store", "nats", "--nats-url", natsURL, "--turn-lease", lease.String(),
		"--models-config", modelsConfig, "--egress-allow", "loopback",
		"--rate-limit", "100000", "--rate-burst", "100000", "--mcp-listen", "off"}, extra...)
	proc, err := exprdproc.Start(exprdBin, log, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		proc.Stop()
		if tb.Failed() {
			tb.Logf("replica %s's log:\n%s", name, log.String())
		}
	})
	conn, err := grpc.NewClient(proc.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &turnReplica{name: name, proc: proc, log: log, agent: exprdv1.NewAgentLoopClient(conn)}
}

// takeoverSample is one turn's times from its replica's kill: to the
// first new event its client reads after resuming it on a survivor, and
// to its done.
type takeoverSample struct {
	first, done time.Duration
	err         error
}

// BenchmarkTakeover measures how long a turn waits for another replica
// after its own dies. Each iteration starts a cluster of its own (an
// embedded NATS server and three exprd processes, built as make test's),
// starts takeoverTurns detached turns on one of them, V, each waiting on
// a model request of takeoverStep, kills V (SIGKILL) once every request
// is in flight, and resumes every turn on one of the two others as a
// client would, once its stream on V breaks, after the last event it
// read. It reports the 50th and 99th percentiles over all turns of the
// time from the kill to the first new event the client reads (the step
// started again by the replica that took the turn over), absolute and in
// leases (--turn-lease 2s); of the time to the turn's done, also over the
// lease plus the step, the bound the takeover promises; and the NATS
// consumers the round left on the server, per turn.
func BenchmarkTakeover(b *testing.B) {
	if testing.Short() {
		b.Skip("kills replicas and waits out their leases: seconds a round")
	}
	ms, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "done", DelayMS: int(takeoverStep / time.Millisecond)}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ms.Close)
	models := filepath.Join(b.TempDir(), "models.yaml")
	cfg := fmt.Sprintf("default: scripted\nproviders:\n  scripted:\n    base_url: %s\n    model: m\n", ms.BaseURL())
	if err := os.WriteFile(models, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	var samples []takeoverSample
	var consumers []float64
	for round := 0; b.Loop(); round++ {
		b.StopTimer()
		ns := benchNATS(b)
		url := ns.ClientURL()
		replicas := []*turnReplica{startNATSReplica(b, "V", url, models), startNATSReplica(b, "B", url, models), startNATSReplica(b, "C", url, models)}
		before := natsConsumers(b, ns)
		b.StartTimer()
		got, err := takeoverRound(replicas[0], replicas[1:], ms)
		if err != nil {
			// How each replica ended, or that it still ran (then
			// killed): a replica killed by another's hand is told
			// from one that failed.
			for _, r := range replicas {
				b.Logf("replica %s (pid %d): %v", r.name, r.proc.Pid(), r.proc.Wait(100*time.Millisecond))
			}
			b.Fatalf("round %d: %v", round, err)
		}
		b.StopTimer()
		consumers = append(consumers, float64(natsConsumers(b, ns)-before)/takeoverTurns)
		for _, r := range replicas {
			r.proc.Stop()
		}
		ns.Shutdown()
		b.StartTimer()
		samples = append(samples, got...)
	}
	first, done := make([]time.Duration, len(samples)), make([]time.Duration, len(samples))
	for i, s := range samples {
		first[i], done[i] = s.first, s.done
	}
	p50, p99 := percentile(first, 0.5), percentile(first, 0.99)
	b.ReportMetric(float64(len(samples)), "turns")
	b.ReportMetric(ms1(p50), "p50-ms")
	b.ReportMetric(ms1(p99), "p99-ms")
	b.ReportMetric(float64(p50)/float64(lease), "p50-leases")
	b.ReportMetric(float64(p99)/float64(lease), "p99-leases")
	d50, d99 := percentile(done, 0.5), percentile(done, 0.99)
	b.ReportMetric(ms1(d50), "done-p50-ms")
	b.ReportMetric(ms1(d99), "done-p99-ms")
	b.ReportMetric(float64(d99)/float64(lease+takeoverStep), "done-p99/(lease+step)")
	slices.Sort(consumers)
	b.ReportMetric(consumers[len(consumers)/2], "nats-consumers/turn")
}

// natsConsumers is how many JetStream consumers the server has.
func natsConsumers(tb testing.TB, ns *natsserver.Server) int {
	tb.Helper()
	js, err := ns.Jsz(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return js.Consumers
}

// takeoverRound runs one round of BenchmarkTakeover on victim.
func takeoverRound(victim *turnReplica, survivors []*turnReplica, ms *scripted.Server) ([]takeoverSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := len(ms.Requests())
	var killed time.Time
	dead := make(chan struct{})
	out := make(chan takeoverSample, takeoverTurns)
	for i := range takeoverTurns {
		s, err := victim.agent.Run(ctx)
		if err != nil {
			return nil, err
		}
		start := &exprdv1.AgentStart{Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hi"}}}
		if err := s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
			return nil, err
		}
		go func() {
			smp, err := followTakenOver(ctx, s, survivors[i%len(survivors)], dead, &killed)
			smp.err = err
			out <- smp
		}()
		time.Sleep(lease / 3 / takeoverTurns)
	}
	for len(ms.Requests())-before < takeoverTurns {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d model requests sent", len(ms.Requests())-before, takeoverTurns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // every step_started read
	// killed is taken before the signal: a stream it breaks ends after.
	killed = time.Now()
	if err := victim.proc.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	close(dead)
	var got []takeoverSample
	for range takeoverTurns {
		s := <-out
		if s.err != nil {
			return nil, s.err
		}
		got = append(got, s)
	}
	return got, nil
}

// followTakenOver reads a turn's events on its replica's stream until
// the stream breaks after the replica's kill (killed is set before the
// kill and read once dead is closed),
// then resumes it on r after the last event read: the times from the
// kill to the first new event and to done. Every event comes once, in
// order, and the turn ends done.
func followTakenOver(ctx context.Context, s agentStream, r *turnReplica, dead <-chan struct{}, killed *time.Time) (takeoverSample, error) {
	var smp takeoverSample
	var id string
	var last uint64
	var broke error
	for {
		m, err := s.Recv()
		if err != nil {
			broke = err
			break
		}
		if m.GetTurnId() != "" {
			id = m.GetTurnId()
		}
		last = m.GetSeq()
	}
	ended := time.Now()
	select {
	case <-dead:
	case <-ctx.Done():
		return smp, fmt.Errorf("the stream ended and its replica was never killed: %v", broke)
	}
	if ended.Before(*killed) {
		return smp, fmt.Errorf("the stream ended before its replica was killed: %v", broke)
	}
	if id == "" {
		return smp, errors.New("the turn's id was never read")
	}
	rs, err := r.agent.Run(ctx)
	if err != nil {
		return smp, err
	}
	if err := rs.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: int64(last)}}}); err != nil {
		return smp, err
	}
	first, err := rs.Recv()
	if err != nil {
		return smp, fmt.Errorf("turn %s resumed on %s: %w", id, r.name, err)
	}
	smp.first = time.Since(*killed)
	rest, err := recvAll(rs)
	smp.done = time.Since(*killed)
	if err != nil {
		return smp, fmt.Errorf("turn %s resumed on %s: %w", id, r.name, err)
	}
	events := append([]*exprdv1.AgentLoopRunResponse{first}, rest...)
	for i, m := range events {
		if m.GetSeq() != last+uint64(i)+1 {
			return smp, fmt.Errorf("turn %s: event %d after seq %d has seq %d: want every event once, in order", id, i, last, m.GetSeq())
		}
	}
	if d := events[len(events)-1].GetDone(); d == nil || d.GetText() != "done" {
		return smp, fmt.Errorf("turn %s: its last event %v, want done", id, events[len(events)-1])
	}
	return smp, nil
}

// percentile is the p-th of d (sorted in place), nearest rank below.
func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[int(p*float64(len(d)-1))]
}

// ms1 is d in milliseconds.
func ms1(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
