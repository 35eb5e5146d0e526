package main

import (
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofConfig is --debug-pprof-addr: Go's profiles (net/http/pprof) on an
// address of their own, for a trusted operator. Off by default; the
// handlers are on a mux of this server alone, never on the gRPC, metrics
// or MCP ports, and they take no token: a profile shows the heap's
// contents by allocation site and /debug/pprof/profile costs CPU, so the
// address should be loopback (or otherwise reachable only by operators).
type pprofConfig struct {
	addr string
}

func (c *pprofConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "debug-pprof-addr", "", "serve Go's profiles (net/http/pprof, /debug/pprof/) on this address, without auth: for a trusted operator only, loopback recommended (empty: off)")
}

// pprofServer is the running profile server; a nil one is off.
type pprofServer struct {
	srv  *http.Server
	addr net.Addr
}

// start serves the profiles when an address is set; nil when it is not.
func (c pprofConfig) start(log *slog.Logger) (*pprofServer, error) {
	if c.addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, allocs, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	p := &pprofServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: lis.Addr()}
	log.Warn("serving Go's profiles without auth: for a trusted operator only", "debug_pprof_addr", p.addr.String())
	go func() {
		if err := p.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server", "err", err)
		}
	}()
	return p, nil
}

// close stops the server at once (a profile being taken is cut short); a
// nil one does nothing.
func (p *pprofServer) close() {
	if p != nil {
		_ = p.srv.Close()
	}
}
