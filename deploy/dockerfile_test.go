package deploy_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"go/version"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerfilePath is the image's Dockerfile; its build context is repoRoot.
const dockerfilePath = "Dockerfile"

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	line  int
	cmd   string   // upper case: FROM, RUN, COPY, ...
	flags []string // leading --flags, as written: --from=build
	args  string   // the rest, as written
	exec  []string // the exec (JSON) form, when args is one
}

// flag is the value of a --name=value flag, or "".
func (in instruction) flag(name string) string {
	for _, f := range in.flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

type stage struct {
	name, base string
	body       []instruction
}

// dockerfile is a parsed Dockerfile: the ARGs before the first FROM with
// their defaults, and the stages.
type dockerfile struct {
	args   map[string]string
	stages []stage
}

// parseDockerfile reads the subset of Dockerfile syntax the checks need:
// comments and parser directives, line continuations, flags, the shell and
// exec forms. Heredocs are not supported and are an error.
func parseDockerfile(data string) (*dockerfile, error) {
	df := &dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(data))
	var ins []instruction
	var cur strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, more := strings.CutSuffix(line, "\\"); more {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, rest, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{line: start, cmd: strings.ToUpper(cmd)}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			f, r, _ := strings.Cut(rest, " ")
			in.flags, rest = append(in.flags, f), strings.TrimSpace(r)
		}
		in.args = rest
		if strings.Contains(rest, "<<") {
			return nil, fmt.Errorf("line %d: heredocs are not supported by this parser", start)
		}
		if strings.HasPrefix(rest, "[") {
			if err := json.Unmarshal([]byte(rest), &in.exec); err != nil {
				return nil, fmt.Errorf("line %d: %s: exec form: %w", start, in.cmd, err)
			}
		}
		ins = append(ins, in)
	}
	if cur.Len() > 0 {
		return nil, errors.New("the last instruction ends in a line continuation")
	}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			} else if len(f) != 1 {
				return nil, fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", in.line, in.args)
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0 && in.cmd == "ARG":
			for _, a := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(a, "=")
				df.args[k] = v
			}
		case len(df.stages) == 0:
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		default:
			st := &df.stages[len(df.stages)-1]
			st.body = append(st.body, in)
		}
	}
	if len(df.stages) == 0 {
		return nil, errors.New("no FROM")
	}
	return df, nil
}

func readDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(string(data))
	if err != nil {
		t.Fatalf("%s: %v", dockerfilePath, err)
	}
	return df
}

var variable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expand replaces $VAR and ${VAR} from vars; an unknown one is an error.
func expand(s string, vars map[string]string) (string, error) {
	var missing []string
	out := variable.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if missing != nil {
		return "", fmt.Errorf("%q: no value for %v", s, missing)
	}
	return out, nil
}

// final is the stage the image is made of.
func (df *dockerfile) final() stage { return df.stages[len(df.stages)-1] }

// stage finds a stage by name.
func (df *dockerfile) stage(name string) (stage, bool) {
	i := slices.IndexFunc(df.stages, func(s stage) bool { return s.name == name })
	if i < 0 {
		return stage{}, false
	}
	return df.stages[i], true
}

// last is the stage's last instruction of a kind.
func (s stage) last(cmd string) (instruction, bool) {
	for i := len(s.body) - 1; i >= 0; i-- {
		if s.body[i].cmd == cmd {
			return s.body[i], true
		}
	}
	return instruction{}, false
}

// binaryCopy is the final stage's COPY --from of the built binary: the
// build stage, the path built there and the path in the image.
func (df *dockerfile) binaryCopy() (from, src, dst string, err error) {
	entry, ok := df.final().last("ENTRYPOINT")
	if !ok || len(entry.exec) == 0 {
		return "", "", "", errors.New("final stage: want an ENTRYPOINT in exec form, [\"/path/to/exprd\"]")
	}
	for _, in := range df.final().body {
		f := strings.Fields(in.args)
		if in.cmd == "COPY" && in.flag("from") != "" && len(f) == 2 && f[1] == entry.exec[0] {
			return in.flag("from"), f[0], f[1], nil
		}
	}
	return "", "", "", fmt.Errorf("final stage: no COPY --from=<stage> <built> %s, the ENTRYPOINT", entry.exec[0])
}

// goBuild is the build stage's go build command.
type goBuild struct {
	env  map[string]string // the assignments before `go`
	args []string          // after `go`: build, flags, packages
	out  string            // -o
	line int
}

