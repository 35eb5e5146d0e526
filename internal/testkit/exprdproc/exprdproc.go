// Package exprdproc starts an exprd binary as a child process for load
// tests, benchmarks and cross-language examples: it waits for the
// "exprd serving" log line to learn the addresses and reads the server's
// gauges from its /metrics endpoint.
package exprdproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a running exprd.
type Proc struct {
	cmd *exec.Cmd
	// Addr is the gRPC address, Metrics the Prometheus address, MCP the
	// MCP endpoint's (host:port; "" when it serves none).
	Addr, Metrics, MCP string
	exited             chan struct{} // closed once the process has exited
	err                error         // how it exited, set before exited is closed
}

// Build compiles ./cmd/exprd of the module rooted at moduleDir into dir
// and returns the binary's path. It builds as the container image does
// (deploy/Dockerfile: static, -trimpath), so that the tests which build
// exprd share one build cache entry and compile it once. When EXPRD_BIN
// names a binary (make test builds one first), it returns that instead, so
// that test packages running at once do not each build exprd.
func Build(ctx context.Context, moduleDir, dir string) (string, error) {
	if bin := os.Getenv("EXPRD_BIN"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "exprd")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/exprd")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/exprd: %v\n%s", err, out)
	}
	return bin, nil
}

// Start runs bin on loopback ports with args added (later flags win) and
// returns once it serves. Its log goes to logTo (nil: discarded), every
// line of it until the process exits.
func Start(bin string, logTo io.Writer, args ...string) (*Proc, error) {
	base := []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "info"}
	cmd := exec.Command(bin, append(base, args...)...)
	// A pipe of our own rather than StderrPipe: Wait must not close it
	// while lines written just before the exit are still unread.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	if logTo == nil {
		logTo = io.Discard
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	lines := bufio.NewScanner(pr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	var seen strings.Builder
	for lines.Scan() {
		var rec struct{ Msg, Addr, Metrics string }
		fmt.Fprintln(&seen, lines.Text())
		if json.Unmarshal(lines.Bytes(), &rec) != nil {
			continue
		}
		if rec.Msg == "exprd MCP serving" {
			p.MCP = rec.Addr // logged before "exprd serving"
		}
		if rec.Msg == "exprd serving" {
			p.Addr, p.Metrics = rec.Addr, rec.Metrics
			go func() {
				defer pr.Close()
				for lines.Scan() {
					fmt.Fprintln(logTo, lines.Text())
				}
			}()
			return p, nil
		}
	}
	pr.Close()
	p.Stop()
	return nil, fmt.Errorf("%s never said it was serving:\n%s", bin, seen.String())
}

// Stop kills the process and waits for it.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns how it
// exited; past timeout it kills it and says so.
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.Stop()
		return fmt.Errorf("exprd did not exit within %s", timeout)
	}
}

// Terminate sends SIGTERM and waits up to grace for the drain, then kills.
func (p *Proc) Terminate(grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.Wait(grace)
}

// Pid is the process id, for reading /proc.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Gauges are read from the server's /metrics.
type Gauges struct {
	RSSMiB     float64
	Goroutines float64
}

// Gauges reads the server's resident memory and goroutines.
func (p *Proc) Gauges() (Gauges, error) {
	var g Gauges
	resp, err := http.Get("http://" + p.Metrics + "/metrics")
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "process_resident_memory_bytes":
			g.RSSMiB = v / (1 << 20)
		case "go_goroutines":
			g.Goroutines = v
		}
	}
	return g, sc.Err()
}

// PeakRSSMiB reads a process's peak resident set (VmHWM) from /proc; Linux only.
func PeakRSSMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// LogBuffer collects a server's log for a test to show when it fails: Start
// writes to it from its reader goroutine while the test reads it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
