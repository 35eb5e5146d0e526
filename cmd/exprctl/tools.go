package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// toolsListCmd lists the registered tools, all or one manual's.
func toolsListCmd(e *env, args []string) error {
	fs := e.newFlagSet("tools list")
	withUsage(fs, "[--manual M] [--full] [flags]")
	manual := fs.String("manual", "", "list only this manual's tools")
	full := registerFull(fs)
	out := &output{w: e.stdout}
	out.registerJSON(fs)
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	view := full.view(out.json)
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	// Every page: a list is short next to what it describes. Pages with
	// schemas are smaller, to stay well under a message's size limit.
	req := &exprdv1.ListToolsRequest{Manual: *manual, View: view, PageSize: 500}
	if view == exprdv1.ToolView_TOOL_VIEW_FULL {
		req.PageSize = 100
	}
	var tools []*exprdv1.ToolInfo
	for t, err := range c.Tools(e.ctx, req) {
		if err != nil {
			return err
		}
		tools = append(tools, t)
	}
	if len(tools) == 0 {
		if *manual != "" {
			out.textf("no tools in a manual %q\n", *manual)
		} else {
			out.textf("no tools\n")
		}
		return nil
	}
	rows := [][]string{{"NAME", "TRANSPORT", "DESCRIPTION"}}
	for _, t := range tools {
		out.object(newToolJSON(t, nil))
		rows = append(rows, []string{t.GetName(), t.GetCallTemplateType(), firstLine(t.GetDescription())})
	}
	printTable(out, rows)
	printSchemas(out, view, tools)
	return nil
}

// toolsSearchCmd ranks the registry's tools for a query and prints the
// first page of them.
func toolsSearchCmd(e *env, args []string) error {
	fs := e.newFlagSet("tools search")
	withUsage(fs, "QUERY... [--limit N] [--full] [flags]")
	limit := fs.Uint("limit", 0, fmt.Sprintf("the most tools to print, at most %d (0: the server's default, 10)", maxSearchLimit))
	full := registerFull(fs)
	out := &output{w: e.stdout}
	out.registerJSON(fs)
	words, err := parseArgs(fs, args, 1, -1)
	if err != nil {
		return err
	}
	query := strings.TrimSpace(strings.Join(words, " "))
	if query == "" {
		return usagef("the query is empty")
	}
	if *limit > maxSearchLimit {
		return usagef("--limit %d: at most %d, as deep as the server ranks", *limit, maxSearchLimit)
	}
	view := full.view(out.json)
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ToolRegistry().SearchTools(e.ctx, &exprdv1.SearchToolsRequest{Query: query, PageSize: uint32(*limit), View: view})
	if err != nil {
		return err
	}
	if len(resp.GetTools()) == 0 {
		out.textf("no tool matches %q\n", query)
		return nil
	}
	rows := [][]string{{"SCORE", "NAME", "TRANSPORT", "DESCRIPTION"}}
	tools := make([]*exprdv1.ToolInfo, 0, len(resp.GetTools()))
	for _, st := range resp.GetTools() {
		score := st.GetScore()
		t := st.GetTool()
		out.object(newToolJSON(t, &score))
		rows = append(rows, []string{fmt.Sprintf("%.3f", score), t.GetName(), t.GetCallTemplateType(), firstLine(t.GetDescription())})
		tools = append(tools, t)
	}
	printTable(out, rows)
	printSchemas(out, view, tools)
	return nil
}

// maxSearchLimit is the most results tools search prints: SearchTools'
// largest page, and how deep it ranks.
const maxSearchLimit = 100

// fullFlag is --full of tools list and search: whether to ask for the
// tools' JSON Schemas (TOOL_VIEW_FULL). --json asks for them unless
// --full=false: its lines have always carried them.
type fullFlag struct {
	fs   *flag.FlagSet
	full bool
}

func registerFull(fs *flag.FlagSet) *fullFlag {
	f := &fullFlag{fs: fs}
	fs.BoolVar(&f.full, "full", false, "also get each tool's input and output JSON Schemas, printed under the table (with --json the default; --full=false leaves them out)")
	return f
}

// view is the ToolView to ask for.
func (f *fullFlag) view(asJSON bool) exprdv1.ToolView {
	given := false
	f.fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "full" })
	if f.full || (asJSON && !given) {
		return exprdv1.ToolView_TOOL_VIEW_FULL
	}
	return exprdv1.ToolView_TOOL_VIEW_BASIC
}

// printSchemas prints, for people, the schemas the full view brought: each
// tool's name, then its schemas a line each.
func printSchemas(out *output, view exprdv1.ToolView, tools []*exprdv1.ToolInfo) {
	if view != exprdv1.ToolView_TOOL_VIEW_FULL {
		return
	}
	for _, t := range tools {
		out.textf("\n%s\n", t.GetName())
		if s := t.GetInputSchemaJson(); s != "" {
			out.textf("  input:  %s\n", rawJSON(s))
		}
		if s := t.GetOutputSchemaJson(); s != "" {
			out.textf("  output: %s\n", rawJSON(s))
		}
	}
}

// grpcSecurity are --grpc-security's values.
var grpcSecurity = map[string]exprdv1.RegisterManualRequest_GrpcSecurity{
	"tls":       exprdv1.RegisterManualRequest_GRPC_SECURITY_TLS,
	"plaintext": exprdv1.RegisterManualRequest_GRPC_SECURITY_PLAINTEXT,
}

