package procs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// The controller's decisions: one P after LowerAfter of low use at the
// default, the default again after one interval of high use on one P,
// nothing in between.
func TestControllerDecisions(t *testing.T) {
	p := policy{interval: 100 * time.Millisecond, raise: 0.8, lower: 0.6, lowerAfter: 400 * time.Millisecond}
	tests := []struct {
		name  string
		cores []float64
		want  string // after each interval: D at the default, 1 on one P
	}{
		{"idle: one P once the window is full", []float64{0, 0, 0, 0, 0}, "DDD11"},
		{"the window's average, not its last interval", []float64{3, 0, 0, 0, 0}, "DDDD1"},
		{"at Lower on average stays", []float64{0.6, 0.6, 0.6, 0.6, 0.6}, "DDDDD"},
		{"under Lower on average", []float64{0.59, 0.59, 0.59, 0.59}, "DDD1"},
		{"on one P, under Raise stays", []float64{0, 0, 0, 0, 0.79, 0.5, 0.79}, "DDD1111"},
		{"on one P, Raise brings the default back at once", []float64{0, 0, 0, 0, 0.8}, "DDD1D"},
		{"after raising, a whole window before lowering again", []float64{0, 0, 0, 0, 1, 0, 0, 0, 0}, "DDD1DDDD1"},
		{"a steady load inside the band does not flip", []float64{0.7, 0.7, 0.7, 0.7, 0.7, 0.7}, "DDDDDD"},
		{"a load that fits one P stays there", []float64{0.5, 0.5, 0.5, 0.5, 0.7, 0.7, 0.7}, "DDD1111"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sets []string
			c := newController(p, func() { sets = append(sets, "default") }, func() { sets = append(sets, "one") })
			var got strings.Builder
			changes := 0
			for _, u := range tc.cores {
				if c.observe(u) {
					changes++
				}
				if c.one {
					got.WriteByte('1')
				} else {
					got.WriteByte('D')
				}
			}
			if got.String() != tc.want {
				t.Errorf("got %s, want %s", got.String(), tc.want)
			}
			if changes != len(sets) {
				t.Errorf("reported %d changes, made %d (%v)", changes, len(sets), sets)
			}
		})
	}
}

// Run on the real runtime: it starts on one P, a busy process gets the
// default back, an idle one goes back to one P, and the end of Run leaves
// the default.
func TestRunFollowsLoad(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set: TestRunKeepsTheOperatorsValue covers it")
	}
	def := runtime.GOMAXPROCS(0)
	if def <= 1 {
		exprdproc.SkipOrFailInCI(t, "the runtime's default is %d P: nothing to adapt", def)
	}
	// Low thresholds: under make test other packages' tests share the
	// cores, and a spinning goroutine may get well under one.
	p := policy{interval: 10 * time.Millisecond, raise: 0.3, lower: 0.2, lowerAfter: 50 * time.Millisecond, perCore: 2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, p, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	waitFor := func(what string, want func(int) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !want(runtime.GOMAXPROCS(0)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOMAXPROCS is %d after 30 s", what, runtime.GOMAXPROCS(0))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("started", func(n int) bool { return n == 1 })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range def {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		})
	}
	waitFor("busy", func(n int) bool { return n == 2*def })
	if n := Cores(); n != def {
		t.Errorf("busy on %d Ps: Cores %d, want the default %d", 2*def, n, def)
	}
	close(stop)
	wg.Wait()
	waitFor("idle again", func(n int) bool { return n == 1 })

	cancel()
	<-done
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Errorf("after Run: GOMAXPROCS %d, want the default %d", n, def)
	}
	if n := Cores(); n != def {
		t.Errorf("after Run: Cores %d, want GOMAXPROCS %d", n, def)
	}
}

// With the GOMAXPROCS variable set, Run leaves the operator's value and
// says so.
func TestRunKeepsTheOperatorsValue(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	before := runtime.GOMAXPROCS(3)
	defer runtime.GOMAXPROCS(before)
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(context.Background(), slog.New(slog.NewTextHandler(&log, nil)), DefaultPerCore)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return with GOMAXPROCS set")
	}
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS %d, want the operator's 3", n)
	}
	if !strings.Contains(log.String(), "the GOMAXPROCS variable is set") {
		t.Errorf("the log says %q", log.String())
	}
}
