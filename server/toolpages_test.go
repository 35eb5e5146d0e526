package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

// pageSchemas are the schemas every tool of pagedManual declares.
const (
	pageInputs  = `{"type":"object","properties":{"city":{"type":"string"}}}`
	pageOutputs = `{"type":"object","properties":{"ok":{"type":"boolean"}}}`
)

// pagedManual is a manual of n tools, t000 on, each an http GET of url;
// desc(i) is tool i's description.
func pagedManual(url string, n int, desc func(int) string) []byte {
	var ts []any
	for i := range n {
		ts = append(ts, map[string]any{"name": fmt.Sprintf("t%03d", i), "description": desc(i),
			"inputs": json.RawMessage(pageInputs), "outputs": json.RawMessage(pageOutputs),
			"tool_call_template": map[string]any{"call_template_type": "http", "url": url}})
	}
	raw, _ := json.Marshal(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": ts})
	return raw
}

// pagedRegistry serves a registry of the manuals, name → manual JSON.
func pagedRegistry(t *testing.T, manuals map[string][]byte) exprdv1.ToolRegistryClient {
	t.Helper()
	c, _ := registryClient(t)
	for name, m := range manuals {
		if _, err := c.RegisterManual(context.Background(), inline(name, m, false)); err != nil {
			t.Fatalf("RegisterManual %s: %v", name, err)
		}
	}
	return c
}

func toolNames(tools []*exprdv1.ToolInfo) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.GetName())
	}
	return names
}

// wantPageTokenError fails unless err is INVALID_ARGUMENT with a
// BadRequest naming page_token.
func wantPageTokenError(t *testing.T, err error) {
	t.Helper()
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || badRequestField(st) != "page_token" {
		t.Errorf("got %v (field %q), want InvalidArgument naming page_token", err, badRequestField(st))
	}
}

// ListTools pages the registry by name: page_size 0 is 50, more than 500
// is 500; a page's token continues after its last name, and only with the
// same manual (issue: ListTools answered every tool, schemas included, at
// once).
func TestListToolsPages(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	desc := func(i int) string { return fmt.Sprintf("Tool %d.", i) }
	const big = server.MaxListPageSize + 100
	c := pagedRegistry(t, map[string][]byte{
		"alpha": pagedManual(p.URL, big, desc),
		"beta":  pagedManual(p.URL, 3, desc),
		"gamma": pagedManual(p.URL, 2, desc),
	})
	var all []string
	for _, m := range []struct {
		name string
		n    int
	}{{"alpha", big}, {"beta", 3}, {"gamma", 2}} {
		for i := range m.n {
			all = append(all, fmt.Sprintf("%s.t%03d", m.name, i))
		}
	}
	ctx := context.Background()

	t.Run("page sizes", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			manual   string
			pageSize uint32
			want     []string
			next     bool
		}{
			{"0 is the default", "", 0, all[:server.DefaultListPageSize], true},
			{"1", "", 1, all[:1], true},
			{"at the maximum", "", server.MaxListPageSize, all[:server.MaxListPageSize], true},
			{"one past the maximum", "", server.MaxListPageSize + 1, all[:server.MaxListPageSize], true},
			{"far past the maximum", "", math.MaxUint32, all[:server.MaxListPageSize], true},
			{"exactly a manual's tools, others after", "beta", 3, []string{"beta.t000", "beta.t001", "beta.t002"}, false},
			{"one less than a manual's tools", "beta", 2, []string{"beta.t000", "beta.t001"}, true},
			{"more than a manual's tools", "gamma", 10, []string{"gamma.t000", "gamma.t001"}, false},
			{"a manual of none", "delta", 10, nil, false},
		}
		for _, tc := range tests {
			resp, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: tc.manual, PageSize: tc.pageSize})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := toolNames(resp.GetTools()); !slices.Equal(got, tc.want) || (resp.GetNextPageToken() != "") != tc.next {
				t.Errorf("%s: got %d tools (%v…), next page %v; want %d, next page %v",
					tc.name, len(got), got[:min(len(got), 3)], resp.GetNextPageToken() != "", len(tc.want), tc.next)
			}
		}
	})

	t.Run("every page walked", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			manual   string
			pageSize uint32
			want     []string
		}{
			{"", 7, all},
			{"", 0, all},
			{"", server.MaxListPageSize, all},
			{"alpha", 9, all[:big]},
			{"beta", 1, all[big : big+3]},
		}
		for _, tc := range tests {
			var got []string
			token, pages := "", 0
			for {
				resp, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: tc.manual, PageSize: tc.pageSize, PageToken: token})
				if err != nil {
					t.Fatalf("manual %q page %d: %v", tc.manual, pages, err)
				}
				pages++
				got = append(got, toolNames(resp.GetTools())...)
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			size := int(tc.pageSize)
			if size == 0 {
				size = server.DefaultListPageSize
			}
			if !slices.Equal(got, tc.want) || pages != (len(tc.want)+size-1)/size {
				t.Errorf("manual %q, page size %d: got %d tools in %d pages, want %d once each, in name order, in %d pages",
					tc.manual, tc.pageSize, len(got), pages, len(tc.want), (len(tc.want)+size-1)/size)
			}
		}
	})

	t.Run("a token of another request", func(t *testing.T) {
		t.Parallel()
		first, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "alpha", PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		search, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "tool", PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		tok := first.GetNextPageToken()
		for _, tc := range []struct {
			name   string
			manual string
			token  string
		}{
			{"another manual", "beta", tok},
			{"no manual", "", tok},
			{"not base64", "alpha", "!!not a token!!"},
			{"too short", "alpha", "YWJj"},
			{"a search's", "alpha", search.GetNextPageToken()},
		} {
			_, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: tc.manual, PageSize: 1, PageToken: tc.token})
			if wantPageTokenError(t, err); t.Failed() {
				t.Fatalf("%s", tc.name)
			}
		}
		// The manual as registered or normalised is the same request.
		if _, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "alpha", PageSize: 5, PageToken: tok}); err != nil {
			t.Errorf("the same manual, another page size: %v", err)
		}
	})
}

