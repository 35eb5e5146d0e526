package vars

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Loader is a source of variables after the configured ones (the SDK's
// `load_variables_from`). Lookup gets the namespaced key. A loader is an
// operator's source: never one a client can write to.
type Loader interface {
	Lookup(key string) (string, bool)
}

// LoaderFunc adapts a function to Loader.
type LoaderFunc func(key string) (string, bool)

// Lookup calls f.
func (f LoaderFunc) Lookup(key string) (string, bool) { return f(key) }

// DotEnv holds the variables of a .env file.
type DotEnv map[string]string

// Lookup returns a non-empty value of key.
func (d DotEnv) Lookup(key string) (string, bool) {
	v, ok := d[key]
	return v, ok && v != ""
}

// MaxDotEnvBytes bounds a .env file.
const MaxDotEnvBytes = 1 << 20

// LoadDotEnv reads a .env file (see ParseDotEnv).
func LoadDotEnv(path string) (DotEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseDotEnv(io.LimitReader(f, MaxDotEnvBytes+1))
}

// ParseDotEnv reads `KEY=value` lines: `export ` before the key is allowed,
// `#` starts a comment (outside quotes), values may be 'single quoted'
// (taken literally) or "double quoted" (with \n, \t, \", \\ escapes and
// spanning lines). A line without `=` is an error naming its number.
//
// As python-dotenv (the reference client's loader) does, `${NAME}` and
// `${NAME:-default}` in an unquoted or double-quoted value are expanded:
// from a key earlier in the file, else from the process environment (the
// operator named it in the file), else the default. A reference with
// none of these is an error naming its line: it would otherwise be sent
// literally. `$NAME` without braces is kept as written.
func ParseDotEnv(r io.Reader) (DotEnv, error) {
	return parseDotEnv(r, os.LookupEnv)
}

func parseDotEnv(r io.Reader, lookupEnv func(string) (string, bool)) (DotEnv, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDotEnvBytes {
		return nil, fmt.Errorf(".env: over %d bytes", MaxDotEnvBytes)
	}
	out := DotEnv{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxDotEnvBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, rest, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !validVarName(key) {
			return nil, fmt.Errorf(".env line %d: want KEY=value", lineNo)
		}
		rest = strings.TrimLeft(rest, " \t")
		var val string
		switch {
		case strings.HasPrefix(rest, `"`):
			body := rest[1:]
			for !closedDoubleQuote(body) {
				if !sc.Scan() {
					return nil, fmt.Errorf(".env line %d: unterminated double quote", lineNo)
				}
				lineNo++
				body += "\n" + strings.TrimSuffix(sc.Text(), "\r")
			}
			var err error
			if val, err = expandDotEnv(unescapeDouble(body[:closingQuote(body)]), out, lookupEnv); err != nil {
				return nil, fmt.Errorf(".env line %d: %v", lineNo, err)
			}
		case strings.HasPrefix(rest, "'"):
			end := strings.IndexByte(rest[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf(".env line %d: unterminated single quote", lineNo)
			}
			val = rest[1 : 1+end]
		default:
			if i := strings.Index(rest, " #"); i >= 0 {
				rest = rest[:i]
			}
			var err error
			if val, err = expandDotEnv(strings.TrimSpace(rest), out, lookupEnv); err != nil {
				return nil, fmt.Errorf(".env line %d: %v", lineNo, err)
			}
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// dotEnvRef is python-dotenv's expansion: ${NAME} or ${NAME:-default}.
var dotEnvRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::-([^}]*))?\}`)

// expandDotEnv expands a value's ${NAME} references (see ParseDotEnv).
func expandDotEnv(val string, earlier DotEnv, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(val, "${") {
		return val, nil
	}
	var missing string
	out := dotEnvRef.ReplaceAllStringFunc(val, func(m string) string {
		sub := dotEnvRef.FindStringSubmatch(m)
		name := sub[1]
		if v, ok := earlier[name]; ok {
			return v
		}
		if v, ok := lookupEnv(name); ok {
			return v
		}
		if strings.Contains(m, ":-") {
			return sub[2]
		}
		if missing == "" {
			missing = name
		}
		return m
	})
	if missing != "" {
		return "", fmt.Errorf("${%s} names no earlier key and no environment variable (give it a value, or a default: ${%s:-value})", missing, missing)
	}
	return out, nil
}

func closedDoubleQuote(s string) bool { return closingQuote(s) >= 0 }

func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func unescapeDouble(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// MaxSecretFiles and MaxSecretBytes bound a secrets directory
// (LoadSecretDir, utcp.WithSecretDir): the files read, and the bytes of
// each.
const (
	MaxSecretFiles = 1000
	MaxSecretBytes = 64 << 10
)

// LoadSecretDir reads a directory of files, each a variable: the file's
// name is the namespaced key, its content the value (one trailing newline
// dropped), as Kubernetes mounts a Secret. Names starting with "." (the
// mount's own `..data` links) and directories are skipped.
func LoadSecretDir(dir string) (DotEnv, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := DotEnv{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if !validVarName(name) {
			return nil, fmt.Errorf("%s: %q is not a variable's key (letters, digits and _ only)", dir, name)
		}
		if len(out) == MaxSecretFiles {
			return nil, fmt.Errorf("%s: more than %d files", dir, MaxSecretFiles)
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // follows the mount's symlinks
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			continue
		}
		if fi.Size() > MaxSecretBytes {
			return nil, fmt.Errorf("%s: over %d bytes", path, MaxSecretBytes)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		out[name] = v
	}
	return out, nil
}
