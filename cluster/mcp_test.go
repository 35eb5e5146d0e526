package cluster_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/cluster/etcdtest"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/mcpeverything"
)

// TestMCPManualSharedByReplicas registers an MCP server's tools (the
// reference server, on loopback) on one replica: the store shares the
// manual, and the other replica serves and calls them, connecting to the
// server itself.
func TestMCPManualSharedByReplicas(t *testing.T) {
	url := mcpeverything.StartHTTP(t)
	etcd := etcdtest.Start(t)
	a := startReplica(t, "A", etcd.Endpoint())
	b := startReplica(t, "B", etcd.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := register(ctx, a, "ev", mcpeverything.HTTPManual("http", url), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(resp.GetTools(), "ev.http.echo") {
		t.Fatalf("registered %v", resp.GetTools())
	}
	t.Logf("registered on A, listed on B after %v", b.waitTools(t, "ev", resp.GetTools()))
	for _, r := range []*replica{a, b} {
		out, err := r.code.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("ev.http.echo", {"message": "hi"})`, Tools: []string{"ev.http.echo"}})
		if err != nil || out.GetError() != nil || out.GetValueJson() != `"Echo: hi"` {
			t.Errorf("%s: echo: %v, %v", r.name, out, err)
		}
	}
	list, err := b.reg.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "ev", View: exprdv1.ToolView_TOOL_VIEW_FULL, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range list.GetTools() {
		if ti.GetName() == "ev.http.get-structured-content" && (ti.GetTitle() == "" || !strings.Contains(ti.GetOutputSchemaJson(), "temperature")) {
			t.Errorf("B's definition: %v", ti)
		}
	}
}