// A list or a search shows the schemas with TOOL_VIEW_FULL only.
func TestToolViews(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	c := pagedRegistry(t, map[string][]byte{"w": pagedManual(p.URL, 2, func(int) string { return "The weather." })})
	ctx := context.Background()
	for _, tc := range []struct {
		view    exprdv1.ToolView
		schemas bool
	}{
		{exprdv1.ToolView_TOOL_VIEW_UNSPECIFIED, false},
		{exprdv1.ToolView_TOOL_VIEW_BASIC, false},
		{exprdv1.ToolView_TOOL_VIEW_FULL, true},
	} {
		list, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{View: tc.view})
		if err != nil {
			t.Fatal(err)
		}
		search, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "weather", View: tc.view})
		if err != nil {
			t.Fatal(err)
		}
		tools := list.GetTools()
		for _, s := range search.GetTools() {
			tools = append(tools, s.GetTool())
		}
		if len(tools) != 4 {
			t.Fatalf("%v: got %d tools, want 2 listed and 2 found", tc.view, len(tools))
		}
		for _, tool := range tools {
			if tool.GetName() == "" || tool.GetManual() != "w" || tool.GetDescription() != "The weather." || tool.GetCallTemplateType() != "http" {
				t.Errorf("%v: got %v, want name, manual, description and transport in every view", tc.view, tool)
			}
			in, out := tool.GetInputSchemaJson(), tool.GetOutputSchemaJson()
			if !tc.schemas {
				if in != "" || out != "" {
					t.Errorf("%v: got schemas %s %s, want none", tc.view, in, out)
				}
				continue
			}
			if !jsonEqual(in, pageInputs) || !jsonEqual(out, pageOutputs) {
				t.Errorf("%v: got schemas %s %s, want %s %s", tc.view, in, out, pageInputs, pageOutputs)
			}
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// SearchTools pages its ranking: page_size 0 is 10, more than 100 is 100;
// the next page goes on where the last ended, never repeating, and the
// ranking ends 100 deep (issue: a limit, and no way past it).
func TestSearchToolsPages(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	// Descriptions of several lengths, so that the ranking is not the
	// names' order.
	weather := func(i int) string {
		return "The weather report " + strings.Repeat("for the city ", i%7) + fmt.Sprintf("number %d.", i)
	}
	const many = server.MaxSearchDepth + 50
	c := pagedRegistry(t, map[string][]byte{
		"w": pagedManual(p.URL, many, weather),
		"z": pagedManual(p.URL, 3, func(i int) string { return fmt.Sprintf("Zebra crossing %d.", i) }),
	})
	ctx := context.Background()
	search := func(t *testing.T, query string, size uint32, token string) *exprdv1.SearchToolsResponse {
		t.Helper()
		resp, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: query, PageSize: size, PageToken: token})
		if err != nil {
			t.Fatalf("SearchTools %q size %d: %v", query, size, err)
		}
		return resp
	}
	scored := func(r *exprdv1.SearchToolsResponse) []string {
		var names []string
		for _, s := range r.GetTools() {
			names = append(names, s.GetTool().GetName())
		}
		return names
	}
	// The whole ranking, as deep as it goes, in one page.
	ranking := scored(search(t, "weather report", server.MaxSearchPageSize, ""))
	if len(ranking) != server.MaxSearchDepth {
		t.Fatalf("got %d results, want the ranking %d deep", len(ranking), server.MaxSearchDepth)
	}
	if slices.IsSorted(ranking) {
		t.Fatalf("the ranking is in name order: the test does not tell a ranking from a list")
	}

	t.Run("page sizes", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			query    string
			pageSize uint32
			want     int
			next     bool
		}{
			{"0 is the default", "weather report", 0, server.DefaultSearchPageSize, true},
			{"1", "weather report", 1, 1, true},
			{"at the maximum, which is the depth", "weather report", server.MaxSearchPageSize, server.MaxSearchDepth, false},
			{"one past the maximum", "weather report", server.MaxSearchPageSize + 1, server.MaxSearchPageSize, false},
			{"far past the maximum", "weather report", math.MaxUint32, server.MaxSearchPageSize, false},
			{"exactly the results", "zebra", 3, 3, false},
			{"one less than the results", "zebra", 2, 2, true},
			{"more than the results", "zebra", 0, 3, false},
			{"no results", "quokka", 0, 0, false},
		}
		for _, tc := range tests {
			resp := search(t, tc.query, tc.pageSize, "")
			if got := scored(resp); len(got) != tc.want || (resp.GetNextPageToken() != "") != tc.next {
				t.Errorf("%s: got %d results, next page %v; want %d, next page %v", tc.name, len(got), resp.GetNextPageToken() != "", tc.want, tc.next)
			}
			if tc.query == "weather report" && !slices.Equal(scored(resp), ranking[:tc.want]) {
				t.Errorf("%s: got %v, want the ranking's first %d", tc.name, scored(resp), tc.want)
			}
		}
	})

	t.Run("every page walked", func(t *testing.T) {
		t.Parallel()
		for _, size := range []uint32{7, 30, 0, 50, 99} {
			var got []string
			var sizes []int
			last := math.Inf(1)
			token := ""
			for {
				resp := search(t, "weather report", size, token)
				got = append(got, scored(resp)...)
				sizes = append(sizes, len(resp.GetTools()))
				for _, s := range resp.GetTools() {
					if s.GetScore() > last {
						t.Errorf("page size %d: score %v after %v, want the ranking's order across pages", size, s.GetScore(), last)
					}
					last = s.GetScore()
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			if !slices.Equal(got, ranking) {
				t.Errorf("page size %d: got %d results over pages %v, want the ranking's %d, each once", size, len(got), sizes, len(ranking))
			}
		}
	})

	t.Run("a token of another request", func(t *testing.T) {
		t.Parallel()
		tok := search(t, "weather report", 5, "").GetNextPageToken()
		list, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, query, token string
		}{
			{"another query", "weather", tok},
			{"another query of the same words", "report weather", tok},
			{"not base64", "weather report", "!!not a token!!"},
			{"too short", "weather report", "YWJj"},
			{"cut", "weather report", tok[:len(tok)-2]},
			{"a list's", "weather report", list.GetNextPageToken()},
		} {
			_, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: tc.query, PageSize: 5, PageToken: tc.token})
			if wantPageTokenError(t, err); t.Failed() {
				t.Fatalf("%s", tc.name)
			}
		}
		// The same query with another page size goes on from the token.
		resp := search(t, "weather report", 10, tok)
		if !slices.Equal(scored(resp), ranking[5:15]) {
			t.Errorf("another page size: got %v, want the ranking's 6th to 15th", scored(resp))
		}
	})
}

