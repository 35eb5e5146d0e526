package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/exprd/exprd/cluster/etcdtest"
	"github.com/exprd/exprd/demo/providers"
)

// BenchmarkToolCall calls one HTTP tool through CodeMode on a replica
// whose registry is shared in etcd and on one whose registry is in
// memory, alternating call by call, and reports their ratio: a call reads
// only the replica's own registry, so the goal is ≤ 1.02×.
func BenchmarkToolCall(b *testing.B) {
	etcd := etcdtest.Start(b)
	math, err := providers.StartMath()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = math.Close() })
	shared := startReplica(b, "etcd", etcd.Endpoint())
	local := startReplica(b, "memory", etcd.Endpoint(), "--registry-store", "memory")
	ctx := context.Background()
	manual := mathManual(b, math, map[string]string{"add": "add"})
	for _, r := range []*replica{shared, local} {
		if _, err := register(ctx, r, "calc", manual, false); err != nil {
			b.Fatal(err)
		}
		if _, err := r.add(ctx, "calc.add", 1, 2); err != nil { // warm the connections
			b.Fatal(err)
		}
	}
	var took [2]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			j := (i + k) % 2 // alternate which goes first
			r := []*replica{local, shared}[j]
			start := time.Now()
			if _, err := r.add(ctx, "calc.add", i, 1); err != nil {
				b.Fatal(err)
			}
			took[j] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Nanoseconds())/n, "ns/call-memory")
	b.ReportMetric(float64(took[1].Nanoseconds())/n, "ns/call-etcd")
	b.ReportMetric(float64(took[1])/float64(took[0]), "etcd/memory")
}

// BenchmarkPropagation replaces a manual on one replica and waits until
// another lists the new tools (polled over its gRPC API), reporting the
// 50th and 99th percentiles of the time from the write's start, and of
// the write itself (committed in etcd and applied on the writer).
func BenchmarkPropagation(b *testing.B) {
	etcd := etcdtest.Start(b)
	math, err := providers.StartMath()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = math.Close() })
	writer := startReplica(b, "writer", etcd.Endpoint())
	reader := startReplica(b, "reader", etcd.Endpoint())
	ctx := context.Background()
	var seen, wrote []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tool := fmt.Sprintf("v%d", i)
		manual := mathManual(b, math, map[string]string{"add": tool})
		start := time.Now()
		if _, err := register(ctx, writer, "prop", manual, true); err != nil {
			b.Fatal(err)
		}
		wrote = append(wrote, time.Since(start))
		want := []string{"prop." + tool}
		for {
			got, err := reader.tools(ctx, "prop")
			if err != nil {
				b.Fatal(err)
			}
			if slices.Equal(got, want) {
				break
			}
		}
		seen = append(seen, time.Since(start))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(seen, 0.5), "p50-ms-other-replica")
	b.ReportMetric(pct(seen, 0.99), "p99-ms-other-replica")
	b.ReportMetric(pct(wrote, 0.5), "p50-ms-write")
	b.ReportMetric(pct(wrote, 0.99), "p99-ms-write")
}
