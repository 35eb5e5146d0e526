package main

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
)

const demoTools = `NAME             TRANSPORT  DESCRIPTION
catalog.get      grpc       One product by id: {id}.
catalog.restock  grpc       Streams restock events for a product: {id, times}.
catalog.search   grpc       Finds products whose name contains the query: {query}.
math.add         http       Adds two numbers: a + b.
math.divide      http       Divides a by b.
math.multiply    http       Multiplies two numbers: a × b.
math.sqrt        http       The square root of a.
math.subtract    http       Subtracts b from a: a - b.
`

// The math tools' schemas, as tools list --full prints them.
const (
	mathBinarySchemas = `  input:  {"additionalProperties":false,"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"type":"object"}
  output: {"properties":{"result":{"type":"number"}},"type":"object"}
`
	mathSqrtSchemas = `  input:  {"additionalProperties":false,"properties":{"a":{"type":"number"}},"required":["a"],"type":"object"}
  output: {"properties":{"result":{"type":"number"}},"type":"object"}
`
	mathToolsFull = `NAME           TRANSPORT  DESCRIPTION
math.add       http       Adds two numbers: a + b.
math.divide    http       Divides a by b.
math.multiply  http       Multiplies two numbers: a × b.
math.sqrt      http       The square root of a.
math.subtract  http       Subtracts b from a: a - b.
` + "\nmath.add\n" + mathBinarySchemas + "\nmath.divide\n" + mathBinarySchemas + "\nmath.multiply\n" + mathBinarySchemas +
		"\nmath.sqrt\n" + mathSqrtSchemas + "\nmath.subtract\n" + mathBinarySchemas
)

