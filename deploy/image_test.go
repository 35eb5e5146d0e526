package deploy_test

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repoRoot is exprd's module and the image's build context.
const repoRoot = ".."

// maxContextBytes bounds the build context: past it, something large is
// probably missing from .dockerignore.
const maxContextBytes = 64 << 20

// scratch holds what the tests build once and share.
var scratch string

func TestMain(m *testing.M) {
	var err error
	if scratch, err = os.MkdirTemp("", "exprd-deploy-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(scratch)
	os.Exit(code)
}

var image struct {
	once        sync.Once
	bin         string
	contextSize int64
	err         error
}

// imageBinary is the exprd the image would hold: the Dockerfile's go build
// line, run as written on a copy of the build context that .dockerignore
// leaves, for this machine's OS and architecture.
func imageBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the image is Linux; on %s its binary can be neither checked as ELF nor run", runtime.GOOS)
	}
	image.once.Do(func() { image.bin, image.contextSize, image.err = buildImageBinary() })
	if image.err != nil {
		t.Fatal(image.err)
	}
	return image.bin
}

func buildImageBinary() (bin string, contextSize int64, err error) {
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		return "", 0, err
	}
	df, err := parseDockerfile(string(data))
	if err != nil {
		return "", 0, err
	}
	b, err := df.buildCommand(map[string]string{"TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH})
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", dockerfilePath, err)
	}
	ctxDir := filepath.Join(scratch, "context")
	size, err := copyContext(repoRoot, ctxDir)
	if err != nil {
		return "", 0, fmt.Errorf("build context: %w", err)
	}
	if size > maxContextBytes {
		return "", size, fmt.Errorf("build context: %d MiB, want at most %d MiB: is something large missing from .dockerignore?", size>>20, maxContextBytes>>20)
	}
	bin = filepath.Join(scratch, "exprd")
	args := slices.Clone(b.args)
	args[slices.Index(args, "-o")+1] = bin
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	// WORKDIR holds the context (COPY . .), and the golang image sets no
	// GOFLAGS: neither does this build.
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	for k, v := range b.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("%s line %d: go %s in the build context: %v\n%s", dockerfilePath, b.line, strings.Join(b.args, " "), err, out)
	}
	return bin, size, nil
}

// copyContext copies what `docker build` would send from root: every file
// that .dockerignore does not exclude. It returns the bytes copied.
func copyContext(root, dst string) (int64, error) {
	var patterns []string
	if f, err := os.Open(filepath.Join(root, ".dockerignore")); err == nil {
		patterns, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf(".dockerignore: %w", err)
		}
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return 0, fmt.Errorf(".dockerignore: %w", err)
	}
	var size int64
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		skip, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		switch {
		case skip && d.IsDir() && !pm.Exclusions():
			return filepath.SkipDir
		case skip:
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, filepath.Join(dst, rel))
		case !d.Type().IsRegular():
			return nil
		}
		n, err := copyFile(p, filepath.Join(dst, rel))
		size += n
		return err
	})
	return size, err
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	return n, errors.Join(err, out.Close())
}

// TestImageBinary builds exprd as the Dockerfile does and checks that the
// result is static and stripped, with the settings the Dockerfile asks for.
func TestImageBinary(t *testing.T) {
	t.Parallel()
	bin := imageBinary(t)
	t.Logf("build context: %.1f MiB", float64(image.contextSize)/(1<<20))
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for _, tt := range []struct {
		name string
		fail func() string
	}{
		{"no program interpreter", func() string {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					return fmt.Sprintf("got a %v program header, want a static binary", p.Type)
				}
			}
			return ""
		}},
		{"no dynamic section or libraries", func() string {
			libs, _ := f.ImportedLibraries()
			if f.Section(".dynamic") != nil || len(libs) > 0 {
				return fmt.Sprintf("got .dynamic %v, libraries %v; want neither", f.Section(".dynamic") != nil, libs)
			}
			return ""
		}},
		{"stripped (-s -w)", func() string {
			for _, s := range f.Sections {
				if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
					return fmt.Sprintf("got section %s, want symbols and DWARF stripped", s.Name)
				}
			}
			return ""
		}},
		{"build settings", func() string {
			// -ldflags is not recorded with -trimpath (go.dev/issue/52372);
			// "stripped" checks its -s -w.
			want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": runtime.GOOS, "GOARCH": runtime.GOARCH}
			for k, v := range want {
				if settings[k] != v {
					return fmt.Sprintf("build setting %s: got %q, want %q", k, settings[k], v)
				}
			}
			if info.Path != "github.com/exprd/exprd/cmd/exprd" {
				return fmt.Sprintf("main package: got %s, want github.com/exprd/exprd/cmd/exprd", info.Path)
			}
			return ""
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if msg := tt.fail(); msg != "" {
				t.Errorf("%s: %s", bin, msg)
			}
		})
	}
}
