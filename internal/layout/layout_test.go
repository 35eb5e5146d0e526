package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/exprd/exprd"

// rule forbids a package (and those under it) to reach some packages:
// through any chain of imports (deps), or by importing them itself
// (imports). gRPC's status and codes are checked directly, since grpc-go
// itself imports them: only server/ turns core errors into gRPC statuses.
type rule struct {
	pkg     string
	deps    []string
	imports []string
	// exempt packages under pkg follow their own rule.
	exempt []string
}

var grpcStatus = []string{"google.golang.org/grpc/status", "google.golang.org/grpc/codes"}

var rules = []rule{
	{pkg: module + "/evaluator", deps: []string{module + "/server", module + "/client", module + "/gen", "google.golang.org/grpc"}},
	{pkg: module + "/model", deps: []string{module + "/server", module + "/client", "google.golang.org/grpc"}},
	{pkg: module + "/utcp", deps: []string{module + "/server", module + "/client"}, imports: grpcStatus, exempt: []string{module + "/utcp/grpctransport"}},
	// The gRPC transport reads providers' statuses: it may import them,
	// but nothing of ours above it.
	{pkg: module + "/utcp/grpctransport", deps: []string{module + "/server", module + "/client"}},
	{pkg: module + "/codemode", deps: []string{module + "/server", module + "/client"}, imports: grpcStatus},
	{pkg: module + "/mcpserve", deps: []string{module + "/server", module + "/client", "google.golang.org/grpc"}, imports: grpcStatus},
	{pkg: module + "/agent", deps: []string{module + "/server", module + "/client"}, imports: grpcStatus},
	{pkg: module + "/client", deps: []string{module + "/server", module + "/evaluator"}},
	{pkg: module + "/gen", deps: []string{module + "/server", module + "/client", module + "/evaluator"}},
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestImportDirection fails when a package reaches what rules forbid it:
// the direction docs/architecture.md draws.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, pkg := range goList(t, "-f", "{{.ImportPath}}", module+"/...") {
		for _, r := range rules {
			if !under(pkg, r.pkg) || exempted(pkg, r) {
				continue
			}
			checked++
			for _, d := range goList(t, "-deps", "-f", "{{.ImportPath}}", pkg) {
				for _, f := range r.deps {
					if under(d, f) {
						t.Errorf("%s reaches %s, which its rule forbids (docs/architecture.md)", pkg, d)
					}
				}
			}
			for _, d := range goList(t, "-f", `{{join .Imports " "}}`, pkg) {
				for _, f := range r.imports {
					if d == f {
						t.Errorf("%s imports %s: only server/ maps errors to gRPC statuses", pkg, d)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked")
	}
}

func exempted(pkg string, r rule) bool {
	for _, e := range r.exempt {
		if under(pkg, e) {
			return true
		}
	}
	return false
}
