package deploy_test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A small reader of PromQL, enough to say which metrics and labels an
// expression of the dashboard or the alert rules names, so that a test can
// hold them to what a running exprd exports. It reads no semantics: it
// tokenizes, keeps the series selectors' names and matchers' labels and
// the labels of by, without, on, ignoring, group_left and group_right,
// and checks that brackets balance.

// selector is a series selector: its metric name and the labels its
// matchers name.
type selector struct {
	metric string
	labels []string
}

// promRefs is what an expression names.
type promRefs struct {
	selectors []selector
	grouping  []string // labels of by (...), on (...), ...
}

// promKeywords are PromQL's words that are not metric names: operators,
// modifiers, and the aggregations, which may be followed by by or
// without before their parenthesis.
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// groupingWords take a parenthesised list of labels.
var groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var (
	promIdent  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promNumber = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?([smhdwy]|ms)?)`)
	// A Grafana variable: $name, ${name}, ${name:format}, [[name]].
	grafanaVar = regexp.MustCompile(`^(\$\{[^}]*\}|\$[a-zA-Z0-9_]+|\[\[[^\]]*\]\])`)
)

// parsePromQL reads what an expression names.
func parsePromQL(expr string) (promRefs, error) {
	var out promRefs
	var open []byte // unclosed ( and [
	s := expr
	at := func() int { return len(expr) - len(s) }
	skipSpace := func() {
		for {
			s = strings.TrimLeft(s, " \t\r\n")
			if !strings.HasPrefix(s, "#") {
				return
			}
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = s[i:]
			} else {
				s = ""
			}
		}
	}
	for skipSpace(); s != ""; skipSpace() {
		if v := grafanaVar.FindString(s); v != "" {
			s = s[len(v):]
			continue
		}
		switch c := s[0]; {
		case c == '"' || c == '\'' || c == '`':
			_, rest, err := promString(s)
			if err != nil {
				return out, fmt.Errorf("at %d: %w", at(), err)
			}
			s = rest
		case c == '{':
			sel, rest, err := promMatchers(s)
			if err != nil {
				return out, fmt.Errorf("at %d: %w", at(), err)
			}
			out.selectors, s = append(out.selectors, sel), rest
		case c == '(' || c == '[':
			open, s = append(open, c), s[1:]
		case c == ')' || c == ']':
			want := map[byte]byte{')': '(', ']': '['}[c]
			if len(open) == 0 || open[len(open)-1] != want {
				return out, fmt.Errorf("at %d: %q closes nothing", at(), c)
			}
			open, s = open[:len(open)-1], s[1:]
		case promNumber.MatchString(s) && (c != '.' || len(s) > 1 && s[1] >= '0' && s[1] <= '9'):
			s = s[len(promNumber.FindString(s)):]
		case promIdent.MatchString(s):
			word := promIdent.FindString(s)
			s = s[len(word):]
			if len(open) > 0 && open[len(open)-1] == '[' {
				continue // a duration's unit or a subquery's, in a range
			}
			skipSpace()
			switch {
			case groupingWords[strings.ToLower(word)] && strings.HasPrefix(s, "("):
				labels, rest, err := promLabelList(s)
				if err != nil {
					return out, fmt.Errorf("at %d: %s: %w", at(), word, err)
				}
				out.grouping, s = append(out.grouping, labels...), rest
			case promKeywords[strings.ToLower(word)], strings.HasPrefix(s, "("):
				// an operator, or a function's name
			case strings.HasPrefix(s, "{"):
				sel, rest, err := promMatchers(s)
				if err != nil {
					return out, fmt.Errorf("at %d: %w", at(), err)
				}
				sel.metric = word
				out.selectors, s = append(out.selectors, sel), rest
			default:
				out.selectors = append(out.selectors, selector{metric: word})
			}
		case strings.ContainsRune("+-*/%^=!<>,@:", rune(c)):
			s = s[1:]
		default:
			return out, fmt.Errorf("at %d: unexpected %q", at(), c)
		}
	}
	if len(open) > 0 {
		return out, fmt.Errorf("%q left open", open)
	}
	return out, nil
}

// promString reads a quoted string at the start of s.
func promString(s string) (string, string, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			return s[1:i], s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("unterminated string %s", s)
}