// A schema whose strings hold bytes that are not UTF-8, as a provider's
// manual may give it, is listed and found as valid UTF-8, each such byte a
// U+FFFD (issue: a proto string must be UTF-8: the answer failed to
// marshal and the client saw a transport error).
func TestToolSchemaInvalidUTF8(t *testing.T) {
	t.Parallel()
	manual := "{\"utcp_version\": \"1.0.1\", \"manual_version\": \"1.0.0\", \"tools\": [{\"name\": \"cafe\", \"description\": \"Caf\xe9 menu.\"," +
		"\"inputs\": {\"type\": \"object\", \"properties\": {\"dish\": {\"type\": \"string\", \"description\": \"A dish of the caf\xe9.\"}}}," +
		"\"outputs\": {\"type\": \"object\", \"description\": \"\xff\xfe\"}," +
		"\"tool_call_template\": {\"call_template_type\": \"http\", \"url\": \"http://127.0.0.1:9/cafe\"}}]}"
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(manual))
	}))
	t.Cleanup(p.Close)
	c, _ := registryClient(t)
	ctx := context.Background()
	if _, err := c.RegisterManual(ctx, fromURL("latin", p.URL, false)); err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	list, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{View: exprdv1.ToolView_TOOL_VIEW_FULL})
	if err != nil {
		t.Fatalf("ListTools: got %v, want the tool", err)
	}
	found, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "menu", View: exprdv1.ToolView_TOOL_VIEW_FULL})
	if err != nil {
		t.Fatalf("SearchTools: got %v, want the tool", err)
	}
	if len(list.GetTools()) != 1 || len(found.GetTools()) != 1 {
		t.Fatalf("got %v listed and %v found, want the tool once each", list.GetTools(), found.GetTools())
	}
	for _, tool := range []*exprdv1.ToolInfo{list.GetTools()[0], found.GetTools()[0].GetTool()} {
		for _, js := range []string{tool.GetDescription(), tool.GetInputSchemaJson(), tool.GetOutputSchemaJson()} {
			if !utf8.ValidString(js) || !strings.Contains(js, "\uFFFD") {
				t.Errorf("got %q, want valid UTF-8 with U+FFFD for each byte that was not", js)
			}
		}
		if !json.Valid([]byte(tool.GetInputSchemaJson())) || !json.Valid([]byte(tool.GetOutputSchemaJson())) {
			t.Errorf("got schemas %s %s, want valid JSON", tool.GetInputSchemaJson(), tool.GetOutputSchemaJson())
		}
	}
}