// buildCommand finds the RUN with `go build` in the stage the binary is
// copied from and splits it into its environment and arguments. The RUN
// must be that one command, so that the test can run it as written.
func (df *dockerfile) buildCommand(vars map[string]string) (*goBuild, error) {
	from, src, _, err := df.binaryCopy()
	if err != nil {
		return nil, err
	}
	st, ok := df.stage(from)
	if !ok {
		return nil, fmt.Errorf("COPY --from=%s: no stage of that name", from)
	}
	for _, in := range st.body {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		words, err := shellWords(in.args)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", in.line, err)
		}
		b := &goBuild{env: map[string]string{}, line: in.line}
		i := 0
		for ; i < len(words) && words[i] != "go"; i++ {
			k, v, ok := strings.Cut(words[i], "=")
			if !ok {
				return nil, fmt.Errorf("line %d: RUN: %q before go: want only VAR=value assignments", in.line, words[i])
			}
			if b.env[k], err = expand(v, vars); err != nil {
				return nil, fmt.Errorf("line %d: %w", in.line, err)
			}
		}
		if i+1 >= len(words) || words[i+1] != "build" {
			return nil, fmt.Errorf("line %d: RUN: want `[VAR=value ...] go build ...`", in.line)
		}
		for _, w := range words[i+1:] {
			w, err := expand(w, vars)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", in.line, err)
			}
			b.args = append(b.args, w)
		}
		if j := slices.Index(b.args, "-o"); j >= 0 && j+1 < len(b.args) {
			b.out = b.args[j+1]
		}
		if b.out != src {
			return nil, fmt.Errorf("line %d: go build -o %q, but the final stage copies %q", in.line, b.out, src)
		}
		return b, nil
	}
	return nil, fmt.Errorf("stage %s: no RUN ... go build", from)
}

// ldflags is the -ldflags value.
func (b *goBuild) ldflags() []string {
	for i, a := range b.args {
		if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
			return strings.Fields(v)
		}
		if a == "-ldflags" && i+1 < len(b.args) {
			return strings.Fields(b.args[i+1])
		}
	}
	return nil
}

// shellWords splits a simple shell command into words: quotes and
// backslashes as sh reads them; any operator (; & | < > ( ) `) is refused.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case strings.IndexByte(";&|<>()`", c) >= 0:
			return nil, fmt.Errorf("%q: want one plain command, found %q", s, c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// dockerfileCheck is one check of the Dockerfile against the base's
// Deployment.
type dockerfileCheck struct {
	name  string
	check func(df *dockerfile, base *manifest) error
}

var dockerfileChecks = []dockerfileCheck{
	{"multi-stage", func(df *dockerfile, _ *manifest) error {
		if len(df.stages) < 2 {
			return fmt.Errorf("stages: got %d, want a build stage and a final one", len(df.stages))
		}
		return nil
	}},
	{"final base is distroless static or scratch", func(df *dockerfile, _ *manifest) error {
		if b := df.final().base; b != "scratch" && !strings.HasPrefix(b, "gcr.io/distroless/static") {
			return fmt.Errorf("final FROM: got %s, want gcr.io/distroless/static* or scratch", b)
		}
		return nil
	}},
	{"builder Go is at least go.mod's", func(df *dockerfile, _ *manifest) error {
		return builderGo(df)
	}},
	{"USER is numeric, non-root, and the pod's", func(df *dockerfile, base *manifest) error {
		u, ok := df.final().last("USER")
		if !ok {
			return errors.New("final stage: no USER")
		}
		uid, _, _ := strings.Cut(u.args, ":")
		n, err := strconv.ParseInt(uid, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("USER %s: want a numeric non-zero UID, which runAsNonRoot can verify", u.args)
		}
		pod := base.deployment.Spec.Template.Spec.SecurityContext
		if pod != nil && pod.RunAsUser != nil && *pod.RunAsUser != n {
			return fmt.Errorf("USER %s: the pod's runAsUser is %d; want the same", u.args, *pod.RunAsUser)
		}
		return nil
	}},
	{"ENTRYPOINT is the built exprd, demo off", func(df *dockerfile, _ *manifest) error {
		_, _, dst, err := df.binaryCopy()
		if err != nil {
			return err
		}
		if path.Base(dst) != "exprd" {
			return fmt.Errorf("ENTRYPOINT %s: want the exprd binary", dst)
		}
		for _, in := range df.final().body {
			if (in.cmd == "ENTRYPOINT" || in.cmd == "CMD" || in.cmd == "ENV") && strings.Contains(strings.ToLower(in.args), "demo") {
				return fmt.Errorf("line %d: %s %s: the image must not turn the demo on", in.line, in.cmd, in.args)
			}
		}
		return nil
	}},
	{"build is static and stripped", func(df *dockerfile, _ *manifest) error {
		b, err := df.buildCommand(map[string]string{"TARGETOS": "linux", "TARGETARCH": "amd64"})
		if err != nil {
			return err
		}
		var errs []error
		if b.env["CGO_ENABLED"] != "0" {
			errs = append(errs, fmt.Errorf("line %d: CGO_ENABLED: got %q, want 0", b.line, b.env["CGO_ENABLED"]))
		}
		if !slices.Contains(b.args, "-trimpath") {
			errs = append(errs, fmt.Errorf("line %d: go build: no -trimpath", b.line))
		}
		if ld := b.ldflags(); !slices.Contains(ld, "-s") || !slices.Contains(ld, "-w") {
			errs = append(errs, fmt.Errorf("line %d: -ldflags: got %q, want -s -w", b.line, ld))
		}
		if pkg := b.args[len(b.args)-1]; pkg != "./cmd/exprd" {
			errs = append(errs, fmt.Errorf("line %d: go build: got package %s, want ./cmd/exprd", b.line, pkg))
		}
		return errors.Join(errs...)
	}},
	{"EXPOSE matches the container ports", func(df *dockerfile, base *manifest) error {
		var exposed, ports []string
		for _, in := range df.final().body {
			if in.cmd == "EXPOSE" {
				for _, p := range strings.Fields(in.args) {
					exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
				}
			}
		}
		c, err := base.container()
		if err != nil {
			return err
		}
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprint(p.ContainerPort))
		}
		slices.Sort(exposed)
		slices.Sort(ports)
		if !slices.Equal(exposed, ports) {
			return fmt.Errorf("EXPOSE: got %v, want the container ports %v", exposed, ports)
		}
		return nil
	}},
}

