// Package etcdproc runs a real etcd for the root module's tests, whose
// go.mod keeps etcd's server out: it builds the cluster module's
// cmd/etcdserver (etcd's embed package, one member) once per test binary,
// and starts it as a process on loopback ports that stay the same across
// a Stop and a Start, so that clients reconnect to it.
//
// A test package that starts one removes the binary when its tests end:
//
//	func TestMain(m *testing.M) { os.Exit(etcdproc.Run(m)) }
package etcdproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// built is the binary, built once per process by Start.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// Run runs m's tests and then removes the binary Start built; its result
// is the tests' exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}

// build compiles cmd/etcdserver of the cluster module under repoDir (the
// repository's root) into a directory of its own. Go's build cache makes
// every build after the first a link.
func build(repoDir string) (string, error) {
	built.once.Do(func() {
		if _, err := exec.LookPath("go"); err != nil {
			built.err = fmt.Errorf("go is not on PATH: cannot build etcd's server (%v)", err)
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "etcdproc"); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "etcdserver")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(repoDir, "cluster"), "-o", bin, "./cmd/etcdserver")
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build -C %s ./cmd/etcdserver: %v\n%s", filepath.Join(repoDir, "cluster"), err, out)
			return
		}
		built.bin = bin
	})
	return built.bin, built.err
}

// Etcd is an etcd member run as a process.
type Etcd struct {
	bin, dir     string
	client, peer string
	log          exprdproc.LogBuffer
	cmd          *exec.Cmd
	stdin        io.Closer     // closed, the member stops: it outlives no test binary
	exited       chan struct{} // closed once the running process has exited
	stopped      bool
}

// Start builds etcd's server from the repository at repoDir (once per
// process) and starts a member with its data in a directory of t's; it is
// stopped when t ends. Where go or the build is unavailable the test is
// skipped (failed under CI).
func Start(t testing.TB, repoDir string) *Etcd {
	t.Helper()
	bin, err := build(repoDir)
	if err != nil {
		exprdproc.SkipOrFailInCI(t, "no etcd to test against: %v", err)
	}
	e := &Etcd{bin: bin, dir: filepath.Join(t.TempDir(), "etcd"), client: freeAddr(t), peer: freeAddr(t)}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("etcd's log:\n%s", e.log.String())
		}
	})
	return e
}

func freeAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		exprdproc.SkipOrFailInCI(t, "cannot listen on loopback: %v", err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// Endpoint is the client address, host:port.
func (e *Etcd) Endpoint() string { return e.client }

// Start starts the member (again, after Stop or Kill: same data, same
// ports) and returns once it serves.
func (e *Etcd) Start() error {
	if e.cmd != nil && !e.stopped {
		return fmt.Errorf("etcd is running")
	}
	cmd := exec.Command(e.bin, "--data-dir", e.dir, "--client-addr", e.client, "--peer-addr", e.peer, "--stop-when-stdin-closes")
	cmd.Stderr = &e.log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd, e.stdin, e.exited, e.stopped = cmd, stdin, make(chan struct{}), false
	said := make(chan bool, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		ready := false
		for lines.Scan() {
			if !ready && strings.HasPrefix(lines.Text(), "etcdserver ready") {
				ready = true
				said <- true
			}
		}
		if !ready {
			said <- false
		}
		_ = cmd.Wait() // once stdout is read to its end
		close(e.exited)
	}()
	select {
	case ok := <-said:
		if ok {
			return nil
		}
		<-e.exited
		e.stopped = true
		return fmt.Errorf("etcd exited before it served (%v):\n%s", cmd.ProcessState, e.log.String())
	case <-time.After(time.Minute):
		_ = e.Kill()
		return fmt.Errorf("etcd did not serve within a minute:\n%s", e.log.String())
	}
}

// Stop stops the member as an operator would (SIGTERM) and waits for it;
// Start starts it again. Stopping a stopped member does nothing.
func (e *Etcd) Stop() error {
	if e.cmd == nil || e.stopped {
		return nil
	}
	e.stopped = true
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
		return fmt.Errorf("etcd did not stop within 30 s of SIGTERM")
	}
	_ = e.stdin.Close()
	if !e.cmd.ProcessState.Success() {
		return fmt.Errorf("etcd exited with %v:\n%s", e.cmd.ProcessState, e.log.String())
	}
	return nil
}

// Kill kills the member (SIGKILL, as a crash) and waits for it; Start
// starts it again.
func (e *Etcd) Kill() error {
	if e.cmd == nil || e.stopped {
		return nil
	}
	e.stopped = true
	err := e.cmd.Process.Kill()
	<-e.exited
	_ = e.stdin.Close()
	return err
}

// Wipe stops the member, deletes its data and starts it again, empty: as
// a cluster rebuilt, or restored from an old backup, at the same address.
// Its revisions start again from 1.
func (e *Etcd) Wipe() error {
	if err := e.Stop(); err != nil {
		return err
	}
	if err := os.RemoveAll(e.dir); err != nil {
		return err
	}
	return e.Start()
}

// Client is a client of the member, closed when t ends.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
