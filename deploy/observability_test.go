package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v3"

	"github.com/exprd/exprd/cluster/etcdtest"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/model/scripted"
	"google.golang.org/protobuf/proto"
)

// The Grafana dashboard and the Prometheus alert rules, held to what a
// running exprd exports and to the fields Grafana and Prometheus need.

const (
	dashboardFile = "grafana/exprd-dashboard.json"
	alertsFile    = "prometheus/exprd-alerts.yaml"
)

// eventOnly are metrics exprd exports only once something happens that no
// request to a sound exprd causes, so a running exprd cannot show them.
// Each is held instead to the instrument exprd declares for it: its
// OpenTelemetry name, as written in the file that declares it.
var eventOnly = map[string]struct{ file, declaration string }{
	"exprd_panics_total": {"server/telemetry.go", `Int64Counter("exprd.panics"`},
}

// afterTakeover are metrics exprd exports once it has taken over a turn
// whose replica stopped: TestTakeoverMetricsMatchExprd kills a replica to
// show them.
var afterTakeover = map[string]bool{"exprd_turns_takeovers_total": true}

// ruleFile is a Prometheus rules file, decoded strictly: a misspelt field
// is an error, not a rule without it.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

func parseRules(data []byte) (*ruleFile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var rf ruleFile
	if err := dec.Decode(&rf); err != nil {
		return nil, err
	}
	return &rf, nil
}

// promDuration is Prometheus' duration: units from years to
// milliseconds, largest first (model.ParseDuration).
var promDuration = regexp.MustCompile(`^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$`)

// severities are those the rules may page with.
var severities = map[string]bool{"critical": true, "warning": true, "info": true}

// promTemplateFuncs are the functions Prometheus gives alert templates
// (template/template.go), stubbed: the checks parse templates, they do
// not run them.
var promTemplateFuncs = func() template.FuncMap {
	fm := template.FuncMap{}
	for _, name := range []string{"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml", "match",
		"title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "humanize", "humanize1024", "humanizeDuration",
		"humanizePercentage", "humanizeTimestamp", "toTime", "toDuration", "now", "pathPrefix", "externalURL", "parseDuration",
		"stripPort", "stripDomain", "urlQueryEscape"} {
		fm[name] = func(...any) any { return nil }
	}
	return fm
}()

