package readme_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// root is the repository, where the README's commands run.
const root = "../.."

// A command block of the README: its sh lines, and what it must print.
type block struct {
	line     int      // where it starts in the README, for messages
	commands []string // each with its continuation lines
	expected [][]string
	// whole is the output of the whole block, from a plain fence right
	// after it; nil when the expectations are per command (# lines).
	whole []string
}

// blocks reads the README's runnable command blocks: every sh block but
// those of make. A command's expected output is the "# " lines right
// after it, or the whole block's the plain fenced block right after it;
// "..." (or "# ...") stands for any lines.
func blocks(t *testing.T, text string) []block {
	t.Helper()
	lines := strings.Split(text, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```sh" {
			continue
		}
		b := block{line: i + 1}
		i++
		for ; i < len(lines) && lines[i] != "```"; i++ {
			l := lines[i]
			switch {
			case strings.HasPrefix(l, "# ") || l == "#":
				if len(b.commands) > 0 {
					b.expected[len(b.commands)-1] = append(b.expected[len(b.commands)-1], strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
				}
			case len(b.commands) > 0 && continues(b.commands[len(b.commands)-1]):
				b.commands[len(b.commands)-1] += "\n" + l
			case strings.TrimSpace(l) != "":
				b.commands = append(b.commands, l)
				b.expected = append(b.expected, nil)
			}
		}
		if i+2 < len(lines) && lines[i+1] == "" && lines[i+2] == "```" {
			j := i + 3
			for ; j < len(lines) && lines[j] != "```"; j++ {
				b.whole = append(b.whole, lines[j])
			}
			i = j
		}
		if len(b.commands) > 0 && !strings.HasPrefix(b.commands[0], "make ") {
			out = append(out, b)
		}
	}
	return out
}

// continues reports whether a command goes on on the next line: it ends
// with a backslash, or a quote is open.
func continues(cmd string) bool {
	if strings.HasSuffix(cmd, "\\") {
		return true
	}
	var quote rune
	escaped := false
	for _, r := range cmd {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quote != '\'':
			escaped = true
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case r == quote:
			quote = 0
		}
	}
	return quote != 0
}