// A page ends before its tools pass MaxPageBytes, with a token for the
// rest, so that a page with schemas fits a client's default 4 MiB receive
// limit; a page holds at least one tool however large (issue: 500 tools
// with schemas in one page).
func TestPagesEndBeforeMaxPageBytes(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	// Descriptions of 300 KB: seven fit in 2 MiB, and 40 would be 12 MB.
	desc := func(i int) string {
		return fmt.Sprintf("Weather tool %d. %s", i, strings.Repeat("forecast ", 300_000/9))
	}
	c := pagedRegistry(t, map[string][]byte{"heavy": pagedManual(p.URL, 40, desc)})
	ctx := context.Background()
	var names []string
	pages := 0
	for req := (&exprdv1.ListToolsRequest{PageSize: 50, View: exprdv1.ToolView_TOOL_VIEW_FULL}); ; pages++ {
		resp, err := c.ListTools(ctx, req)
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		if n := proto.Size(resp); n > server.MaxPageBytes+64<<10 {
			t.Errorf("page %d is %d bytes, over %d", pages, n, server.MaxPageBytes)
		}
		if len(resp.GetTools()) == 0 {
			t.Fatalf("page %d is empty", pages)
		}
		names = append(names, toolNames(resp.GetTools())...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if len(names) != 40 || !slices.IsSorted(names) || pages < 5 {
		t.Errorf("got %d tools in %d pages (sorted: %t), want 40 in at least 6", len(names), pages+1, slices.IsSorted(names))
	}
	resp, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "weather forecast", PageSize: 40, View: exprdv1.ToolView_TOOL_VIEW_FULL})
	if err != nil {
		t.Fatalf("SearchTools: %v", err)
	}
	if n, got := proto.Size(resp), len(resp.GetTools()); n > server.MaxPageBytes+64<<10 || got == 0 || got == 40 || resp.GetNextPageToken() == "" {
		t.Errorf("search page: %d bytes, %d tools, token %q: want under %d bytes, some tools and a token", n, got, resp.GetNextPageToken(), server.MaxPageBytes)
	}
}
