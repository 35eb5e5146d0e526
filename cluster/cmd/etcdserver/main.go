// Command etcdserver runs one etcd member (etcdtest's, etcd's embed
// package) for the tests of exprd's root module, which keep etcd's server
// out of their go.mod and start this as a process instead
// (internal/testkit/etcdproc).
//
//	etcdserver --data-dir DIR --client-addr 127.0.0.1:P1 --peer-addr 127.0.0.1:P2
//
// It prints "etcdserver ready" and the client address once the member
// serves, and stops the member on SIGTERM or SIGINT, or when its standard
// input closes with --stop-when-stdin-closes (its parent gone). Started
// again on the same directory and addresses, it serves the same data.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/exprd/exprd/cluster/etcdtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdserver:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("data-dir", "", "the member's data directory (created if missing)")
	client := flag.String("client-addr", "", "host:port clients reach it at")
	peer := flag.String("peer-addr", "", "host:port of its peer URL")
	stdin := flag.Bool("stop-when-stdin-closes", false, "stop when standard input reaches its end")
	flag.Parse()
	if *dir == "" || *client == "" || *peer == "" {
		return errors.New("--data-dir, --client-addr and --peer-addr are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *stdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}
	member := etcdtest.New(*dir, *client, *peer)
	if err := member.Start(); err != nil {
		return err
	}
	defer member.Stop()
	fmt.Println("etcdserver ready", member.Endpoint())
	<-ctx.Done()
	return nil
}