// promMatchers reads {label op "value", ...} at the start of s. A
// __name__ matcher with = names the metric.
func promMatchers(s string) (selector, string, error) {
	var sel selector
	s = s[1:]
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		if strings.HasPrefix(s, "}") {
			return sel, s[1:], nil
		}
		var label string
		if name := promIdent.FindString(s); name != "" {
			label, s = name, s[len(name):]
		} else if s != "" && s[0] == '"' {
			var err error
			if label, s, err = promString(s); err != nil {
				return sel, "", err
			}
		} else {
			return sel, "", fmt.Errorf("a matcher: got %.20q, want a label name", s)
		}
		s = strings.TrimLeft(s, " \t\r\n")
		op := ""
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s, o) {
				op, s = o, s[len(o):]
				break
			}
		}
		if op == "" {
			if label != "" && (strings.HasPrefix(s, ",") || strings.HasPrefix(s, "}")) {
				sel.metric = label // {"a.utf8.name"}: a quoted metric name
				continue
			}
			return sel, "", fmt.Errorf("matcher on %s: got %.20q, want =, !=, =~ or !~", label, s)
		}
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" || !strings.ContainsRune("\"'`", rune(s[0])) {
			return sel, "", fmt.Errorf("matcher on %s: want a quoted value", label)
		}
		value, rest, err := promString(s)
		if err != nil {
			return sel, "", err
		}
		s = rest
		if label == model.MetricNameLabel {
			if op == "=" {
				sel.metric = value
			}
			continue
		}
		sel.labels = append(sel.labels, label)
	}
}

// promLabelList reads (label, ...) at the start of s.
func promLabelList(s string) ([]string, string, error) {
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return nil, "", errors.New("unclosed (")
	}
	var labels []string
	for _, l := range strings.Split(s[1:end], ",") {
		l = strings.Trim(strings.TrimSpace(l), `"`)
		if l == "" {
			continue
		}
		if !promIdent.MatchString(l) {
			return nil, "", fmt.Errorf("%q is not a label name", l)
		}
		labels = append(labels, l)
	}
	return labels, s[end+1:], nil
}

// exposition is what a /metrics page holds: each series name with the
// labels it has, a histogram's _bucket, _sum and _count each a name.
type exposition map[string]map[string]bool

// parseExposition reads Prometheus' text format.
func parseExposition(r io.Reader) (exposition, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := exposition{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				add(name+"_bucket", m, model.BucketLabel)
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, model.QuantileLabel)
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out, nil
}

// targetLabels are the labels Prometheus gives every series of a target
// as it scrapes (the job, the instance, and the pod's from Kubernetes
// service discovery): no exporter shows them.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "container": true, "service": true, "endpoint": true}

// query is one PromQL expression of a file, and where it is.
type query struct {
	where, expr string
}

// unexported checks queries against an exposition: every metric a
// selector names must be exported, every label of a matcher must be on
// that metric, and every grouping label on one of the expression's
// metrics, unless Prometheus adds it. eventOnly names metrics the
// exposition cannot show, which are held to nothing here.
func unexported(queries []query, exp exposition, eventOnly map[string]bool) error {
	var errs []error
	for _, q := range queries {
		refs, err := parsePromQL(q.expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", q.where, q.expr, err))
			continue
		}
		if len(refs.selectors) == 0 {
			errs = append(errs, fmt.Errorf("%s: %q: names no metric", q.where, q.expr))
		}
		seen := map[string]bool{}
		for _, sel := range refs.selectors {
			if sel.metric == "" {
				errs = append(errs, fmt.Errorf("%s: %q: a selector with no metric name", q.where, q.expr))
				continue
			}
			if eventOnly[sel.metric] {
				continue
			}
			labels, ok := exp[sel.metric]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: metric %s: exprd does not export it (%q)", q.where, sel.metric, q.expr))
				continue
			}
			maps.Copy(seen, labels)
			for _, l := range sel.labels {
				if !labels[l] && !targetLabels[l] {
					errs = append(errs, fmt.Errorf("%s: metric %s has no label %s (it has %v)", q.where, sel.metric, l, slices.Sorted(maps.Keys(labels))))
				}
			}
		}
		for _, l := range refs.grouping {
			if !seen[l] && !targetLabels[l] && !slices.ContainsFunc(refs.selectors, func(s selector) bool { return eventOnly[s.metric] }) {
				errs = append(errs, fmt.Errorf("%s: grouping by %s, which none of the metrics has (%q)", q.where, l, q.expr))
			}
		}
	}
	return errors.Join(errs...)
}