// toolLines parses tools list/search --json back: the names, and the
// scores when there are. Each line must have an input schema when
// wantSchemas, and none when not.
func toolLines(t *testing.T, stdout string, wantSchemas bool) (names []string, scores []float64) {
	t.Helper()
	for line := range strings.Lines(stdout) {
		var tool struct {
			Name             string          `json:"name"`
			Manual           string          `json:"manual"`
			Description      string          `json:"description"`
			Tags             []string        `json:"tags"`
			CallTemplateType string          `json:"call_template_type"`
			InputSchema      json.RawMessage `json:"input_schema"`
			OutputSchema     json.RawMessage `json:"output_schema"`
			Score            *float64        `json:"score"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tool); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if tool.Manual == "" || !strings.HasPrefix(tool.Name, tool.Manual+".") || tool.CallTemplateType == "" || tool.Tags == nil {
			t.Errorf("line %q: want a name under its manual, a transport and tags", line)
		}
		if got := len(tool.InputSchema) > 0; got != wantSchemas {
			t.Errorf("line %q: got an input schema %t, want %t", line, got, wantSchemas)
		}
		names = append(names, tool.Name)
		if tool.Score != nil {
			scores = append(scores, *tool.Score)
		}
	}
	return names, scores
}

func TestToolsListAndSearch(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		// With --json: the tools' names in order, whether they are
		// scored (best first), and whether they carry their schemas.
		wantNames   []string
		wantScored  bool
		wantSchemas bool
	}{
		{name: "list", args: []string{"list"}, wantStdout: demoTools},
		{
			name:       "list one manual",
			args:       []string{"list", "--manual", "catalog"},
			wantStdout: strings.Join(strings.SplitAfter(demoTools, "\n")[:4], ""),
		},
		{name: "list an unknown manual", args: []string{"list", "--manual", "nope"}, wantStdout: "no tools in a manual \"nope\"\n"},
		{
			name:        "list as JSON, with the schemas",
			args:        []string{"list", "--json"},
			wantNames:   []string{"catalog.get", "catalog.restock", "catalog.search", "math.add", "math.divide", "math.multiply", "math.sqrt", "math.subtract"},
			wantSchemas: true,
		},
		{
			name:        "list as JSON, --full too",
			args:        []string{"list", "--json", "--full", "--manual", "math"},
			wantNames:   []string{"math.add", "math.divide", "math.multiply", "math.sqrt", "math.subtract"},
			wantSchemas: true,
		},
		{
			name:      "list as JSON without the schemas",
			args:      []string{"list", "--json", "--full=false", "--manual", "math"},
			wantNames: []string{"math.add", "math.divide", "math.multiply", "math.sqrt", "math.subtract"},
		},
		{
			name:       "list with the schemas",
			args:       []string{"list", "--manual", "math", "--full"},
			wantStdout: mathToolsFull,
		},
		{name: "list an unknown manual as JSON", args: []string{"list", "--manual", "nope", "--json"}, wantNames: nil},
		{
			name:       "search",
			args:       []string{"search", "square root", "--limit", "3"},
			wantStdout: "SCORE  NAME       TRANSPORT  DESCRIPTION\n2.013  math.sqrt  http       The square root of a.\n",
		},
		{
			name:       "search, the query in words, flags first",
			args:       []string{"search", "--limit", "3", "square", "root"},
			wantStdout: "SCORE  NAME       TRANSPORT  DESCRIPTION\n2.013  math.sqrt  http       The square root of a.\n",
		},
		{name: "search with no match", args: []string{"search", "xyzzy"}, wantStdout: "no tool matches \"xyzzy\"\n"},
		{
			name:        "search as JSON",
			args:        []string{"search", "--json", "--limit", "2", "find a product by name"},
			wantNames:   []string{"catalog.search", "catalog.get"},
			wantScored:  true,
			wantSchemas: true,
		},
		{
			name:       "search as JSON without the schemas",
			args:       []string{"search", "--json", "--full=false", "--limit", "2", "find a product by name"},
			wantNames:  []string{"catalog.search", "catalog.get"},
			wantScored: true,
		},
		{
			name: "search with the schemas",
			args: []string{"search", "square root", "--full"},
			wantStdout: "SCORE  NAME       TRANSPORT  DESCRIPTION\n2.013  math.sqrt  http       The square root of a.\n" +
				"\nmath.sqrt\n" + mathSqrtSchemas,
		},
		{
			name:       "search at the largest --limit",
			args:       []string{"search", "square root", "--limit", "100"},
			wantStdout: "SCORE  NAME       TRANSPORT  DESCRIPTION\n2.013  math.sqrt  http       The square root of a.\n",
		},
		{name: "search with no query", args: []string{"search"}, wantCode: exitUsage, wantStderr: "exprctl tools search: too few arguments"},
		{name: "search with a blank query", args: []string{"search", " "}, wantCode: exitUsage, wantStderr: "the query is empty"},
		{name: "search --limit past the ranking's depth", args: []string{"search", "x", "--limit", "101"}, wantCode: exitUsage, wantStderr: "--limit 101: at most 100"},
		{name: "search --limit past uint32", args: []string{"search", "x", "--limit", "4294967296"}, wantCode: exitUsage, wantStderr: "--limit 4294967296: at most 100"},
		{name: "list with an argument", args: []string{"list", "math"}, wantCode: exitUsage, wantStderr: `exprctl tools list: unexpected argument "math"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runCmd("", append([]string{"--addr", addr, "tools"}, tc.args...)...)
			if !slices.Contains(tc.args, "--json") {
				check(t, got, tc.wantCode, tc.wantStdout, tc.wantStderr)
				return
			}
			check(t, result{got.code, "", got.stderr}, tc.wantCode, "", tc.wantStderr)
			names, scores := toolLines(t, got.stdout, tc.wantSchemas)
			if !slices.Equal(names, tc.wantNames) {
				t.Errorf("got tools %q, want %q", names, tc.wantNames)
			}
			if tc.wantScored && (len(scores) != len(names) || !slices.IsSortedFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) })) {
				t.Errorf("got scores %v, want one a tool, best first", scores)
			}
		})
	}
}

// startGreeter serves a UTCP provider of one tool on loopback: GET
// /hello?name=N answers {"greeting": "hello N"}. It returns a manual for it.
func startGreeter(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"greeting": "hello " + r.URL.Query().Get("name")})
	}))
	t.Cleanup(srv.Close)
	return `{"utcp_version": "1.0.1", "manual_version": "1.0.0",
		"tools": [{"name": "hello", "description": "Greets someone by name.", "tags": ["greeting"],
			"inputs": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
			"outputs": {"type": "object", "properties": {"greeting": {"type": "string"}}},
			"tool_call_template": {"call_template_type": "http", "http_method": "GET", "url": "` + srv.URL + `/hello"}}]}`
}

