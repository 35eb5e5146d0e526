package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/exprd/exprd/turnstore"
)

// A replica starting looks for running turns that hold no lease (their
// replica stopped while no replica watched the leases) and takes them;
// a turn started less than a lease ago is not one: its replica writes its
// record, then takes its lease, and a replica starting in between took
// it from under it (the client's Run ended UNAVAILABLE in a CI run). Once
// a lease has passed, the same turn is taken.
func TestOrphanScanLeavesANewTurnToItsReplica(t *testing.T) {
	t.Parallel()
	const leaseTTL = 1500 * time.Millisecond
	st, err := turnstore.OpenNATS(context.Background(), turnstore.NATSConfig{URL: startNATS(t), Lease: leaseTTL, Limits: turnstore.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	const id = "0123456789abcdef0123456789abcdef"
	if err := st.Create(context.Background(), id, "alice"); err != nil { // its lease not taken yet
		t.Fatal(err)
	}
	created := time.Now()
	scan := func() <-chan string {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		found := make(chan string, 1)
		if err := st.WatchLapsed(ctx, func(id string) {
			select {
			case found <- id:
			default:
			}
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	select {
	case got := <-scan():
		t.Fatalf("the turn started %v ago, its lease not taken yet, was taken as an orphan (%s)", time.Since(created), got)
	case <-time.After(500 * time.Millisecond):
	}
	time.Sleep(time.Until(created.Add(leaseTTL)))
	select {
	case got := <-scan():
		if got != id {
			t.Fatalf("orphan %q, want %q", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the turn a lease old with no lease was not taken")
	}
}