// durations are the run-dependent times commands print.
var durations = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s)\b`)

func normalize(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, strings.TrimRight(durations.ReplaceAllString(l, "<duration>"), " "))
	}
	return out
}

// matches reports whether got fits want, where a want line "..." fits any
// lines (none included).
func matches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for k := 0; k <= len(got); k++ {
			if matches(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && matches(want[1:], got[1:])
}

// lineMatches reports whether got is want, where "..." inside want stands
// for any text (the README shortens long values so).
func lineMatches(want, got string) bool {
	before, after, cut := strings.Cut(want, "...")
	if !cut {
		return want == got
	}
	if !strings.HasPrefix(got, before) {
		return false
	}
	rest := got[len(before):]
	for k := 0; k <= len(rest); k++ {
		if lineMatches(after, rest[k:]) {
			return true
		}
	}
	return false
}

// demo is a real `exprd --demo` built from this tree, with registry
// writes open (as the README's registry example and the docs' need), and
// the pinned grpcurl, for the README's and the docs' commands.
type demo struct {
	dir     string // the test's directory of binaries
	addr    string // exprd's gRPC address
	mcp     string // its MCP endpoint's address, where the README says 127.0.0.1:8765
	grpcurl string
}

// startDemo builds and starts exprd --demo for the test.
func startDemo(t *testing.T, ctx context.Context) demo {
	t.Helper()
	d := demo{dir: t.TempDir()}
	abs, _ := filepath.Abs(root)
	exprd, err := exprdproc.Build(ctx, abs, d.dir)
	if err != nil {
		t.Fatal(err)
	}
	d.grpcurl = grpcurlBinary(t, ctx, d.dir)
	var log exprdproc.LogBuffer
	// The MCP endpoint on a port of its own: the demo's 127.0.0.1:8765
	// may be another demo's.
	p, err := exprdproc.Start(exprd, &log, "--demo", "--registry-writes-without-auth", "--mcp-listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	d.addr, d.mcp = p.Addr, p.MCP
	if d.mcp == "" {
		t.Fatalf("exprd --demo serves no MCP endpoint:\n%s", log.String())
	}
	return d
}

// TestReadmeTour runs every command block of the README against a real
// `exprd --demo` (with registry writes open, as the README's registry
// example says to start it) and compares what each prints with what the
// README shows, times aside, so that the tour cannot drift from the
// product.
func TestReadmeTour(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bs := blocks(t, string(text))
	if len(bs) < 10 {
		t.Fatalf("found %d command blocks in the README, want the tour's (at least 10)", len(bs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := startDemo(t, ctx)
	exprctl := filepath.Join(d.dir, "exprctl")
	build := exec.CommandContext(ctx, "go", "build", "-o", exprctl, "./cmd/exprctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/exprctl: %v\n%s", err, out)
	}

	inspector, noInspector := inspectorBinary(t, ctx)

	rewrite := strings.NewReplacer("go run ./cmd/exprctl", exprctl, "bin/grpcurl", d.grpcurl, "localhost:50051", d.addr,
		"bin/mcp-inspector", inspector, "127.0.0.1:8765", d.mcp)
	for _, b := range bs {
		t.Run(fmt.Sprintf("line %d", b.line), func(t *testing.T) {
			if inspector == "" && strings.Contains(strings.Join(b.commands, "\n"), "bin/mcp-inspector") {
				exprdproc.SkipOrFailInCI(t, "%s", noInspector)
			}
			var all []string
			commands := b.commands
			if b.whole != nil {
				// One shell for the block: a line may set a variable
				// the next one uses.
				commands = []string{strings.Join(b.commands, "\n")}
			}
			for i, c := range commands {
				cmd := exec.CommandContext(ctx, "bash", "-c", rewrite.Replace(c))
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "EXPRCTL_ADDR="+d.addr, "NO_COLOR=1")
				// One pipe for both, so that what the README shows of
				// the terminal (a prompt on stderr between lines of
				// stdout) comes in the order it was written.
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", c, err, out)
				}
				got := normalize(strings.Split(strings.TrimRight(string(out), "\n"), "\n"))
				all = append(all, got...)
				if want := normalize(b.expected[i]); b.whole == nil && b.expected[i] != nil && !matches(want, got) {
					t.Errorf("%s\nprinted:\n%s\nthe README shows:\n%s", c, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if want := normalize(b.whole); b.whole != nil && !matches(want, all) {
				t.Errorf("the block printed:\n%s\nthe README shows:\n%s", strings.Join(all, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestDocsCommandsRun runs every grpcurl command block of docs/*.md
// against a real exprd --demo (registry writes open, as the registry's
// examples need), each block in one shell: each must succeed, and print
// what the plain fenced block right after it shows, compared as the
// README's are ("..." for what is trimmed or differs between runs). An
// output the docs show without running it (an error, a decoded form)
// stands apart from the commands, after some text.
func TestDocsCommandsRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := startDemo(t, ctx)
	rewrite := strings.NewReplacer("grpcurl ", d.grpcurl+" ", "localhost:50051", d.addr)
	n := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks(t, string(text)) {
			if !strings.Contains(strings.Join(b.commands, "\n"), "grpcurl ") || strings.HasPrefix(b.commands[0], "exprd ") {
				continue // not a client of the demo: exprd itself, with certificates of one's own
			}
			n++
			t.Run(fmt.Sprintf("%s line %d", filepath.Base(f), b.line), func(t *testing.T) {
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				script := strings.Join(b.commands, "\n")
				cmd := exec.CommandContext(cctx, "bash", "-c", rewrite.Replace(script))
				cmd.Dir = root
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", script, err, out)
				}
				got := normalize(strings.Split(strings.TrimRight(string(out), "\n"), "\n"))
				if want := normalize(b.whole); b.whole != nil && !matches(want, got) {
					t.Errorf("%s\nprinted:\n%s\nthe docs show:\n%s", script, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
	if n < 10 {
		t.Fatalf("ran %d command blocks of docs/*.md, want the docs' grpcurl examples (at least 10)", n)
	}
}

// grpcurlBinary is the pinned grpcurl: bin/grpcurl when make has put it
// there, else built from the module proxy at the Makefile's version.
func grpcurlBinary(t *testing.T, ctx context.Context, dir string) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join(root, "bin", "grpcurl")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GRPCURL_VERSION := (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile pins no GRPCURL_VERSION")
	}
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+string(m[1]))
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install grpcurl: %v\n%s", err, out)
	}
	return filepath.Join(dir, "grpcurl")
}

// inspectorBinary is the pinned MCP Inspector, bin/mcp-inspector: make's
// when it has put it there, else installed by make's target (npm, at the
// Makefile's INSPECTOR_VERSION). Without make, node and npm it is "", and
// why.
func inspectorBinary(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(root, "bin", "mcp-inspector"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err == nil {
		return abs, ""
	}
	for _, tool := range []string{"make", "node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", tool + " is not on PATH: the MCP Inspector cannot be installed (make tools, with Node 20+ and npm)"
		}
	}
	cmd := exec.CommandContext(ctx, "make", abs)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", abs, err, out)
	}
	return abs, ""
}
