package membudget_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
)

func TestReserve(t *testing.T) {
	for _, tt := range []struct {
		name        string
		held, ask   int64 // held by another reservation, then asked
		wantErr     bool
		unreachable bool
	}{
		{"within", 0, 60, false, false},
		{"at the limit", 40, 60, false, false},
		{"one past what is left", 40, 61, true, false},
		{"the whole budget", 0, 100, false, false},
		{"more than the whole budget", 0, 101, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := membudget.New(100, 10*time.Millisecond)
			if _, err := b.Reserve(context.Background(), "other", tt.held); err != nil {
				t.Fatal(err)
			}
			r, err := b.Reserve(context.Background(), "a state", tt.ask)
			var ee *membudget.ExhaustedError
			if (err != nil) != tt.wantErr || (err != nil && (!errors.As(err, &ee) || ee.Unreachable != tt.unreachable || ee.What != "a state")) {
				t.Fatalf("got %v, want error %v (unreachable %v)", err, tt.wantErr, tt.unreachable)
			}
			want := tt.held
			if err == nil {
				want += tt.ask
				if got := r.Size(); got != tt.ask {
					t.Errorf("Size: got %d, want %d", got, tt.ask)
				}
			}
			if got := b.InUse(); got != want {
				t.Errorf("InUse: got %d, want %d", got, want)
			}
		})
	}
}

func TestResize(t *testing.T) {
	b := membudget.New(100, 10*time.Millisecond)
	r := b.Empty("x")
	ctx := context.Background()
	if err := r.Resize(ctx, 70); err != nil {
		t.Fatal(err)
	}
	if err := r.Resize(ctx, 101); err == nil {
		t.Fatal("grew past the budget")
	}
	if got := r.Size(); got != 70 {
		t.Errorf("a failed growth changed the size: got %d, want 70", got)
	}
	if err := r.Resize(ctx, 20); err != nil || b.InUse() != 20 {
		t.Fatalf("shrink: got %v, in use %d; want nil, 20", err, b.InUse())
	}
	r.Release()
	if got := b.InUse(); got != 0 {
		t.Errorf("after Release: in use %d, want 0", got)
	}
	if got := b.Refusals(); got != 1 {
		t.Errorf("Refusals: got %d, want 1", got)
	}
}

// TestWaitsForRoom: a reservation that does not fit waits for one that
// is released within the wait.
func TestWaitsForRoom(t *testing.T) {
	b := membudget.New(100, 5*time.Second)
	held, err := b.Reserve(context.Background(), "held", 90)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := b.Reserve(context.Background(), "waiting", 50)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait (it fails the test only by passing early)
	select {
	case err := <-done:
		t.Fatalf("did not wait: %v", err)
	default:
	}
	held.Release()
	if err := <-done; err != nil {
		t.Fatalf("got %v after room was made, want nil", err)
	}
}

// TestCallerCancels: a cancelled caller gets its context's error, not a
// budget error.
func TestCallerCancels(t *testing.T) {
	b := membudget.New(10, time.Minute)
	if _, err := b.Reserve(context.Background(), "held", 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, "x", 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
}

// TestNeverOver: many reservations at once never hold more than the
// limit between them.
func TestNeverOver(t *testing.T) {
	b := membudget.New(1000, time.Millisecond)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			r := b.Empty("x")
			for j := range 200 {
				_ = r.Resize(context.Background(), int64((i*7+j*13)%300))
				if got := b.InUse(); got > 1000 {
					t.Errorf("in use %d, over the limit", got)
				}
			}
			r.Release()
		})
	}
	wg.Wait()
	if got := b.InUse(); got != 0 {
		t.Errorf("in use %d after every release, want 0", got)
	}
}

func TestNilBudget(t *testing.T) {
	var b *membudget.Budget
	r, err := b.Reserve(context.Background(), "x", 1<<40)
	if err != nil || r.Size() != 0 || r.Resize(context.Background(), 5) != nil {
		t.Fatalf("a nil budget must reserve nothing and never fail: %v", err)
	}
	r.Release()
}