// toolsRegisterCmd registers a manual from a file, a URL or a gRPC
// provider, and prints what was registered and what was left out.
func toolsRegisterCmd(e *env, args []string) error {
	fs := e.newFlagSet("tools register")
	withUsage(fs, "NAME (--file PATH | --url URL | --grpc-target HOST:PORT [--grpc-security tls|plaintext]) [--replace] [flags]")
	file := fs.String("file", "", "a UTCP manual or an OpenAPI document (JSON or YAML), sent to the server inline; - reads stdin")
	url := fs.String("url", "", "a URL the server fetches a UTCP manual or an OpenAPI document from")
	target := fs.String("grpc-target", "", "HOST:PORT of a go-utcp UTCPService provider the server asks for its manual")
	security := fs.String("grpc-security", "", "how the server reaches --grpc-target: tls or plaintext (default: plaintext to the hosts its egress policy lists, TLS to any other)")
	replace := fs.Bool("replace", false, "replace a manual of the same name (or register it when there is none)")
	out := &output{w: e.stdout}
	out.registerJSON(fs)
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	req := &exprdv1.RegisterManualRequest{Name: strings.TrimSpace(pos[0]), Replace: *replace}
	if req.Name == "" {
		return usagef("the manual's NAME is empty")
	}
	switch countSet(*file != "", *url != "", *target != "") {
	case 0:
		return usagef("give the manual's source: --file, --url or --grpc-target")
	case 1:
	default:
		return usagef("--file, --url and --grpc-target exclude each other")
	}
	if *security != "" {
		sec, ok := grpcSecurity[*security]
		switch {
		case *target == "":
			return usagef("--grpc-security is for --grpc-target")
		case !ok:
			return usagef("--grpc-security %q: want tls or plaintext", *security)
		}
		req.GrpcSecurity = sec
	}
	switch {
	case *file != "":
		b, err := e.readFile(*file)
		if err != nil {
			return err
		}
		if !utf8.Valid(b) {
			return usagef("--file %s: %v", *file, errNotUTF8)
		}
		req.Source = &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(b)}
	case *url != "":
		req.Source = &exprdv1.RegisterManualRequest_Url{Url: *url}
	default:
		req.Source = &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: *target}
	}

	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ToolRegistry().RegisterManual(e.ctx, req)
	if err != nil {
		return err
	}
	skipped := make([]skippedJSON, 0, len(resp.GetSkipped()))
	for _, s := range resp.GetSkipped() {
		skipped = append(skipped, skippedJSON{s.GetName(), s.GetReason(), s.GetRegistered()})
	}
	out.object(registeredJSON{resp.GetManual(), nonNil(resp.GetTools()), skipped})
	out.textf("registered manual %s: %s\n", resp.GetManual(), count(len(resp.GetTools()), "tool"))
	for _, t := range resp.GetTools() {
		out.textf("  %s\n", t)
	}
	for _, s := range resp.GetSkipped() {
		how := "left out"
		if s.GetRegistered() {
			how = "registered without its output schema"
		}
		out.textf("skipped %s (%s): %s\n", s.GetName(), how, s.GetReason())
	}
	return nil
}

// toolsDeregisterCmd removes a manual and its tools.
func toolsDeregisterCmd(e *env, args []string) error {
	fs := e.newFlagSet("tools deregister")
	withUsage(fs, "NAME [flags]")
	out := &output{w: e.stdout}
	out.registerJSON(fs)
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(pos[0])
	if name == "" {
		return usagef("the manual's NAME is empty")
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ToolRegistry().DeregisterManual(e.ctx, &exprdv1.DeregisterManualRequest{Name: name})
	if err != nil {
		return err
	}
	out.object(deregisteredJSON{resp.GetManual(), nonNil(resp.GetTools())})
	out.textf("deregistered manual %s: %s removed\n", resp.GetManual(), count(len(resp.GetTools()), "tool"))
	for _, t := range resp.GetTools() {
		out.textf("  %s\n", t)
	}
	return nil
}

// readFile reads a file for a request, or stdin for "-".
func (e *env) readFile(name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(e.stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, usagef("%s is empty", name)
	}
	return b, nil
}

// The lines of the tools commands' --json.
type (
	// toolJSON is a ToolInfo, its schemas inlined when they were asked
	// for (--full, the default with --json), with its score in a search.
	toolJSON struct {
		Name             string          `json:"name"`
		Manual           string          `json:"manual"`
		Description      string          `json:"description"`
		Tags             []string        `json:"tags"`
		CallTemplateType string          `json:"call_template_type"`
		InputSchema      json.RawMessage `json:"input_schema,omitempty"`
		OutputSchema     json.RawMessage `json:"output_schema,omitempty"`
		Score            *float64        `json:"score,omitempty"`
	}
	registeredJSON struct {
		Manual  string        `json:"manual"`
		Tools   []string      `json:"tools"`
		Skipped []skippedJSON `json:"skipped"`
	}
	skippedJSON struct {
		Name   string `json:"name"`
		Reason string `json:"reason"`
		// Registered is true when the tool registered without its output
		// schema, false when it was left out.
		Registered bool `json:"registered"`
	}
	deregisteredJSON struct {
		Manual string   `json:"manual"`
		Tools  []string `json:"tools"`
	}
)

func newToolJSON(t *exprdv1.ToolInfo, score *float64) toolJSON {
	return toolJSON{t.GetName(), t.GetManual(), t.GetDescription(), nonNil(t.GetTags()), t.GetCallTemplateType(),
		rawJSON(t.GetInputSchemaJson()), rawJSON(t.GetOutputSchemaJson()), score}
}

// printTable prints rows in aligned columns, for people.
func printTable(out *output, rows [][]string) {
	if out.json {
		return
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	tw := tabwriter.NewWriter(out.w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.ReplaceAll(line, "\t", " ")
}

// count is "1 tool", "2 tools".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
