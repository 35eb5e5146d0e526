package layout

import (
	"slices"
	"strings"
	"testing"
)

// allowed is which of the module's packages each package may import
// itself, one line per package; docs/architecture.md says what each owns.
// A package not listed, or an import not listed, fails: a new edge is a
// decision, made here and in docs/architecture.md.
var allowed = map[string][]string{
	"agent":                          {"codemode", "evaluator", "internal/schemafast", "model", "utcp"},
	"client":                         {"gen/exprd/v1"},
	"cmd/exprctl":                    {"client", "gen/exprd/v1"},
	"cmd/exprd":                      {"codemode", "demo", "demo/providers", "evaluator", "internal/egress", "internal/overload", "internal/procs", "mcpserve", "membudget", "model", "model/openaicompat", "model/scripted", "server", "server/auth", "server/ratelimit", "toolstore", "turnstore", "utcp", "utcp/utcpall"},
	"codemode":                       {"evaluator", "internal/exprbound", "internal/turns", "membudget", "model", "utcp", "utcp/manual", "utcp/search"},
	"demo":                           {"evaluator"},
	"demo/providers":                 {"demo", "gen/grpcpb"},
	"evaluator":                      {"evaluator/jsonvalue", "internal/exprbound", "internal/procs", "internal/schemafast", "internal/turns", "membudget"},
	"evaluator/evaltest":             {"evaluator"},
	"evaluator/jsonvalue":            {},
	"examples/node":                  {},
	"examples/python":                {},
	"gen/exprd/v1":                   {},
	"gen/grpcpb":                     {},
	"internal/testkit/benchpair":     {"internal/procs"},
	"internal/testkit/tcpcut":        {},
	"internal/egress":                {},
	"internal/testkit/egresstest":    {},
	"internal/exprbound":             {},
	"internal/testkit/exprdproc":     {},
	"internal/testkit/etcdproc":      {"internal/testkit/exprdproc"},
	"internal/layout":                {},
	"internal/overload":              {"membudget"},
	"internal/procs":                 {},
	"internal/readme":                {},
	"internal/recvgate":              {"membudget"},
	"internal/testkit/testcert":      {},
	"internal/turns":                 {},
	"internal/testkit/mcpeverything": {},
	"internal/redact":                {},
	"internal/schemafast":            {},
	"internal/sse":                   {},
	"mcpserve":                       {"codemode", "internal/overload", "membudget", "utcp", "utcp/manual", "utcp/search", "utcp/toolscope"},
	"membudget":                      {},
	"model":                          {},
	"model/openaicompat":             {"internal/sse", "membudget", "model"},
	"model/scripted":                 {},
	"server":                         {"agent", "codemode", "evaluator", "gen/exprd/v1", "internal/overload", "internal/recvgate", "internal/turns", "membudget", "model", "server/auth", "server/internal/rpcstatus", "server/internal/stream", "server/limits", "server/ratelimit", "toolstore", "turnstore", "utcp", "utcp/manual", "utcp/toolscope", "utcp/userinput", "utcp/vars"},
	"server/auth":                    {"gen/exprd/v1", "server/internal/rpcstatus", "utcp/toolscope"},
	"server/internal/rpcstatus":      {"gen/exprd/v1", "membudget"},
	"server/internal/stream":         {"gen/exprd/v1", "membudget", "server/internal/rpcstatus"},
	"server/limits":                  {"server/internal/rpcstatus", "server/ratelimit"},
	"server/ratelimit":               {"membudget", "server/auth", "server/internal/rpcstatus"},
	"toolstore":                      {"utcp", "utcp/manual"},
	"turnstore":                      {"membudget"},
	"utcp":                           {"internal/egress", "internal/redact", "internal/turns", "membudget", "utcp/manual", "utcp/vars"},
	"utcp/grpctransport":             {"gen/grpcpb", "internal/egress", "utcp", "utcp/manual"},
	"utcp/hostiletest":               {},
	"utcp/httptransport":             {"internal/sse", "utcp", "utcp/manual"},
	"utcp/internal/utcptest":         {"internal/egress", "utcp", "utcp/utcpall", "utcp/vars"},
	"utcp/manual":                    {"internal/schemafast", "internal/turns"},
	"utcp/mcptransport":              {"utcp", "utcp/manual", "utcp/userinput"},
	"utcp/openapi":                   {"internal/turns", "utcp", "utcp/httptransport", "utcp/manual"},
	"utcp/search":                    {"utcp", "utcp/manual"},
	"utcp/toolscope":                 {"utcp", "utcp/manual"},
	"utcp/userinput":                 {"utcp/manual"},
	"utcp/utcpall":                   {"utcp", "utcp/grpctransport", "utcp/httptransport", "utcp/mcptransport", "utcp/openapi", "utcp/search"},
	"utcp/vars":                      {"utcp/manual"},
}

// TestImportAllowlist fails when a package imports one of the module's
// packages its line in allowed does not list (tests excluded: they may
// reach wider, e.g. utcp/utcpall).
func TestImportAllowlist(t *testing.T) {
	t.Parallel()
	seen := 0
	for _, line := range goList(t, "-f", `{{.ImportPath}}:{{join .Imports ","}}`, module+"/...") {
		pkg, imps, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, module+"/")
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("%s is not in the import allowlist: add its line (and one in docs/architecture.md)", pkg)
			continue
		}
		seen++
		for _, imp := range strings.Split(imps, ",") {
			rel, ours := strings.CutPrefix(imp, module+"/")
			if ours && !slices.Contains(may, rel) {
				t.Errorf("%s imports %s, which its allowlist line does not list", pkg, rel)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no package was checked")
	}
}
