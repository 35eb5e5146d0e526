package server_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// adminServer serves a registry holding the operator's "math" manual,
// with opts.
func adminServer(t *testing.T, regOpts []utcp.Option, opts ...server.Option) (exprdv1.ToolRegistryClient, string) {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reg, err := utcpall.New(append([]utcp.Option{loopbackEgress}, regOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	conn := serve(t, newServer(t, append([]server.Option{server.WithRegistry(reg)}, opts...)...))
	return exprdv1.NewToolRegistryClient(conn), m.URL() + "/utcp"
}

func withToken(token string) context.Context {
	ctx := context.Background()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

// Changing the registry is an admin act: with auth off it is refused
// unless the operator allowed it, with auth on it needs registry.write
// ("*" does not grant it). Reading stays open.
func TestRegistryWritesNeedTheAdminScope(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader(
		"reader tok-reader-0123456789 toolregistry; root tok-root-000000000000 *; admin tok-admin-00000000000 registry.write,toolregistry"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		opts      []server.Option
		token     string
		wantWrite codes.Code
		wantRead  codes.Code
	}{
		{"auth off", nil, "", codes.FailedPrecondition, codes.OK},
		{"auth off, writes allowed by the operator", []server.Option{server.WithRegistryWritesWithoutAuth()}, "", codes.OK, codes.OK},
		{"auth on, no token", []server.Option{server.WithAuth(tokens)}, "", codes.Unauthenticated, codes.Unauthenticated},
		{"auth on, a reader", []server.Option{server.WithAuth(tokens)}, "tok-reader-0123456789", codes.PermissionDenied, codes.OK},
		{"auth on, every service", []server.Option{server.WithAuth(tokens)}, "tok-root-000000000000", codes.PermissionDenied, codes.OK},
		{"auth on, registry.write", []server.Option{server.WithAuth(tokens)}, "tok-admin-00000000000", codes.OK, codes.OK},
		{"auth on ignores the no-auth flag", []server.Option{server.WithAuth(tokens), server.WithRegistryWritesWithoutAuth()}, "tok-reader-0123456789", codes.PermissionDenied, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, url := adminServer(t, nil, tc.opts...)
			ctx := withToken(tc.token)
			_, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math2", Source: &exprdv1.RegisterManualRequest_Url{Url: url}})
			if got := status.Code(err); got != tc.wantWrite {
				t.Fatalf("RegisterManual: got %v, want %v", err, tc.wantWrite)
			}
			if tc.wantWrite == codes.FailedPrecondition {
				pf := preconditionFailure(err)
				if pf == nil || len(pf.GetViolations()) != 1 || !strings.Contains(pf.GetViolations()[0].GetDescription(), server.FlagRegistryWritesWithoutAuth) {
					t.Errorf("PreconditionFailure: got %v, want one saying how to allow writes", pf)
				}
			}
			_, err = c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "math2"})
			if got := status.Code(err); got != tc.wantWrite { // math2 was registered just above when writes work
				t.Errorf("DeregisterManual: got %v, want %v", err, tc.wantWrite)
			}
			_, err = c.ListTools(ctx, &exprdv1.ListToolsRequest{})
			if got := status.Code(err); got != tc.wantRead {
				t.Errorf("ListTools: got %v, want %v", err, tc.wantRead)
			}
			_, err = c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "add"})
			if got := status.Code(err); got != tc.wantRead {
				t.Errorf("SearchTools: got %v, want %v", err, tc.wantRead)
			}
		})
	}
}

func preconditionFailure(err error) *errdetails.PreconditionFailure {
	for _, d := range status.Convert(err).Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			return pf
		}
	}
	return nil
}

