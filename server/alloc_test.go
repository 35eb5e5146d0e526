package server_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
)

// allocatedDuring is what the process allocated while f ran, in bytes.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is what a call stopped by its byte budget (64 MiB) may take
// the process to allocate, with room for the server and the client.
const allocBound = 256 << 20

// Programs that build strings in a loop, each under the string limit, stop
// at the call's byte budget (or at the memory budget, when it is smaller)
// through the public API, ExprTool and CodeMode alike: the program gets
// budget-exceeded, the process allocates a bounded amount (it used to
// build gigabytes), and nothing stays reserved once the call has ended.
// Not parallel: the process's allocation counter is shared.
func TestBuiltStringsStopAtTheByteBudget(t *testing.T) {
	// The byte budgets are small enough to be reached well within the
	// time budget on a loaded machine.
	for _, tt := range []struct {
		name     string
		budget   int64  // the server's memory budget
		maxAlloc uint64 // the call's byte budget; 0: the server's
		want     string
	}{
		{"the call's byte budget", 1 << 30, 4 << 20, "over the limit of 4194304 bytes"},
		{"the server's memory budget", 4 << 20, 0, "the server's memory budget cannot hold what this call builds now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := membudget.New(tt.budget, time.Millisecond)
			c := startServer(t, server.WithMemoryBudget(mem))
			held := mem.InUse() // the receive gate's overdraft, kept from the start
			var resp *exprdv1.CallResponse
			got := allocatedDuring(func() {
				var err error
				resp, err = c.Call(context.Background(), &exprdv1.CallRequest{
					Settings:  &exprdv1.Settings{Read: true},
					Budgets:   &exprdv1.Budgets{MaxAllocBytes: tt.maxAlloc},
					InputJson: `{"read": "len(map(1..100000, repeat(\"x\", 100000)))"}`,
				})
				if err != nil {
					t.Fatal(err)
				}
			})
			var a struct {
				Error struct{ Reason, Message string }
			}
			if err := json.Unmarshal([]byte(resp.GetAnswerJson()), &a); err != nil {
				t.Fatal(err)
			}
			if a.Error.Reason != "budget-exceeded" || !strings.Contains(a.Error.Message, tt.want) {
				t.Errorf("got %s, want budget-exceeded saying %q", resp.GetAnswerJson(), tt.want)
			}
			if got > allocBound {
				t.Errorf("the call allocated %d bytes, want at most %d", got, allocBound)
			}
			if n := mem.InUse(); n != held {
				t.Errorf("after the call the budget holds %d bytes, want %d, as before it", n, held)
			}
		})
	}
}

func TestCodeModeBuiltStringsStopAtTheByteBudget(t *testing.T) {
	c := exprdv1.NewCodeModeClient(codeModeConnWith(t, nil))
	var resp *exprdv1.ExecuteResponse
	got := allocatedDuring(func() {
		var err error
		resp, err = c.Execute(context.Background(), &exprdv1.ExecuteRequest{Code: `len(map(1..20000, repeat("x", 100000)))`})
		if err != nil {
			t.Fatal(err)
		}
	})
	if e := resp.GetError(); e.GetReason() != "budget-exceeded" || !strings.Contains(e.GetMessage(), "over the limit of 67108864 bytes") {
		t.Errorf("got %v, want budget-exceeded over the byte budget", resp)
	}
	if got > allocBound {
		t.Errorf("the run allocated %d bytes, want at most %d", got, allocBound)
	}
}

// A client-run function's answers are counted as they arrive: a program
// that collects them in a loop stops at the byte budget, however small
// each answer is against the per-value limits.
func TestClientAnswersStopAtTheByteBudget(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, &exprdv1.Open{
		Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{clientFn("downloadCsv")}},
		Budgets:  &exprdv1.Budgets{MaxAllocBytes: 1 << 20, FunctionTimeoutMs: 5000},
	})
	s.call("c", `{"steps": [{"set": "scopes.root.n", "expr": "len(map(1..60, downloadCsv({rows: [#]})))"}]}`)
	answer := strings.Repeat("y", 100_000)
	calls := 0
	for {
		m := s.recv()
		if fc := m.GetFunctionCall(); fc != nil {
			calls++
			s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: &exprdv1.FunctionResult{
				CallId: fc.GetCallId(), FunctionCallId: fc.GetFunctionCallId(), ResultJson: `{"file": "` + answer + `"}`,
			}}})
			continue
		}
		a := m.GetAnswer()
		if a == nil {
			t.Fatalf("got %v, want a function call or the answer", m)
		}
		if !strings.Contains(a.GetAnswerJson(), "budget-exceeded") || !strings.Contains(a.GetAnswerJson(), "over the limit of 1048576 bytes") {
			t.Errorf("got %s, want budget-exceeded over the byte budget", a.GetAnswerJson())
		}
		break
	}
	// Each answer is charged 3 bytes a byte of its JSON (about 300 KB):
	// the fourth one passes 1 MiB.
	if calls != 4 {
		t.Errorf("the client was asked %d times, want 4", calls)
	}
}
