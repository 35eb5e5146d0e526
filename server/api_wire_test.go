package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/utcpall"
)

// A tool converted from an OpenAPI document, registered and called through
// gRPC, sends its array query parameter as the document says (form,
// explode: tags=a&tags=b; before: tags[]=a&tags[]=b) and the reference
// client's Accept.
func TestOpenAPIToolSendsTheDocumentsQueryStyle(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var query, accept string
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query, accept = r.URL.RawQuery, r.Header.Get("Accept")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"id":1}]`))
	}))
	t.Cleanup(p.Close)
	doc, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "pets", "version": "1"},
		"servers": []any{map[string]any{"url": p.URL}},
		"paths": map[string]any{"/pets": map[string]any{"get": map[string]any{
			"operationId": "findPets",
			"parameters": []any{
				map[string]any{"name": "tags", "in": "query", "schema": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
				map[string]any{"name": "ids", "in": "query", "explode": false, "schema": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}},
			},
			"responses": map[string]any{"200": map[string]any{"description": "pets"}},
		}}},
	})
	reg, err := utcpall.New(loopbackEgress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth()))
	ctx := context.Background()
	if _, err := exprdv1.NewToolRegistryClient(conn).RegisterManual(ctx, inline("pets", doc, false)); err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	resp, err := exprdv1.NewCodeModeClient(conn).Execute(ctx, &exprdv1.ExecuteRequest{
		Code:  `codemode.CallTool("pets.findPets", {"tags": ["dog", "cat"], "ids": [1, 2]})`,
		Tools: []string{"pets.findPets"},
	})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("Execute: %v %v", err, resp.GetError())
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "ids=1,2&tags=dog&tags=cat"; query != want && query != "tags=dog&tags=cat&ids=1,2" {
		t.Errorf("the provider got query %q, want %q (in either order)", query, want)
	}
	if accept != httptransport.DefaultAccept {
		t.Errorf("the provider got Accept %q, want %q", accept, httptransport.DefaultAccept)
	}
}

// A turn with no tools sends the model neither tools nor tool_choice
// (issue: "tool_choice":"auto" with no tools, which some servers refuse).
func TestAgentLoopNoToolsSendsNoToolChoice(t *testing.T) {
	t.Parallel()
	c, ms := agentServerModel(t, scripted.Script{Turns: []scripted.Turn{{Text: "hello"}}})
	if _, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi")}), nil); err != nil {
		t.Fatal(err)
	}
	reqs := ms.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests, want 1", len(reqs))
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tools", "tool_choice"} {
		if v, ok := body[k]; ok {
			t.Errorf("the request holds %q: %s", k, v)
		}
	}
}
