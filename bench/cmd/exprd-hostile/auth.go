package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
)

// tokens are the bearer tokens exprd runs with (--auth-tokens-file): one
// for the steady client, one for case 8's legitimate caller, one admin
// token with registry.write for case 14, and one for each case's clients.
// exprd's rate limiter keys a caller by its token's name when auth is on,
// so each case, and the steady client, is a caller of its own, as each
// load's source address made it one without auth.
type tokens struct {
	steady, legit, admin string
	cases                map[int]string // case number → token
}

// Token names, as exprd's log and errors name the callers.
const (
	steadyName = "steady"
	legitName  = "legit"
	adminName  = "admin"
)

func caseName(n int) string { return fmt.Sprintf("case%d", n) }

// newTokens makes random tokens for cases 1 to n.
func newTokens(n int) *tokens {
	t := &tokens{steady: randomToken(steadyName), legit: randomToken(legitName), admin: randomToken(adminName), cases: map[int]string{}}
	for i := 1; i <= n; i++ {
		t.cases[i] = randomToken(caseName(i))
	}
	return t
}

func randomToken(name string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "hostile-" + name + "-" + hex.EncodeToString(b)
}

// write writes the token file into dir, scopes as docs/configuration.md's
// "Auth tokens" gives them, and returns its path.
func (t *tokens) write(dir string) (string, error) {
	var b strings.Builder
	b.WriteString("# NAME TOKEN SCOPES (exprd-hostile's, for one run)\n")
	fmt.Fprintf(&b, "%s %s exprtool\n", steadyName, t.steady)
	fmt.Fprintf(&b, "%s %s exprtool\n", legitName, t.legit)
	fmt.Fprintf(&b, "%s %s toolregistry,registry.write\n", adminName, t.admin)
	for i := 1; i <= len(t.cases); i++ {
		fmt.Fprintf(&b, "%s %s *\n", caseName(i), t.cases[i])
	}
	path := filepath.Join(dir, "tokens")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// bearer sends a token with every RPC of a connection, over plaintext
// (the harness talks to loopback).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// withToken is the dial option that sends tok with every RPC.
func withToken(tok string) grpc.DialOption { return grpc.WithPerRPCCredentials(bearer(tok)) }
