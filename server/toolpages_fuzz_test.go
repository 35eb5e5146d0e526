package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// tokenQuery finds every tool of tokenRegistry.
const tokenQuery = "weather in a city"

// The fingerprints ListTools and SearchTools give their tokens; the
// target's setup checks them against tokens the server issues, so a
// change of the token's format fails here rather than leaving the forged
// tokens below refused at their first check.
func listFingerprint(manual string) string { return "list\x00" + utcp.SanitizeManualName(manual) }

func searchFingerprint(query string) string { return "search\x00" + query }

// tokenRegistry serves manuals alpha (8 tools) and beta (4), every tool
// about the weather.
func tokenRegistry(f *testing.F) *toolRegistry {
	f.Helper()
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { reg.Close() })
	for _, m := range []struct {
		name string
		n    int
	}{{"alpha", 8}, {"beta", 4}} {
		var tools []any
		for i := range m.n {
			tools = append(tools, map[string]any{"name": fmt.Sprintf("t%03d", i),
				"description":        fmt.Sprintf("Weather in a city, take %d.", i),
				"inputs":             map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
				"tool_call_template": map[string]any{"call_template_type": "http", "url": "http://127.0.0.1:9/weather"}})
		}
		raw, err := json.Marshal(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": tools})
		if err != nil {
			f.Fatal(err)
		}
		if _, err := reg.Register(context.Background(), m.name, utcp.FromText(string(raw)).AllowProtocols("http")); err != nil {
			f.Fatalf("Register %s: %v", m.name, err)
		}
	}
	return &toolRegistry{reg: reg}
}

// wantTokenRefused fails unless err is what a bad page token gets:
// INVALID_ARGUMENT, reason INVALID_FIELD, a BadRequest naming page_token.
func wantTokenRefused(t *testing.T, tok string, err error) {
	t.Helper()
	st := status.Convert(err)
	var reason, field string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 {
				field = v[0].GetField()
			}
		}
	}
	if tok == "" || st.Code() != codes.InvalidArgument || reason != exprdv1.ErrorReason_INVALID_FIELD.String() || field != "page_token" {
		t.Fatalf("token %q: got %v (reason %q, field %q), want INVALID_ARGUMENT %s naming page_token",
			tok, err, reason, field, exprdv1.ErrorReason_INVALID_FIELD.String())
	}
}

// FuzzPageToken: a page token of ListTools or SearchTools from a client,
// garbled or forged, either starts a page the server can serve or is
// refused with INVALID_ARGUMENT naming page_token; never a panic or
// another error. Each input is sent as it is and as a forged token: the
// request's fingerprint (public, not a secret) followed by next, which a
// list must read as any name to start after, and a search only as an
// offset of 4 bytes under MaxSearchDepth.
func FuzzPageToken(f *testing.F) {
	tr := tokenRegistry(f)
	ctx := context.Background()
	list, err := tr.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "alpha", PageSize: 1})
	if err != nil {
		f.Fatal(err)
	}
	if got, want := list.GetNextPageToken(), pageToken(listFingerprint("alpha"), "alpha.t000"); got != want {
		f.Fatalf("ListTools' token is %q, the target forges %q: update listFingerprint", got, want)
	}
	search, err := tr.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: tokenQuery, PageSize: 1})
	if err != nil {
		f.Fatal(err)
	}
	if got, want := search.GetNextPageToken(), pageToken(searchFingerprint(tokenQuery), "\x00\x00\x00\x01"); got != want {
		f.Fatalf("SearchTools' token is %q, the target forges %q: update searchFingerprint", got, want)
	}

	f.Add("", "", []byte(nil), uint32(0))
	f.Add(list.GetNextPageToken(), "alpha", []byte("alpha.t003"), uint32(2))
	f.Add(search.GetNextPageToken(), "", []byte{0, 0, 0, MaxSearchDepth - 1}, uint32(MaxSearchPageSize+1))
	f.Add(search.GetNextPageToken()+"=", "beta", []byte{0, 0, 0, MaxSearchDepth}, uint32(1))
	f.Add("not base64!", "beta.", []byte("\xff"), uint32(3))
	f.Add("AAAA", "ALPHA", []byte{0, 0, 1}, uint32(0))
	// An offset past every int32: negative where int has 32 bits.
	f.Add(strings.Repeat("_", 20), "nonesuch", []byte{0xff, 0xff, 0xff, 0xff}, uint32(1))
	f.Fuzz(func(t *testing.T, tok, manual string, next []byte, size uint32) {
		forged := pageToken(listFingerprint(manual), string(next))
		for _, tok := range []string{tok, forged} {
			req := &exprdv1.ListToolsRequest{Manual: manual, PageSize: size, PageToken: tok}
			resp, err := tr.ListTools(ctx, req)
			if err != nil {
				if tok == forged {
					t.Fatalf("forged list token after %q: got %v, want a page", next, err)
				}
				wantTokenRefused(t, tok, err)
				continue
			}
			after, _ := readPageToken(tok, listFingerprint(manual))
			checkListPage(t, req, after, resp)
			if resp.GetNextPageToken() == "" {
				continue
			}
			req.PageToken = resp.GetNextPageToken()
			more, err := tr.ListTools(ctx, req)
			if err != nil {
				t.Fatalf("the token ListTools gave: %v", err)
			}
			checkListPage(t, req, resp.GetTools()[len(resp.GetTools())-1].GetName(), more)
		}

		forged = pageToken(searchFingerprint(tokenQuery), string(next))
		for _, tok := range []string{tok, forged} {
			req := &exprdv1.SearchToolsRequest{Query: tokenQuery, PageSize: size, PageToken: tok}
			resp, err := tr.SearchTools(ctx, req)
			if tok == forged {
				offsetOK := len(next) == 0 || len(next) == 4 && binary.BigEndian.Uint32(next) < MaxSearchDepth
				if (err == nil) != offsetOK {
					t.Fatalf("forged search token of offset %x: got %v, want accepted %v", next, err, offsetOK)
				}
			}
			if err != nil {
				wantTokenRefused(t, tok, err)
				continue
			}
			if n, max := len(resp.GetTools()), pageSize(size, DefaultSearchPageSize, MaxSearchPageSize); n > max {
				t.Fatalf("search page of %d tools, want at most %d", n, max)
			}
			if resp.GetNextPageToken() == "" {
				continue
			}
			req.PageToken = resp.GetNextPageToken()
			if _, err := tr.SearchTools(ctx, req); err != nil {
				t.Fatalf("the token SearchTools gave: %v", err)
			}
		}
	})
}

// checkListPage fails unless resp is a page of req: at most its size, in
// name order, every name after after, every tool of req's manual.
func checkListPage(t *testing.T, req *exprdv1.ListToolsRequest, after string, resp *exprdv1.ListToolsResponse) {
	t.Helper()
	tools := resp.GetTools()
	if max := pageSize(req.GetPageSize(), DefaultListPageSize, MaxListPageSize); len(tools) > max {
		t.Fatalf("list page of %d tools, want at most %d", len(tools), max)
	}
	if resp.GetNextPageToken() != "" && len(tools) == 0 {
		t.Fatalf("an empty list page with a next page")
	}
	manual := utcp.SanitizeManualName(req.GetManual())
	prev := after
	for _, tool := range tools {
		name := tool.GetName()
		if name <= prev {
			t.Fatalf("list page after %q: %q follows %q", after, name, prev)
		}
		if manual != "" && !strings.HasPrefix(name, manual+".") {
			t.Fatalf("list page of manual %q holds %q", manual, name)
		}
		prev = name
	}
}
