package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/exprd/exprd"

// TestImportDirection fails when a package reaches what it must not, even
// through another package.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps=false", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rules := []struct {
		pkgPrefix string
		forbidden []string
	}{
		{module + "/evaluator", []string{module + "/server", module + "/client", module + "/gen", "google.golang.org/grpc"}},
		{module + "/utcp", []string{module + "/server", module + "/client", "google.golang.org/grpc/status", "google.golang.org/grpc/codes"}},
		{module + "/model", []string{module + "/server", module + "/client", "google.golang.org/grpc"}},
		{module + "/codemode", []string{module + "/server", module + "/client", "google.golang.org/grpc/status", "google.golang.org/grpc/codes"}},
		{module + "/agent", []string{module + "/server", module + "/client", "google.golang.org/grpc/status", "google.golang.org/grpc/codes"}},
		{module + "/client", []string{module + "/server", module + "/evaluator"}},
		{module + "/gen", []string{module + "/server", module + "/client", module + "/evaluator"}},
	}
	checked := 0
	for _, pkg := range strings.Fields(string(out)) {
		for _, r := range rules {
			if pkg != r.pkgPrefix && !strings.HasPrefix(pkg, r.pkgPrefix+"/") {
				continue
			}
			checked++
			deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", pkg, err)
			}
			for _, d := range strings.Fields(string(deps)) {
				for _, f := range r.forbidden {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s imports %s (directly or not); DESIGN.md's layout forbids it", pkg, d)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked")
	}
}