// checkRules checks what Prometheus needs of each rule, and what the
// on-call needs of each alert: an expression that reads, a for, a
// severity and a summary.
func checkRules(rf *ruleFile) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(rf.Groups) == 0 {
		fail("no groups")
	}
	alerts := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			fail("group %q: want a name of its own", g.Name)
		}
		groups[g.Name] = true
		for i, r := range g.Rules {
			at := fmt.Sprintf("group %s rule %d (%s)", g.Name, i, r.Alert+r.Record)
			if (r.Alert == "") == (r.Record == "") {
				fail("%s: want alert or record, one of them", at)
			}
			if _, err := parsePromQL(r.Expr); strings.TrimSpace(r.Expr) == "" || err != nil {
				fail("%s: expr %q: %v", at, r.Expr, err)
			}
			if r.Record != "" {
				continue
			}
			if alerts[r.Alert] {
				fail("%s: alert %s given twice", at, r.Alert)
			}
			alerts[r.Alert] = true
			if !promDuration.MatchString(r.For) || r.For == "" {
				fail("%s: for %q: want a duration such as 5m: how long the condition holds before it fires", at, r.For)
			}
			if !severities[r.Labels["severity"]] {
				fail("%s: labels.severity %q: want one of %v", at, r.Labels["severity"], slices.Sorted(maps.Keys(severities)))
			}
			if strings.TrimSpace(r.Annotations["summary"]) == "" {
				fail("%s: no annotations.summary", at)
			}
			for k, v := range r.Annotations {
				// As Prometheus expands them: these variables first.
				src := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}" + v
				if _, err := template.New(k).Funcs(promTemplateFuncs).Option("missingkey=zero").Parse(src); err != nil {
					fail("%s: annotations.%s: %v", at, k, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []templateVar `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasourceRef struct{ Type, UID string }

// templateVar is a dashboard variable.
type templateVar struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Query      any            `json:"query"` // a string, or {"query": ...}
	Datasource *datasourceRef `json:"datasource"`
}

// datasourceVar is the dashboard's data source variable: every query
// goes to the Prometheus the viewer picks.
const datasourceVar = "${datasource}"

func parseDashboard(data []byte) (*dashboard, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// allPanels is every panel, a collapsed row's included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues is Grafana's label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// queries is every PromQL expression of the dashboard: its panels'
// targets and its query variables, label_values(s, l) read as
// `group by (l) (s)` so that the label is held to the metric too.
func (d *dashboard) queries() ([]query, error) {
	var out []query
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			out = append(out, query{fmt.Sprintf("%s panel %d %q target %s", dashboardFile, p.ID, p.Title, t.RefID), t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sub := labelValues.FindStringSubmatch(q)
		if sub == nil {
			return nil, fmt.Errorf("%s variable %s: query %q: want label_values(selector, label), which the checks read", dashboardFile, v.Name, q)
		}
		out = append(out, query{fmt.Sprintf("%s variable %s", dashboardFile, v.Name), fmt.Sprintf("group by (%s) (%s)", sub[2], sub[1])})
	}
	return out, nil
}

// checkDashboard checks what Grafana needs to show each panel: an id of
// its own, a place on the 24-column grid, its queries on the data source
// variable, each with an expression and a refId of its own.
func checkDashboard(d *dashboard) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if d.UID == "" || d.Title == "" {
		fail("uid %q, title %q: want both", d.UID, d.Title)
	}
	hasDS := slices.ContainsFunc(d.Templating.List, func(v templateVar) bool {
		return "${"+v.Name+"}" == datasourceVar && v.Type == "datasource" && v.Query == "prometheus"
	})
	if !hasDS {
		fail("templating: no variable %s of type datasource, query prometheus", datasourceVar)
	}
	ids := map[int]bool{}
	for _, p := range d.allPanels() {
		at := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			fail("%s: want an id of its own", at)
		}
		ids[p.ID] = true
		if p.Title == "" {
			fail("%s: no title", at)
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			fail("%s: gridPos %+v: want it on the 24 columns", at, g)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			fail("%s: no targets", at)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			ds := t.Datasource
			if ds == nil {
				ds = p.Datasource
			}
			if ds == nil || ds.UID != datasourceVar {
				fail("%s target %s: datasource %v: want uid %s", at, t.RefID, ds, datasourceVar)
			}
			if t.RefID == "" || refs[t.RefID] {
				fail("%s target %q: want a refId of its own", at, t.RefID)
			}
			refs[t.RefID] = true
			if strings.TrimSpace(t.Expr) == "" {
				fail("%s target %s: no expr", at, t.RefID)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != datasourceVar) {
			fail("variable %s: datasource %v: want uid %s", v.Name, v.Datasource, datasourceVar)
		}
	}
	return errors.Join(errs...)
}

// ruleQueries is every expression of the rules file.
func (rf *ruleFile) queries() []query {
	var out []query
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, query{fmt.Sprintf("%s group %s %s", alertsFile, g.Name, r.Alert+r.Record), r.Expr})
		}
	}
	return out
}

func readRules(t *testing.T) *ruleFile {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := parseRules(data)
	if err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rf
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDashboard(data)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// covered are the concerns the dashboard and the alerts must watch when
// replicas share a registry and a turn store, each by a metric a query
// names.
var covered = []struct {
	what, metric string
	alerted      bool // an alert names it too
}{
	{"RPC errors and latency", "rpc_server_call_duration_seconds_bucket", true},
	{"RPC error rate", "rpc_server_call_duration_seconds_count", true},
	{"tool call latency", "exprd_tool_duration_seconds_bucket", true},
	{"tool call errors", "exprd_tool_duration_seconds_count", true},
	{"memory", "process_resident_memory_bytes", true},
	{"GOMEMLIMIT", "go_gc_gomemlimit_bytes", true},
	{"registry staleness", "exprd_registry_staleness_seconds", true},
	{"registry apply errors", "exprd_registry_applies_total", true},
	{"open sessions", "exprd_sessions_open", true},
	{"budget hits", "exprd_budget_hits_total", true},
	{"panics", "exprd_panics_total", true},
	{"registry propagation", "exprd_registry_propagation_seconds_bucket", false},
	{"snapshot reloads", "exprd_registry_snapshot_reloads_total", false},
	{"turns running", "exprd_turns_running", true},
	{"turns detached", "exprd_turns_detached", true},
	{"turns not durable", "exprd_turns_not_durable", true},
	{"turn takeovers", "exprd_turns_takeovers_total", true},
	{"turn store latency", "exprd_turn_store_duration_seconds_bucket", true},
}

// names is every metric the queries name.
func names(qs []query) map[string]bool {
	out := map[string]bool{}
	for _, q := range qs {
		refs, _ := parsePromQL(q.expr)
		for _, s := range refs.selectors {
			out[s.metric] = true
		}
	}
	return out
}

// TestDashboardAndAlerts checks both files offline: their fields, that
// each concern is watched, and the staleness alert as asked for (over
// 60 s for 5 minutes).
func TestDashboardAndAlerts(t *testing.T) {
	t.Parallel()
	rf, d := readRules(t), readDashboard(t)
	if err := checkRules(rf); err != nil {
		t.Errorf("%s:\n%v", alertsFile, err)
	}
	if err := checkDashboard(d); err != nil {
		t.Errorf("%s:\n%v", dashboardFile, err)
	}
	dq, err := d.queries()
	if err != nil {
		t.Fatal(err)
	}
	inDashboard, inAlerts := names(dq), names(rf.queries())
	for _, c := range covered {
		if !inDashboard[c.metric] {
			t.Errorf("%s: got no panel on %s, want one (%s)", dashboardFile, c.what, c.metric)
		}
		if c.alerted && !inAlerts[c.metric] {
			t.Errorf("%s: got no alert on %s, want one (%s)", alertsFile, c.what, c.metric)
		}
	}
	stale := regexp.MustCompile(`exprd_registry_staleness_seconds\b[^>]*>\s*60\s*$`)
	found := false
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			found = found || (stale.MatchString(strings.TrimSpace(r.Expr)) && r.For == "5m")
		}
	}
	if !found {
		t.Errorf("%s: got no alert on exprd_registry_staleness_seconds > 60 for 5m, want one", alertsFile)
	}
	for metric, ev := range eventOnly {
		src, err := os.ReadFile(filepath.Join(repoRoot, ev.file))
		if err != nil || !bytes.Contains(src, []byte(ev.declaration)) {
			t.Errorf("%s, exported only on an event: got no %s in %s (%v), want exprd to declare it there", metric, ev.declaration, ev.file, err)
		}
	}
}

// TestRuleAndDashboardChecksCatch breaks each file one way at a time and
// expects its check to say so.
func TestRuleAndDashboardChecksCatch(t *testing.T) {
	t.Parallel()
	rules := []struct {
		name   string
		mutate func(*rule)
	}{
		{"no for", func(r *rule) { r.For = "" }},
		{"a for that is no duration", func(r *rule) { r.For = "5 minutes" }},
		{"no severity", func(r *rule) { delete(r.Labels, "severity") }},
		{"a severity no one routes", func(r *rule) { r.Labels["severity"] = "page" }},
		{"no summary", func(r *rule) { delete(r.Annotations, "summary") }},
		{"a broken template", func(r *rule) { r.Annotations["summary"] = "{{ $labels.pod " }},
		{"a template function Prometheus lacks", func(r *rule) { r.Annotations["summary"] = "{{ $value | humanise }}" }},
		{"an expression that does not close", func(r *rule) { r.Expr = "sum(rate(exprd_calls_total[5m])" }},
		{"neither alert nor record", func(r *rule) { r.Alert = "" }},
	}
	for _, tt := range rules {
		t.Run("rules/"+tt.name, func(t *testing.T) {
			t.Parallel()
			rf := readRules(t)
			tt.mutate(&rf.Groups[0].Rules[0])
			if err := checkRules(rf); err == nil {
				t.Errorf("checkRules: got no error, want one")
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
	t.Run("rules/an alert given twice", func(t *testing.T) {
		t.Parallel()
		rf := readRules(t)
		rf.Groups[0].Rules = append(rf.Groups[0].Rules, rf.Groups[0].Rules[0])
		if err := checkRules(rf); err == nil || !strings.Contains(err.Error(), "given twice") {
			t.Errorf("checkRules: got %v, want an error naming the alert given twice", err)
		}
	})
	t.Run("rules/a misspelt field", func(t *testing.T) {
		t.Parallel()
		_, err := parseRules([]byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n        for: 5m\n        annotation: {summary: s}\n"))
		if err == nil || !strings.Contains(err.Error(), "annotation") {
			t.Errorf("parseRules: got %v, want an error naming the misspelt field", err)
		}
	})
	panels := []struct {
		name   string
		mutate func(*dashboard)
	}{
		{"two panels with one id", func(d *dashboard) { d.Panels[2].ID = d.Panels[1].ID }},
		{"a target with no expression", func(d *dashboard) { d.Panels[1].Targets[0].Expr = "" }},
		{"a panel on a fixed data source", func(d *dashboard) {
			d.Panels[1].Datasource = &datasourceRef{Type: "prometheus", UID: "P1809F7CD0C75ACF3"}
			d.Panels[1].Targets[0].Datasource = nil
		}},
		{"a panel past the 24 columns", func(d *dashboard) { d.Panels[1].GridPos.X = 16 }},
		{"no data source variable", func(d *dashboard) { d.Templating.List = d.Templating.List[1:] }},
	}
	for _, tt := range panels {
		t.Run("dashboard/"+tt.name, func(t *testing.T) {
			t.Parallel()
			d := readDashboard(t)
			tt.mutate(d)
			if err := checkDashboard(d); err == nil {
				t.Errorf("checkDashboard: got no error, want one")
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// exprdBinary is EXPRD_BIN when it names one (make test builds exprd
// first), else the image's exprd (imageBinary).
func exprdBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("EXPRD_BIN"); bin != "" {
		return bin
	}
	return imageBinary(t)
}

// TestDashboardAndAlertsMatchExprd starts exprd with the demo, an
// embedded etcd as its registry store and an embedded nats-server as its
// turn store, makes the calls that bring every series out (a CodeMode
// program calling a demo tool, ExprTool calls with a tool function and
// over a budget, a Session, an AgentLoop turn, registry writes, a
// snapshot reload), and holds every query of the dashboard and the alert
// rules to the metrics and labels its /metrics page then shows.
func TestDashboardAndAlertsMatchExprd(t *testing.T) {
	t.Parallel()
	rf, d := readRules(t), readDashboard(t)
	dq, err := d.queries()
	if err != nil {
		t.Fatal(err)
	}
	queries := append(dq, rf.queries()...)

	etcd := etcdtest.Start(t)
	log := &exprdproc.LogBuffer{}
	proc, err := exprdproc.Start(exprdBinary(t), log, "--demo", "--registry-store=etcd://"+etcd.Endpoint(), "--registry-writes-without-auth",
		"--turn-store=nats", "--nats-url="+startNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exprd's log:\n%s", log)
		}
	})
	conn, err := grpc.NewClient(proc.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exerciseExprd(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := reloadSnapshot(ctx, t, proc, etcd); err != nil {
		t.Fatal(err)
	}

	// Counters and histograms appear with their first event, which the
	// calls above have each answered; poll a little for the reload.
	want := map[string]bool{}
	for m := range names(queries) {
		if _, ok := eventOnly[m]; !ok && !afterTakeover[m] {
			want[m] = true
		}
	}
	var exp exposition
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if exp, err = scrape(proc.Metrics); err != nil {
			t.Fatal(err)
		}
		missing := slices.DeleteFunc(slices.Collect(maps.Keys(want)), func(m string) bool { _, ok := exp[m]; return ok })
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	skip := maps.Clone(afterTakeover)
	for m := range eventOnly {
		skip[m] = true
	}
	if err := unexported(queries, exp, skip); err != nil {
		t.Errorf("queries naming what exprd does not export:\n%v", err)
	}
	// The same check, on the same page, with one letter off.
	misspelt := query{"a misspelt copy", `sum by (outcome) (rate(exprd_registry_apply_total{outcome="error"}[5m]))`}
	if err := unexported([]query{misspelt}, exp, skip); err == nil || !strings.Contains(err.Error(), "exprd_registry_apply_total") {
		t.Errorf("unexported(%q): got %v, want an error naming exprd_registry_apply_total", misspelt.expr, err)
	}
}

// exerciseExprd makes one call of each kind the dashboard watches.
func exerciseExprd(ctx context.Context, conn *grpc.ClientConn) error {
	exec, err := exprdv1.NewCodeModeClient(conn).Execute(ctx, &exprdv1.ExecuteRequest{
		Code: `codemode.CallTool("math.add", {"a": 1, "b": 2})`, Tools: []string{"math.add"},
	})
	if err != nil || exec.GetError() != nil || len(exec.GetTrace()) != 1 {
		return fmt.Errorf("CodeMode.Execute of math.add: got %v, %v; want one tool call and no error", exec, err)
	}
	tool := exprdv1.NewExprToolClient(conn)
	withTool := &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "add", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "math.add"}}}
	for _, c := range []struct {
		name       string
		req        *exprdv1.CallRequest
		wantReason string
	}{
		{"a UTCP tool as a function", &exprdv1.CallRequest{Settings: withTool, StateJson: `{}`,
			InputJson: `{"steps": [{"set": "scopes.root.n", "expr": "add({a: 2, b: 3}).result"}]}`}, ""},
		{"over the iterations budget", &exprdv1.CallRequest{Budgets: &exprdv1.Budgets{MaxIterations: 1}, StateJson: `{}`,
			InputJson: `{"steps": [{"expr": "map(1..100, # * 2)"}]}`}, "budget-exceeded"},
	} {
		resp, err := tool.Call(ctx, c.req)
		if err != nil || resp.GetReason() != c.wantReason {
			return fmt.Errorf("ExprTool.Call, %s: got reason %q, %v; want %q", c.name, resp.GetReason(), err, c.wantReason)
		}
	}
	sess, err := tool.Session(ctx)
	if err != nil {
		return err
	}
	if err := sess.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}}); err != nil {
		return err
	}
	if first, err := sess.Recv(); err != nil || first.GetOpened() == nil {
		return fmt.Errorf("Session: got %v, %v; want Opened", first, err)
	}
	if err := sess.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := sess.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("Session after the half-close: %w", err)
		}
	}
	// An AgentLoop turn with the demo's model, kept in NATS: the turn
	// store's operations, and the turns running and detached.
	run, err := exprdv1.NewAgentLoopClient(conn).Run(ctx)
	if err != nil {
		return err
	}
	if err := run.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "What is 2 + 3?"}}}}}); err != nil {
		return err
	}
	done := false
	for {
		m, err := run.Recv()
		if err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("AgentLoop.Run: %w", err)
		}
		done = done || m.GetDone() != nil
	}
	if !done {
		return errors.New("AgentLoop.Run: the stream ended with no done")
	}
	registry := exprdv1.NewToolRegistryClient(conn)
	if _, err := registry.RegisterManual(ctx, &exprdv1.RegisterManualRequest{
		Name: "probe", Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: `{"utcp_version": "1.1.0", "tools": []}`},
	}); err != nil {
		return fmt.Errorf("ToolRegistry.RegisterManual: %w", err)
	}
	if _, err := registry.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "probe"}); err != nil {
		return fmt.Errorf("ToolRegistry.DeregisterManual: %w", err)
	}
	return nil
}

// reloadSnapshot makes exprd reload the registry's snapshot, as when its
// watch cannot resume: while exprd is stopped, etcd restarts (which ends
// every watch), moves on and compacts past where exprd's watch was.
func reloadSnapshot(ctx context.Context, t *testing.T, proc *exprdproc.Proc, etcd *etcdtest.Etcd) error {
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	defer func() { _ = proc.Signal(syscall.SIGCONT) }()
	etcd.Stop()
	if err := etcd.Start(); err != nil {
		return err
	}
	// Two revisions past exprd's: a compaction keeps the revision it is
	// made at, from which the watch could still resume.
	cli := etcd.Client(t)
	for _, v := range []string{"1", "2"} {
		if _, err := cli.Put(ctx, "/elsewhere/moved-on", v); err != nil {
			return err
		}
	}
	_, err := etcd.Compact(ctx, cli)
	return err
}

// scrape reads exprd's /metrics.
func scrape(addr string) (exposition, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseExposition(resp.Body)
}

// TestTakeoverMetricsMatchExprd starts two exprd processes on one
// embedded nats-server with a short lease and a slow scripted model,
// kills the first (SIGKILL) while its detached turn waits for the model,
// waits for the second to take the turn over and run it to done, and
// holds the dashboard's and the alerts' queries on the takeover metrics
// to what the second's /metrics page then shows.
func TestTakeoverMetricsMatchExprd(t *testing.T) {
	t.Parallel()
	rf, d := readRules(t), readDashboard(t)
	dq, err := d.queries()
	if err != nil {
		t.Fatal(err)
	}
	var queries []query
	for _, q := range append(dq, rf.queries()...) {
		for m := range names([]query{q}) {
			if afterTakeover[m] {
				queries = append(queries, q)
				break
			}
		}
	}
	if len(queries) == 0 {
		t.Fatalf("no query names %v: nothing to check", slices.Sorted(maps.Keys(afterTakeover)))
	}

	ms, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "taken over", DelayMS: 2000}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, fmt.Appendf(nil, "default: scripted\nproviders:\n  scripted:\n    base_url: %s\n    model: m\n", ms.BaseURL()), 0o600); err != nil {
		t.Fatal(err)
	}
	natsURL := startNATS(t)
	start := func(name string) (*exprdproc.Proc, *grpc.ClientConn) {
		log := &exprdproc.LogBuffer{}
		proc, err := exprdproc.Start(exprdBinary(t), log, "--turn-store=nats", "--nats-url="+natsURL, "--turn-lease=1s",
			"--models-config="+models, "--mcp-listen=off")
		if err != nil {
			t.Fatalf("exprd %s: %v", name, err)
		}
		t.Cleanup(proc.Stop)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("exprd %s's log:\n%s", name, log)
			}
		})
		conn, err := grpc.NewClient(proc.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return proc, conn
	}
	a, aConn := start("A")
	b, _ := start("B")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := exprdv1.NewAgentLoopClient(aConn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Go on."}}}}}); err != nil {
		t.Fatal(err)
	}
	if first, err := run.Recv(); err != nil || first.GetTurnId() == "" {
		t.Fatalf("AgentLoop.Run on A: got %v, %v; want the turn's first event", first, err)
	}
	// The model answers after 2 s: A dies with the request in flight.
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	var exp exposition
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if exp, err = scrape(b.Metrics); err != nil {
			t.Fatal(err)
		}
		if _, ok := exp["exprd_turns_takeovers_total"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's /metrics: no exprd_turns_takeovers_total 30 s after A was killed: no takeover")
		}
	}
	skip := map[string]bool{}
	for m := range eventOnly {
		skip[m] = true
	}
	if err := unexported(queries, exp, skip); err != nil {
		t.Errorf("queries naming what exprd does not export after a takeover:\n%v", err)
	}
	// The same check, on the same page, with a label that is not there.
	wrong := query{"a copy with another label", `sum by (result) (increase(exprd_turns_takeovers_total{result="ended"}[10m]))`}
	if err := unexported([]query{wrong}, exp, skip); err == nil || !strings.Contains(err.Error(), "no label result") {
		t.Errorf("unexported(%q): got %v, want an error naming the label result", wrong.expr, err)
	}
}
