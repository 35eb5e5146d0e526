package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/tcpcut"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"google.golang.org/protobuf/proto"
)

// csvScript writes two rows with the client-run downloadCsv, then says
// so; both replies stream slowly, a word every 15 ms.
var csvScript = scripted.Script{Loop: true, Turns: []scripted.Turn{
	{Match: &scripted.Match{LastRole: "user"}, Text: "I'll write the rows to a CSV file for you now, one moment please.", ChunkDelayMS: 15,
		ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "downloadCsv", Arguments: json.RawMessage(`{"rows":[{"id":"a","n":1},{"id":"b","n":2}]}`)}}},
	{Match: &scripted.Match{LastRole: "tool"}, Text: "Done: the CSV file holds two rows, a and b, as you asked of me.", ChunkDelayMS: 15},
}}

const csvRowsAB = "id,n\na,1\nb,2\n"

// startScripted serves exprd with script as its only model provider.
func startScripted(t *testing.T, script scripted.Script) string {
	t.Helper()
	srv, err := server.New(withModels(t, map[string]scripted.Script{"scripted": script}), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv)
}

var turnLine = regexp.MustCompile(`(?m)^turn [0-9a-f]{32}\n`)

// sameTurn is stdout with its turn line's id left out.
func sameTurn(stdout string) string { return turnLine.ReplaceAllString(stdout, "turn ID\n") }

// cutWriter is stdout that cuts the proxy's connections when what is
// printed reaches each of its marks, once each.
type cutWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	proxy *tcpcut.Proxy
	marks []string
	cuts  int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, _ := w.b.Write(p)
	for len(w.marks) > 0 && strings.Contains(w.b.String(), w.marks[0]) {
		w.marks = w.marks[1:]
		if w.proxy.Cut() > 0 {
			w.cuts++
		}
	}
	return n, nil
}

// exprctl agent survives its connection dropping three times in the
// middle of a turn (in each step's text, and as its client-run tool is
// asked for): it says so on stderr, resumes the turn after the last event
// it printed, and prints exactly what an unbroken run prints, every event
// once; the approval is asked once and the tool runs once.
func TestAgentReconnects(t *testing.T) {
	t.Parallel()
	addr := startScripted(t, csvScript)
	dir := t.TempDir()
	args := func(csv string) []string {
		return []string{"agent", "--prompt", "Rows to CSV.", "--client-tool", "downloadCsv", "--needs-approval", "downloadCsv", "--yes", "--csv-out", filepath.Join(dir, csv)}
	}
	plain := runCmd("", append([]string{"--addr", addr}, args("plain.csv")...)...)
	if plain.code != 0 {
		t.Fatalf("exit %d: %s%s", plain.code, plain.stdout, plain.stderr)
	}
	for _, want := range []string{"call downloadCsv ", "run downloadCsv\n", `result downloadCsv {"rows":2}`, "done: completed after 2 steps"} {
		if !strings.Contains(plain.stdout, want) {
			t.Fatalf("the output lacks %q:\n%s", want, plain.stdout)
		}
	}
	if !turnLine.MatchString(plain.stdout) || !strings.HasPrefix(plain.stdout, "turn ") {
		t.Errorf("the first line does not name the turn:\n%s", plain.stdout)
	}

	proxy, err := tcpcut.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	stdout := &cutWriter{proxy: proxy, marks: []string{"text I'll write the", "run downloadCsv\n", "text Done: the CSV"}}
	var stderr strings.Builder
	code := run(append([]string{"--addr", proxy.Addr()}, args("cut.csv")...), strings.NewReader(""), stdout, &stderr)
	got := stdout.b.String()
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, got, stderr.String())
	}
	if sameTurn(got) != sameTurn(plain.stdout) {
		t.Errorf("with the connection cut, exprctl printed\n%s\nwithout:\n%s", got, plain.stdout)
	}
	if stdout.cuts != 3 {
		t.Errorf("cut %d connections, want 3", stdout.cuts)
	}
	id := strings.Fields(got)[1]
	if n := strings.Count(stderr.String(), "exprctl agent: the connection dropped ("); n != 3 {
		t.Errorf("stderr tells of %d drops, want 3:\n%s", n, stderr.String())
	}
	if !strings.Contains(stderr.String(), "; resuming turn "+id+" after seq ") {
		t.Errorf("stderr does not say which turn is resumed:\n%s", stderr.String())
	}
	if n := strings.Count(stderr.String(), "approve downloadCsv "); n != 1 {
		t.Errorf("asked %d times for the approval, want once:\n%s", n, stderr.String())
	}
	for _, f := range []string{"plain.csv", "cut.csv"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != csvRowsAB {
			t.Errorf("%s: %q, %v; want the two rows", f, b, err)
		}
	}
}