// shopOpenAPI is an OpenAPI document of three operations: one whose output
// schema is not valid (it registers without it), one without an
// operationId and one whose input refers to nothing (both left out).
const shopOpenAPI = `{"openapi": "3.1.0", "info": {"title": "shop", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9/api"}],
	"paths": {
		"/things": {"get": {"operationId": "listThings", "summary": "Lists the things.",
			"responses": {"200": {"content": {"application/json": {"schema": {"type": "object", "required": ["id", "id"]}}}}}}},
		"/other": {"get": {"summary": "Has no operationId.", "responses": {"200": {"description": "ok"}}}},
		"/bad": {"post": {"operationId": "bad",
			"requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Missing"}}}},
			"responses": {"200": {"description": "ok"}}}}}}`

const (
	shopSkippedBad        = `requestBody: $ref "#/components/schemas/Missing" does not resolve inside the document`
	shopSkippedListThings = "output schema dropped: invalid JSON Schema: not valid against the metaschema: at /required: items at 0 and 1 are equal"
)

// TestToolsRegister registers, uses, lists and removes manuals, in order:
// each step sees what the ones before it did.
func TestToolsRegister(t *testing.T) {
	t.Parallel()
	addr := startTools(t, server.WithRegistryWritesWithoutAuth())
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	greeter := startGreeter(t)
	manual := write("greeter.json", greeter)
	shop := write("shop.json", shopOpenAPI)
	noURL := write("nourl.json", strings.Replace(greeter, `"url"`, `"uri"`, 1))
	for _, step := range []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "a UTCP manual from a file",
			args:       []string{"tools", "register", "greeter", "--file", manual},
			wantStdout: "registered manual greeter: 1 tool\n  greeter.hello\n",
		},
		{
			name:       "its tool can be called at once",
			args:       []string{"codemode", "run", "--code", `codemode.CallTool("greeter.hello", {"name": "Ada"})`, "--tools", "greeter.hello"},
			wantStdout: "start greeter.hello {\"name\":\"Ada\"}\nend greeter.hello ok in D\nvalue {\"greeting\":\"hello Ada\"}\n",
		},
		{
			name:       "listed",
			args:       []string{"tools", "list", "--manual", "greeter"},
			wantStdout: "NAME           TRANSPORT  DESCRIPTION\ngreeter.hello  http       Greets someone by name.\n",
		},
		{
			name:       "again, without --replace",
			args:       []string{"tools", "register", "--file", manual, "greeter"},
			wantCode:   exitError,
			wantStderr: `exprctl tools register: AlreadyExists: manual "greeter": already registered`,
		},
		{
			name:       "again, with --replace, as JSON",
			args:       []string{"tools", "register", "greeter", "--file", manual, "--replace", "--json"},
			wantStdout: `{"manual":"greeter","tools":["greeter.hello"],"skipped":[]}` + "\n",
		},
		{
			name:       "deregistered",
			args:       []string{"tools", "deregister", "greeter"},
			wantStdout: "deregistered manual greeter: 1 tool removed\n  greeter.hello\n",
		},
		{
			name:       "deregistered again",
			args:       []string{"tools", "deregister", "greeter"},
			wantCode:   exitError,
			wantStderr: `exprctl tools deregister: NotFound: manual "greeter" not found`,
		},
		{
			name:       "a name normalised",
			args:       []string{"tools", "register", "my-api", "--file", manual},
			wantStdout: "registered manual my_api: 1 tool\n  my_api.hello\n",
		},
		{
			name:       "deregistered by the name as given, as JSON",
			args:       []string{"tools", "deregister", "my-api", "--json"},
			wantStdout: `{"manual":"my_api","tools":["my_api.hello"]}` + "\n",
		},
		{
			name: "an OpenAPI document, with what was skipped",
			args: []string{"tools", "register", "shop", "--file", shop},
			wantStdout: "registered manual shop: 1 tool\n  shop.listThings\n" +
				"skipped bad (left out): " + shopSkippedBad + "\n" +
				"skipped GET /other (left out): no operationId\n" +
				"skipped listThings (registered without its output schema): " + shopSkippedListThings + "\n",
		},
		{
			name:  "an OpenAPI document from stdin, as JSON",
			stdin: shopOpenAPI,
			args:  []string{"tools", "register", "shop", "--replace", "--json", "--file", "-"},
			wantStdout: `{"manual":"shop","tools":["shop.listThings"],"skipped":[` +
				`{"name":"bad","reason":` + quote(shopSkippedBad) + `,"registered":false},` +
				`{"name":"GET /other","reason":"no operationId","registered":false},` +
				`{"name":"listThings","reason":` + quote(shopSkippedListThings) + `,"registered":true}]}` + "\n",
		},
		{
			name:       "deregistered as JSON",
			args:       []string{"tools", "deregister", "shop", "--json"},
			wantStdout: `{"manual":"shop","tools":["shop.listThings"]}` + "\n",
		},
		{
			name:       "a bad manual is refused whole",
			args:       []string{"tools", "register", "greeter", "--file", noURL},
			wantCode:   exitError,
			wantStderr: "exprctl tools register: InvalidArgument: manual_json.tools[0].tool_call_template.url: missing",
		},
		{
			name:       "the operator's manual cannot be removed",
			args:       []string{"tools", "deregister", "math"},
			wantCode:   exitError,
			wantStderr: `exprctl tools deregister: PermissionDenied: manual "math" was loaded by the operator`,
		},
		{
			// The server's Unavailable is its answer, not exprctl's
			// failure to reach it.
			name:       "a URL the server cannot reach",
			args:       []string{"tools", "register", "far", "--url", "http://" + closedAddr(t) + "/utcp"},
			wantCode:   exitError,
			wantStderr: "exprctl tools register: Unavailable: provider unreachable\n",
		},
		{
			name:       "a gRPC target the server cannot reach",
			args:       []string{"tools", "register", "far", "--grpc-target", closedAddr(t), "--grpc-security", "plaintext"},
			wantCode:   exitError,
			wantStderr: "exprctl tools register: Unavailable: provider unreachable\n",
		},
		{
			name:       "nothing registered stayed",
			args:       []string{"tools", "list", "--json"},
			wantStdout: `{"name":"catalog.get",`,
		},
	} {
		got := runNormalized(step.stdin, append([]string{"--addr", addr}, step.args...)...)
		t.Run(step.name, func(t *testing.T) { check(t, got, step.wantCode, step.wantStdout, step.wantStderr) })
	}
	names, _ := toolLines(t, runCmd("", "--addr", addr, "tools", "list", "--json").stdout, true)
	if len(names) != 8 {
		t.Errorf("got tools %q at the end, want the demo's 8 only", names)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestToolsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no subcommand", []string{"tools"}, exitUsage, "exprctl tools: want a subcommand: deregister, list, register, search"},
		{"an unknown subcommand", []string{"tools", "add"}, exitUsage, `exprctl tools: unknown subcommand "add"`},
		{"help", []string{"tools", "--help"}, exitOK, "usage: exprctl tools SUBCOMMAND"},
		{"codemode without a subcommand", []string{"codemode"}, exitUsage, "exprctl codemode: want a subcommand: run"},
		{"register help", []string{"tools", "register", "--help"}, exitOK, "usage: exprctl tools register NAME (--file PATH | --url URL | --grpc-target HOST:PORT"},
		{"register without a name", []string{"tools", "register", "--url", "https://x.example/utcp"}, exitUsage, "exprctl tools register: too few arguments"},
		{"register with a blank name", []string{"tools", "register", " ", "--url", "https://x.example/utcp"}, exitUsage, "the manual's NAME is empty"},
		{"register without a source", []string{"tools", "register", "x"}, exitUsage, "give the manual's source: --file, --url or --grpc-target"},
		{"register with two sources", []string{"tools", "register", "x", "--file", empty, "--url", "https://x.example/utcp"}, exitUsage, "--file, --url and --grpc-target exclude each other"},
		{"--grpc-security without --grpc-target", []string{"tools", "register", "x", "--url", "https://x.example/utcp", "--grpc-security", "tls"}, exitUsage, "--grpc-security is for --grpc-target"},
		{"--grpc-security unknown", []string{"tools", "register", "x", "--grpc-target", "x.example:443", "--grpc-security", "ssl"}, exitUsage, `--grpc-security "ssl": want tls or plaintext`},
		{"--file missing", []string{"tools", "register", "x", "--file", filepath.Join(dir, "missing.json")}, exitUsage, "missing.json: no such file or directory"},
		{"--file empty", []string{"tools", "register", "x", "--file", empty}, exitUsage, "empty.json is empty"},
		{"deregister without a name", []string{"tools", "deregister"}, exitUsage, "exprctl tools deregister: too few arguments"},
		{"deregister two names", []string{"tools", "deregister", "a", "b"}, exitUsage, `unexpected argument "b"`},
		{"an unknown flag", []string{"tools", "list", "--all"}, exitUsage, "flag provided but not defined: -all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// No server: a usage error is found before dialling.
			check(t, runCmd("", append([]string{"--addr", closedAddr(t)}, tc.args...)...), tc.wantCode, "", tc.wantStderr)
		})
	}
}