// Manuals the operator loaded cannot be replaced or removed over the API.
func TestOperatorManualsAreReadOnly(t *testing.T) {
	t.Parallel()
	c, url := adminServer(t, nil, server.WithRegistryWritesWithoutAuth())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"replace", func() error {
			_, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math", Replace: true, Source: &exprdv1.RegisterManualRequest_Url{Url: url}})
			return err
		}, codes.PermissionDenied},
		{"replace under another spelling", func() error {
			_, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math", Replace: true, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: `{"utcp_version": "1.0.1", "tools": []}`}})
			return err
		}, codes.PermissionDenied},
		{"register over it", func() error {
			_, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math", Source: &exprdv1.RegisterManualRequest_Url{Url: url}})
			return err
		}, codes.AlreadyExists},
		{"deregister", func() error {
			_, err := c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "math"})
			return err
		}, codes.PermissionDenied},
	} {
		if got := status.Code(tc.call()); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	list, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "math"})
	if err != nil || len(list.GetTools()) != 5 {
		t.Errorf("math after the refused writes: got %d tools, %v; want its 5", len(list.GetTools()), err)
	}
}

// The registry's bounds on manuals and tools hold over the API: the
// registration past one is RESOURCE_EXHAUSTED with a QuotaFailure, at the
// limit it is accepted.
func TestRegistryCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opt     utcp.Option
		subject string
	}{
		{"manuals", utcp.WithMaxManuals(2), "registry_max_manuals"},
		{"tools", utcp.WithMaxTools(10), "registry_max_tools"}, // math has 5
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, url := adminServer(t, []utcp.Option{tc.opt}, server.WithRegistryWritesWithoutAuth())
			ctx := context.Background()
			if _, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "at_limit", Source: &exprdv1.RegisterManualRequest_Url{Url: url}}); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			_, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "past_limit", Source: &exprdv1.RegisterManualRequest_Url{Url: url}})
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("past the limit: got %v, want ResourceExhausted", err)
			}
			var qf *errdetails.QuotaFailure
			for _, d := range status.Convert(err).Details() {
				if q, ok := d.(*errdetails.QuotaFailure); ok {
					qf = q
				}
			}
			if qf == nil || qf.GetViolations()[0].GetSubject() != tc.subject {
				t.Errorf("QuotaFailure: got %v, want subject %s", qf, tc.subject)
			}
			// A replace that does not grow the registry is still allowed.
			if _, err := c.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "at_limit", Replace: true, Source: &exprdv1.RegisterManualRequest_Url{Url: url}}); err != nil {
				t.Errorf("replace at the limit: %v", err)
			}
		})
	}
}

// SearchTools refuses a query past the search limits with
// INVALID_ARGUMENT naming the field; at the limits it answers.
func TestSearchToolsLimits(t *testing.T) {
	t.Parallel()
	c, _ := adminServer(t, nil)
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%d ", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, query string
		want        codes.Code
	}{
		{"bytes at the limit", "add" + strings.Repeat(" ", utcp.MaxQueryBytes-3), codes.OK},
		{"bytes past the limit", "add" + strings.Repeat(" ", utcp.MaxQueryBytes-2), codes.InvalidArgument},
		{"terms at the limit", words(utcp.MaxQueryTerms), codes.OK},
		{"terms past the limit", words(utcp.MaxQueryTerms + 1), codes.InvalidArgument},
	} {
		_, err := c.SearchTools(context.Background(), &exprdv1.SearchToolsRequest{Query: tc.query})
		if status.Code(err) != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// The server's bounds refuse values that bound nothing, naming them.
func TestBoundOptionsRefuseBadValues(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]server.Option{
		"stream window under 64 KiB":     server.WithFlowControlWindows(64<<10-1, 16<<20),
		"connection window under 64 KiB": server.WithFlowControlWindows(1<<20, 1000),
		"no rate buckets":                server.WithMaxRateBuckets(0),
		"an invalid proxy prefix":        server.WithTrustedProxies(netip.Prefix{}),
	} {
		if _, err := server.New(opt); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
	}
	if _, err := server.New(server.WithFlowControlWindows(64<<10, 64<<10)); err != nil {
		t.Errorf("windows at the 64 KiB minimum: %v", err)
	}
}
