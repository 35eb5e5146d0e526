package turns

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Compute takes a turn of the Turns in its context for the work it runs,
// and gives it back when the work ends, however it ends; without Turns,
// or inside another Compute, the work runs at once and takes none.
func TestCompute(t *testing.T) {
	tr := NewTurns(1)
	ctx := With(context.Background(), tr)
	boom := errors.New("boom")
	cases := []struct {
		name string
		ctx  context.Context
		work func(context.Context) error
		want error
		held int // turns running during the work
	}{
		{"on a turn", ctx, func(context.Context) error { return nil }, nil, 1},
		{"its error", ctx, func(context.Context) error { return boom }, boom, 1},
		{"nested", ctx, func(ctx context.Context) error {
			return Compute(ctx, "a", func(context.Context) error { return nil })
		}, nil, 1},
		{"without turns", context.Background(), func(context.Context) error { return nil }, nil, 0},
		{"nil turns", With(context.Background(), nil), func(context.Context) error { return nil }, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			held := -1
			err := Compute(c.ctx, "a", func(ctx context.Context) error {
				tr.mu.Lock()
				held = tr.running
				tr.mu.Unlock()
				return c.work(ctx)
			})
			if !errors.Is(err, c.want) {
				t.Fatalf("Compute: %v, want %v", err, c.want)
			}
			if held != c.held {
				t.Fatalf("%d turns running during the work, want %d", held, c.held)
			}
			if tr.running != 0 {
				t.Fatalf("%d turns running after it", tr.running)
			}
		})
	}
}

// Compute waits for a turn, and gives up with its context's error.
func TestComputeWaitsForATurn(t *testing.T) {
	tr := NewTurns(1)
	if err := tr.Acquire(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(With(context.Background(), tr), 20*time.Millisecond)
	defer cancel()
	ran := false
	err := Compute(ctx, "a", func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Compute with every turn taken: %v (ran %v), want the deadline and no work", err, ran)
	}
	tr.Release("b", 0)
	if tr.running != 0 || len(tr.line) != 0 {
		t.Fatalf("running %d, line %v", tr.running, tr.line)
	}
}

// Yield keeps the turn within its Slice; once the slice is over, it
// gives the turn to a caller that waits and takes it back after, with
// the time it ran counted against its caller. Outside Compute it is the
// context's error.
func TestYield(t *testing.T) {
	tr := NewTurns(1)
	ctx := With(context.Background(), tr)
	var order []string
	err := Compute(ctx, "heavy", func(ctx context.Context) error {
		if err := Yield(ctx); err != nil { // within the slice: keeps it
			return err
		}
		tr.mu.Lock()
		kept := tr.running == 1 && len(tr.line) == 0
		tr.mu.Unlock()
		if !kept {
			t.Error("the turn changed hands within the slice")
		}
		got := make(chan string, 1)
		waitFor(t, tr, context.Background(), "light", got)
		go func() {
			<-got
			order = append(order, "light")
			tr.Release("light", time.Microsecond)
		}()
		time.Sleep(Slice)
		if err := Yield(ctx); err != nil { // the slice is over
			return err
		}
		order = append(order, "heavy")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "light" {
		t.Fatalf("turns went %v, want light before heavy went on", order)
	}
	if tr.running != 0 || len(tr.line) != 0 || len(tr.waiting) != 0 {
		t.Fatalf("after: running %d, line %v, waiting %v", tr.running, tr.line, tr.waiting)
	}

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Yield(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("Yield outside Compute, its context gone: %v", err)
	}
	if err := Yield(context.Background()); err != nil {
		t.Fatalf("Yield outside Compute: %v", err)
	}
}

// A Compute whose context ends while it waits to take its turn back in
// Yield ends with that error and holds no turn after.
func TestYieldGivesUp(t *testing.T) {
	tr := NewTurns(1)
	ctx, cancel := context.WithCancel(With(context.Background(), tr))
	err := Compute(ctx, "heavy", func(ctx context.Context) error {
		got := make(chan string, 1)
		waitFor(t, tr, context.Background(), "light", got)
		time.Sleep(Slice)
		go func() {
			<-got // light holds the turn now; heavy waits for it back
			cancel()
		}()
		return Yield(ctx)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compute: %v, want canceled", err)
	}
	tr.mu.Lock()
	running := tr.running
	tr.mu.Unlock()
	if running != 1 { // light's, still held
		t.Fatalf("running %d, want light's turn only", running)
	}
	tr.Release("light", 0)
}