// exprctl agent --resume follows a turn whose client went away while its
// approval waited: it prints the turn from its first event as a started
// turn's, asks the approval (sent again, pending) once, runs the tool and
// prints the turn to done. Resumed again once it has ended, it prints it
// again, from SEQ, asking nothing.
func TestAgentResume(t *testing.T) {
	t.Parallel()
	addr := startScripted(t, csvScript)
	dir := t.TempDir()
	plain := runCmd("", "--addr", addr, "agent", "--prompt", "Rows to CSV.", "--client-tool", "downloadCsv", "--needs-approval", "downloadCsv", "--yes", "--csv-out", filepath.Join(dir, "plain.csv"))
	if plain.code != 0 {
		t.Fatalf("exit %d: %s%s", plain.code, plain.stdout, plain.stderr)
	}

	// A client that goes away while the approval waits.
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	asked := make(chan struct{})
	start := &exprdv1.AgentStart{Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Rows to CSV."}},
		Tools: []*exprdv1.AgentTool{{Name: "downloadCsv", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, NeedsApproval: true}}}
	gone, err := c.StartTurn(context.Background(), start, client.TurnHandlers{
		OnApproval: func(ctx context.Context, _ *exprdv1.AgentApprovalRequest) (bool, string, error) {
			close(asked)
			<-ctx.Done()
			return false, "", ctx.Err()
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	_, _ = gone.Close()
	id := gone.ID()

	csv := filepath.Join(dir, "resumed.csv")
	got := runCmd("", "--addr", addr, "agent", "--resume", id, "--yes", "--csv-out", csv)
	if got.code != 0 {
		t.Fatalf("exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	if !strings.HasPrefix(got.stdout, "turn "+id+"\n") {
		t.Errorf("the first line does not name the turn:\n%s", got.stdout)
	}
	if sameTurn(got.stdout) != sameTurn(plain.stdout) {
		t.Errorf("--resume printed\n%s\nwant as the turn run at once:\n%s", got.stdout, plain.stdout)
	}
	if n := strings.Count(got.stderr, "approve downloadCsv "); n != 1 {
		t.Errorf("asked %d times for the approval, want once:\n%s", n, got.stderr)
	}
	if b, err := os.ReadFile(csv); err != nil || string(b) != csvRowsAB {
		t.Errorf("the CSV: %q, %v; want the two rows", b, err)
	}

	// The ended turn, its last two events.
	again := runCmd("", "--addr", addr, "agent", "--resume", id+":-2", "--no")
	if again.code != 0 {
		t.Fatalf("exit %d: %s%s", again.code, again.stdout, again.stderr)
	}
	lines := strings.Split(plain.stdout, "\n")
	if want := "turn " + id + "\n" + strings.Join(lines[len(lines)-4:], "\n"); again.stdout != want {
		t.Errorf("--resume %s:-2 printed\n%s\nwant\n%s", id, again.stdout, want)
	}
	if again.stderr != "" {
		t.Errorf("stderr %q: the ended turn asks nothing", again.stderr)
	}

	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"--resume", id, "--prompt", "hi", "--expr"}, exitUsage, "--resume follows a turn started earlier: --expr, --prompt make a new turn"},
		{[]string{"--resume", id + ":x"}, exitUsage, "SEQ is a whole number"},
		{[]string{"--resume", strings.Repeat("0", 32)}, exitError, "exprctl agent: NotFound: no turn with this id"},
		{[]string{"--resume", id + ":99"}, exitError, "exprctl agent: OutOfRange: resume.after_seq"},
		{[]string{"--prompt", "hi", "--client-tool", "rm"}, exitUsage, "--client-tool rm: exprctl runs only downloadCsv"},
		{[]string{"--prompt", "hi", "--needs-approval", "rm"}, exitUsage, "--needs-approval rm: not a declared tool"},
	} {
		got := runCmd("", append([]string{"--addr", addr, "agent"}, tc.args...)...)
		if got.code != tc.wantCode || !strings.Contains(got.stderr, tc.wantStderr) {
			t.Errorf("agent %v: exit %d, stderr %q; want %d and %q", tc.args, got.code, got.stderr, tc.wantCode, tc.wantStderr)
		}
	}
}

// triggerWriter is stdout that calls fire once what is printed holds mark.
type triggerWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	mark  string
	fire  func()
	fired bool
}