// TestDockerfile checks the Dockerfile against what the manifests expect
// of the image.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	df := readDockerfile(t)
	base := mustBuild(t, k8sDir+"/base")
	for _, c := range dockerfileChecks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.check(df, base); err != nil {
				t.Errorf("%s: %v", dockerfilePath, err)
			}
		})
	}
}

// TestDockerfileChecksCatch edits the Dockerfile one way at a time and
// expects the named check to fail.
func TestDockerfileChecksCatch(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	base := mustBuild(t, k8sDir+"/base")
	tests := []struct {
		check, old, new string
	}{
		{"multi-stage", "FROM gcr.io/distroless/static-debian12:nonroot\nCOPY --from=build /out/exprd /usr/local/bin/exprd\n", ""},
		{"final base is distroless static or scratch", "gcr.io/distroless/static-debian12:nonroot", "debian:12"},
		{"builder Go is at least go.mod's", "GO_VERSION=1.26.8", "GO_VERSION=1.25.3"},
		{"USER is numeric, non-root, and the pod's", "USER 65532:65532", "USER nonroot"},
		{"USER is numeric, non-root, and the pod's", "USER 65532:65532", "USER 0"},
		{"USER is numeric, non-root, and the pod's", "USER 65532:65532", "USER 1000"},
		{"ENTRYPOINT is the built exprd, demo off", `ENTRYPOINT ["/usr/local/bin/exprd"]`, `ENTRYPOINT ["/usr/local/bin/exprd", "--demo"]`},
		{"ENTRYPOINT is the built exprd, demo off", `ENTRYPOINT ["/usr/local/bin/exprd"]`, `ENTRYPOINT /usr/local/bin/exprd`},
		{"build is static and stripped", "CGO_ENABLED=0", "CGO_ENABLED=1"},
		{"build is static and stripped", "-trimpath ", ""},
		{"build is static and stripped", `-ldflags="-s -w"`, `-ldflags="-s"`},
		{"build is static and stripped", "./cmd/exprd\n", "./cmd/exprd && ls /out\n"},
		{"build is static and stripped", "-o /out/exprd", "-o /out/server"},
		{"EXPOSE matches the container ports", "EXPOSE 50051 9090", "EXPOSE 50051"},
	}
	for _, tt := range tests {
		t.Run(tt.check+": "+tt.new, func(t *testing.T) {
			t.Parallel()
			text := strings.Replace(string(data), tt.old, tt.new, 1)
			if !strings.Contains(string(data), tt.old) {
				t.Fatalf("%q is not in %s: update the case", tt.old, dockerfilePath)
			}
			i := slices.IndexFunc(dockerfileChecks, func(c dockerfileCheck) bool { return c.name == tt.check })
			df, err := parseDockerfile(text)
			if err == nil {
				err = dockerfileChecks[i].check(df, base)
			}
			if err == nil {
				t.Errorf("after the edit: got no error, want one")
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// builderGo checks that the build stage's golang image is at least the Go
// version exprd's go.mod asks for.
func builderGo(df *dockerfile) error {
	from, _, _, err := df.binaryCopy()
	if err != nil {
		return err
	}
	st, _ := df.stage(from)
	img, err := expand(st.base, df.args)
	if err != nil {
		return fmt.Errorf("FROM %s: %w", st.base, err)
	}
	name, tag, _ := strings.Cut(img, ":")
	if name != "golang" && !strings.HasSuffix(name, "/golang") {
		return fmt.Errorf("build stage FROM %s: want a golang image", img)
	}
	v, _, _ := strings.Cut(tag, "-")
	mod, err := os.ReadFile(repoRoot + "/go.mod")
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		return errors.New("go.mod: no go line")
	}
	if !version.IsValid("go"+v) || version.Compare("go"+v, "go"+string(m[1])) < 0 {
		return fmt.Errorf("build stage FROM %s: Go %s, want at least go.mod's %s", img, v, m[1])
	}
	return nil
}
