package mcptransport

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/exprd/exprd/utcp"
)

// process is a stdio server: a process on exprd's host, its environment
// only what the template names, in its own process group (stopped whole),
// its stderr logged line by line.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done

	release  func() // gives its place back to the pool, once stopped
	stopOnce sync.Once
}

// startProcess starts spec's command. Its stderr goes to log.
func startProcess(spec *serverSpec, log *slog.Logger) (*process, error) {
	cmd := exec.Command(spec.command, spec.args...)
	// Only what the manual names: not exprd's environment (its tokens,
	// its keys), and not even PATH unless the manual gives one.
	env := make([]string, 0, len(spec.env))
	for k, v := range spec.env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	cmd.Env = env
	if len(cmd.Env) == 0 {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.cwd
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	logs := make(chan struct{})
	go func() {
		logStderr(stderr, log)
		close(logs)
	}()
	go func() {
		<-logs // Wait closes the pipes: read them to the end first
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process as the MCP specification says: its stdin closed,
// then SIGTERM, then SIGKILL, StopGrace apart, to its whole group.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		defer func() {
			if p.release != nil {
				p.release()
			}
		}()
		_ = p.stdin.Close()
		for _, sig := range []func(){p.terminate, p.kill} {
			select {
			case <-p.done:
				return
			case <-time.After(StopGrace):
			}
			sig()
		}
		<-p.done
	})
}

// logStderr logs each line a server writes to its stderr, cut at
// MaxStderrLineBytes, at most StderrLinesPerMinute of them: the rest are
// counted, and the count logged with the next line that may be.
func logStderr(r io.Reader, log *slog.Logger) {
	br := bufio.NewReaderSize(r, MaxStderrLineBytes)
	lim := rate.NewLimiter(rate.Limit(float64(StderrLinesPerMinute)/60), StderrLinesPerMinute)
	dropped := 0
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			if lim.Allow() {
				text := string(line)
				if !cut {
					text = trimNewline(text)
				}
				attrs := []any{"line", utcp.CutRunes(text, MaxStderrLineBytes)}
				if dropped > 0 {
					attrs = append(attrs, "dropped_before", dropped)
					dropped = 0
				}
				log.Info("mcp: stdio server stderr", attrs...)
			} else {
				dropped++
			}
		}
		if cut {
			// The rest of an over-long line is not logged.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		if err != nil {
			if dropped > 0 {
				log.Info("mcp: stdio server stderr lines not logged", "dropped", dropped)
			}
			return
		}
	}
}

func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// errStdioLimit is a connection refused because the registry runs
// MaxStdioServers already.
var errStdioLimit = errors.New("too many stdio servers")

// stdoutReader is a stdio server's stdout, which must be valid UTF-8:
// what is not fails the session (bad) with a malformed-response error.
type stdoutReader struct {
	r    io.ReadCloser
	u    utf8Check
	bad  func(error)
	err  error
	once sync.Once
}

func (r *stdoutReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	if !r.u.valid(p[:n]) || (err == io.EOF && r.u.pending()) {
		r.err = malformed(errors.New("the stdio server wrote what is not UTF-8"))
		r.once.Do(func() { r.bad(r.err) })
		return 0, r.err
	}
	return n, err
}

func (r *stdoutReader) Close() error { return r.r.Close() }