func (w *triggerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, _ := w.b.Write(p)
	if !w.fired && strings.Contains(w.b.String(), w.mark) {
		w.fired = true
		w.fire()
	}
	return n, nil
}

// Ctrl-C cancels the turn, which is started detached: it does not go on
// without exprctl, and a resume finds it ended CANCELED.
func TestAgentInterruptCancelsTheTurn(t *testing.T) {
	t.Parallel()
	addr := startScripted(t, csvScript)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	stdout := &triggerWriter{mark: "text I'll write", fire: interrupt}
	var stderr strings.Builder
	code := runContext(ctx, []string{"--addr", addr, "agent", "--prompt", "Rows to CSV.", "--client-tool", "downloadCsv"}, strings.NewReader(""), stdout, &stderr)
	got := stdout.b.String()
	if code != exitError || !strings.Contains(stderr.String(), "exprctl agent: interrupted: turn ") || !strings.Contains(stderr.String(), " cancelled: Canceled: ") {
		t.Fatalf("exit %d, stderr %q; want 1 and the turn cancelled (stdout %q)", code, stderr.String(), got)
	}
	id := strings.Fields(got)[1]
	again := runCmd("", "--addr", addr, "agent", "--resume", id+":-1")
	if again.code != exitError || !strings.Contains(again.stderr, "exprctl agent: Canceled: ") {
		t.Errorf("the resumed turn: exit %d, stderr %q; want it ended CANCELED", again.code, again.stderr)
	}
}

// The printer says when a turn stops and starts again being durable, its
// text line ended first.
func TestTurnPrinterDurability(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []*exprdv1.AgentLoopRunResponse
		want   string
	}{
		{"not durable after text", []*exprdv1.AgentLoopRunResponse{
			{Event: &exprdv1.AgentLoopRunResponse_TextDelta{TextDelta: &exprdv1.TextDelta{Text: "Hel"}}},
			{Event: &exprdv1.AgentLoopRunResponse_Durability{Durability: &exprdv1.TurnDurability{Reason: "the turn store is out of reach"}}},
		}, "text Hel\nnot durable: the turn store is out of reach\n"},
		{"durable again", []*exprdv1.AgentLoopRunResponse{
			{Event: &exprdv1.AgentLoopRunResponse_Durability{Durability: &exprdv1.TurnDurability{Durable: true}}},
		}, "durable again: what the turn kept is recorded\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p := &turnPrinter{out: &out}
			for _, m := range tc.events {
				p.event(m)
			}
			if out.String() != tc.want {
				t.Fatalf("printed %q, want %q", out.String(), tc.want)
			}
		})
	}
}