// TestParsePromQL checks the reader on the forms the dashboard and the
// rules use, and on what it must refuse.
func TestParsePromQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr string
		metrics    []string // metric[label,label]
		grouping   []string
		err        string
	}{
		{"a bare metric", "go_goroutines", []string{"go_goroutines[]"}, nil, ""},
		{"a rate over a Grafana range", `rate(exprd_calls_total{namespace="$namespace", pod=~"$pod"}[$__rate_interval])`, []string{"exprd_calls_total[namespace,pod]"}, nil, ""},
		{"an aggregation with by first", `sum by (service, outcome) (rate(exprd_calls_total[5m]))`, []string{"exprd_calls_total[]"}, []string{"service", "outcome"}, ""},
		{"an aggregation with by after", `sum(rate(exprd_calls_total[5m])) by (pod)`, []string{"exprd_calls_total[]"}, []string{"pod"}, ""},
		{"a quantile of a histogram", `histogram_quantile(0.99, sum by (le, tool) (rate(exprd_tool_duration_seconds_bucket{outcome!="ok"}[5m])))`, []string{"exprd_tool_duration_seconds_bucket[outcome]"}, []string{"le", "tool"}, ""},
		{"a ratio with a threshold", `process_resident_memory_bytes / on (pod) go_gc_gomemlimit_bytes > 0.9`, []string{"process_resident_memory_bytes[]", "go_gc_gomemlimit_bytes[]"}, []string{"pod"}, ""},
		{"numbers, offsets and a subquery", `max_over_time(exprd_registry_staleness_seconds[1h:1m] offset 5m) > 1e3 and 60 < 0x10`, []string{"exprd_registry_staleness_seconds[]"}, nil, ""},
		{"a keyword that is no metric", `exprd_sessions_open > bool 16000 unless exprd_panics_total`, []string{"exprd_sessions_open[]", "exprd_panics_total[]"}, nil, ""},
		{"a __name__ matcher", `{__name__="exprd_calls_total", service="exprtool"}`, []string{"exprd_calls_total[service]"}, nil, ""},
		{"a regex with escapes and a comment", "rate(x_total{m=~\"exprd\\\\.v1\\\\..+\"}[5m]) # x_total\n", []string{"x_total[m]"}, nil, ""},
		{"Grafana variables outside a string", `sum(rate(x_total[${__rate_interval}])) * $scale`, []string{"x_total[]"}, nil, ""},
		{"an unclosed parenthesis", `sum(rate(x_total[5m])`, nil, nil, "left open"},
		{"an unterminated string", `x_total{a="b}`, nil, nil, "unterminated"},
		{"a matcher with no operator", `x_total{a "b"}`, nil, nil, "want =, !=, =~ or !~"},
		{"a stray bracket", `x_total]`, nil, nil, "closes nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			refs, err := parsePromQL(tt.expr)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("parsePromQL(%q): got %v, want an error containing %q", tt.expr, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePromQL(%q): %v", tt.expr, err)
			}
			var got []string
			for _, s := range refs.selectors {
				got = append(got, s.metric+"["+strings.Join(s.labels, ",")+"]")
			}
			if !slices.Equal(got, tt.metrics) || !slices.Equal(refs.grouping, tt.grouping) {
				t.Errorf("parsePromQL(%q): got %v grouping %v, want %v grouping %v", tt.expr, got, refs.grouping, tt.metrics, tt.grouping)
			}
		})
	}
}

// TestUnexportedCatches holds queries to a fixed exposition and expects
// exactly the misnamed metric or label to be named.
func TestUnexportedCatches(t *testing.T) {
	t.Parallel()
	const page = `# TYPE exprd_calls_total counter
exprd_calls_total{service="exprtool",outcome="ok",reason=""} 3
# TYPE exprd_tool_duration_seconds histogram
exprd_tool_duration_seconds_bucket{tool="math.add",outcome="ok",le="0.1"} 1
exprd_tool_duration_seconds_bucket{tool="math.add",outcome="ok",le="+Inf"} 1
exprd_tool_duration_seconds_sum{tool="math.add",outcome="ok"} 0.01
exprd_tool_duration_seconds_count{tool="math.add",outcome="ok"} 1
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4e+07
`
	exp, err := parseExposition(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, expr, want string // want: "" for no error
	}{
		{"exported names", `sum by (le, tool) (rate(exprd_tool_duration_seconds_bucket{namespace="x"}[5m]))`, ""},
		{"a histogram's count", `exprd_tool_duration_seconds_count / exprd_tool_duration_seconds_sum`, ""},
		{"a misspelt metric", `sum(rate(exprd_call_total[5m]))`, "metric exprd_call_total: exprd does not export it"},
		{"a histogram without its suffix", `rate(exprd_tool_duration_seconds[5m])`, "metric exprd_tool_duration_seconds: exprd does not export it"},
		{"a counter without _total", `rate(exprd_calls[5m])`, "metric exprd_calls: exprd does not export it"},
		{"a label the metric lacks", `exprd_calls_total{grpc_code="OK"}`, "metric exprd_calls_total has no label grpc_code"},
		{"grouping by a label no metric has", `sum by (method) (exprd_calls_total)`, "grouping by method"},
		{"an event-only metric", `increase(exprd_panics_total[1h]) > 0`, ""},
		{"a constant", `vector(1)`, "names no metric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := unexported([]query{{"case", tt.expr}}, exp, map[string]bool{"exprd_panics_total": true})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexported(%q): got %v, want no error", tt.expr, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("unexported(%q): got %v, want an error containing %q", tt.expr, err, tt.want)
			}
		})
	}
}