// Registry writes need auth, or the operator's leave to go without.
func TestToolsRegisterReadOnly(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	got := runCmd(startGreeter(t), "--addr", addr, "tools", "register", "greeter", "--file", "-")
	check(t, got, exitError, "", "exprctl tools register: FailedPrecondition: the tool registry is read-only: registry writes need auth")
}

// With auth on, --token is sent on every RPC; a write needs the
// registry.write scope.
func TestToolsToken(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("ops writer-token-0123456789 registry.write,toolregistry\nreader reader-token-0123456789 toolregistry"))
	if err != nil {
		t.Fatal(err)
	}
	addr := startTools(t, server.WithAuth(tokens))
	greeter := startGreeter(t)
	for _, step := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"register without a token", []string{"tools", "register", "greeter", "--file", "-"}, exitError, "", "exprctl tools register: Unauthenticated: "},
		{"register with an unknown token", []string{"--token", "nope", "tools", "register", "greeter", "--file", "-"}, exitError, "", "exprctl tools register: Unauthenticated: the bearer token is not known"},
		{"register without registry.write", []string{"tools", "register", "--token", "reader-token-0123456789", "greeter", "--file", "-"}, exitError, "", `exprctl tools register: PermissionDenied: caller "reader" has no "registry.write" scope`},
		{"register with registry.write", []string{"--token", "writer-token-0123456789", "tools", "register", "greeter", "--file", "-"}, exitOK, "registered manual greeter: 1 tool\n  greeter.hello\n", ""},
		{"list with a reader's token", []string{"tools", "list", "--manual", "greeter", "--token", "reader-token-0123456789"}, exitOK, "NAME           TRANSPORT  DESCRIPTION\ngreeter.hello  http       Greets someone by name.\n", ""},
		{"list without a token", []string{"tools", "list"}, exitError, "", "exprctl tools list: Unauthenticated: "},
		{"deregister with registry.write", []string{"tools", "deregister", "greeter", "--token", "writer-token-0123456789"}, exitOK, "deregistered manual greeter: 1 tool removed\n  greeter.hello\n", ""},
		{"a token with a space", []string{"tools", "list", "--token", "writer token-0123456789"}, exitUsage, "", "--token: a bearer token has no spaces or line breaks"},
	} {
		got := runCmd(greeter, append([]string{"--addr", addr}, step.args...)...)
		t.Run(step.name, func(t *testing.T) { check(t, got, step.wantCode, step.wantStdout, step.wantStderr) })
	}
}

// EXPRCTL_TOKEN is the token when --token is not given, and --help never
// shows it.
func TestTokenFromEnv(t *testing.T) {
	tokens, err := auth.ParseTokens(strings.NewReader("ops writer-token-0123456789 registry.write,toolregistry"))
	if err != nil {
		t.Fatal(err)
	}
	addr := startTools(t, server.WithAuth(tokens))
	t.Setenv("EXPRCTL_TOKEN", "writer-token-0123456789")
	got := runCmd(startGreeter(t), "--addr", addr, "tools", "register", "greeter", "--file", "-")
	check(t, got, exitOK, "registered manual greeter: 1 tool\n  greeter.hello\n", "")
	for _, args := range [][]string{{"--help"}, {"tools", "register", "--help"}, {"codemode", "run", "--help"}} {
		got := runCmd("", args...)
		if got.code != exitOK || strings.Contains(got.stderr, "writer-token-0123456789") {
			t.Errorf("%v: got exit %d and\n%s\nwant 0 and no token shown", args, got.code, got.stderr)
		}
	}
}
