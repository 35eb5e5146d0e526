package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
)

// demoMCPListen is where --demo serves the MCP endpoint when
// --mcp-listen is not given; when it is taken, the demo runs without it.
const demoMCPListen = "127.0.0.1:8765"

// mcpConfig is the flags of the MCP endpoint (mcpserve).
type mcpConfig struct {
	listen        string
	expose        string
	maxBodyBytes  int64
	maxInFlight   int
	perCaller     int
	pageSize      int
	writeTimeout  time.Duration
	needsApproval string
	approvalKey   string // a file
}

func (c *mcpConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.listen, "mcp-listen", "", "address of the MCP endpoint (streamable HTTP at /mcp); empty: off, or "+demoMCPListen+" with --demo; \"off\": off with --demo too")
	fs.StringVar(&c.expose, "mcp-expose", string(mcpserve.ExposeCode), "what the MCP endpoint lists: code (search_tools, tools_info, call_tool_chain), tools (the registry's tools themselves) or both")
	fs.Int64Var(&c.maxBodyBytes, "mcp-max-body-bytes", mcpserve.DefaultMaxBodyBytes, "bytes of one MCP request's body; a longer one is answered 413")
	fs.IntVar(&c.maxInFlight, "mcp-max-in-flight", mcpserve.DefaultMaxInFlight, "MCP requests served at once; one past it is answered 503 with a Retry-After")
	fs.IntVar(&c.perCaller, "mcp-max-in-flight-per-caller", mcpserve.DefaultMaxInFlightPerCaller, "MCP requests of one token served at once; one past it is answered 503 with a Retry-After")
	fs.IntVar(&c.pageSize, "mcp-page-size", mcpserve.DefaultPageSize, "tools of one MCP tools/list page")
	fs.DurationVar(&c.writeTimeout, "mcp-write-timeout", mcpserve.DefaultWriteTimeout, "the most an MCP answer may take to write from its first byte; a client reading slower has its request ended")
	fs.StringVar(&c.needsApproval, "mcp-needs-approval", "", "comma-separated tools (full names, manuals, or prefixes ending in *) whose calls need a person's approval: the MCP endpoint asks the host's user (2026-07-28's input_required) or refuses them")
	fs.StringVar(&c.approvalKey, "mcp-approval-key-file", "", "a file of at least 32 bytes (a mounted Secret) that signs MCP approvals' request states; replicas behind one balancer share it. Empty: a random key of the process's, whose approvals only it takes back")
}

func (c mcpConfig) validate() error {
	errs := notPositive([]positiveFlag{
		{"mcp-max-body-bytes", c.maxBodyBytes > 0, c.maxBodyBytes},
		{"mcp-max-in-flight", c.maxInFlight > 0, c.maxInFlight},
		{"mcp-max-in-flight-per-caller", c.perCaller > 0, c.perCaller},
		{"mcp-page-size", c.pageSize > 0, c.pageSize},
		{"mcp-write-timeout", c.writeTimeout > 0, c.writeTimeout},
	})
	if _, err := mcpserve.ParseExpose(c.expose); err != nil {
		errs = append(errs, fmt.Errorf("mcp-expose: %v", err))
	}
	return errors.Join(errs...)
}

// mcpServer is the MCP endpoint's HTTP server; nil when it is off.
type mcpServer struct {
	srv  *http.Server
	addr net.Addr
}

// startMCP serves the MCP endpoint over the registry, with the gRPC
// server's tokens, rate limit (its buckets), memory budget, overload
// manager and CodeMode maximum.
func startMCP(c config, reg *utcp.Registry, srv *server.Server, ovl *overload.Manager, log *slog.Logger) (*mcpServer, error) {
	addr := c.mcp.listen
	if addr == "" && c.demo {
		addr = demoMCPListen
	}
	if addr == "" || addr == "off" {
		return nil, nil
	}
	cfg := mcpserve.Config{
		Registry:      reg,
		Expose:        mcpserve.Expose(c.mcp.expose),
		NeedsApproval: splitList(c.mcp.needsApproval),
		Memory:        c.memory,
		Overload:      ovl,
		Logger:        log,
		Limits: mcpserve.Limits{MaxBodyBytes: c.mcp.maxBodyBytes, MaxInFlight: c.mcp.maxInFlight, MaxInFlightPerCaller: c.mcp.perCaller,
			MaxTimeout: c.runLimits.codeModeTimeout, PageSize: c.mcp.pageSize, WriteTimeout: c.mcp.writeTimeout},
	}
	if srv != nil {
		cfg.RateLimit = srv.TakeHTTP
		cfg.Turns = srv.Turns()
	}
	if c.mcp.approvalKey != "" {
		key, err := os.ReadFile(c.mcp.approvalKey)
		if err != nil {
			return nil, fmt.Errorf("mcp-approval-key-file: %w", err)
		}
		cfg.ApprovalKey = bytes.TrimRight(key, "\r\n")
	} else if cfg.NeedsApproval != nil {
		log.Warn("exprd MCP approvals are signed with a key of this process's: with several replicas, give each the same --mcp-approval-key-file")
	}
	tokens, err := c.tokens()
	if err != nil {
		return nil, err
	}
	if tokens != nil {
		cfg.Verify = func(token string) (mcpserve.Caller, bool) {
			name, scopes, ok := tokens.Lookup(token)
			return mcpserve.Caller{Name: name, Scopes: scopes}, ok
		}
	}
	h, err := mcpserve.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil && c.mcp.listen == "" {
		// The demo's default address, taken (another demo runs): the
		// demo goes on without the endpoint, which nobody asked for.
		log.Warn("exprd MCP not serving: the demo's address is taken (give --mcp-listen)", "addr", addr, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp-listen: %w", err)
	}
	m := &mcpServer{srv: mcpserve.NewHTTPServer(h, log), addr: lis.Addr()}
	go func() {
		var err error
		if c.tlsCert != "" {
			err = m.srv.ServeTLS(lis, c.tlsCert, c.tlsKey)
		} else {
			err = m.srv.Serve(lis)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("exprd MCP stopped serving", "err", err)
		}
	}()
	log.Info("exprd MCP serving", "addr", lis.Addr().String(), "path", mcpserve.Path, "expose", c.mcp.expose, "auth", tokens != nil, "tls", c.tlsCert != "")
	return m, nil
}

// drain stops taking requests and lets those in flight finish until ctx
// ends, then closes them; the channel is closed when it is done.
func (m *mcpServer) drain(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if m == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		if err := m.srv.Shutdown(ctx); err != nil {
			_ = m.srv.Close()
		}
	}()
	return done
}

// close closes the server at once (a start that failed later).
func (m *mcpServer) close() {
	if m != nil {
		_ = m.srv.Close()
	}
}
