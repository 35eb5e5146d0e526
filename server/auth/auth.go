// Package auth checks the bearer tokens of exprd's calls: Tokens are the
// tokens a server accepts, each with a caller's name and the scopes it
// grants (a service, "*" for every service, registry.write for changing
// the tool registry, tools:PATTERN for what the caller sees of it). The
// server checks a call's token in its tap, before a byte of its message
// is read (Tokens.Check), and again in its auth interceptor for a call
// that came by no tap (Tokens.AuthFunc); the MCP endpoint takes the same
// tokens (Tokens.Lookup). A checked call carries its caller's name
// (CallerName) and what it sees of the tool registry (toolscope).
package auth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp/toolscope"
)

// Tokens are the bearer tokens a server accepts, each with a caller name and
// the scopes it grants. A scope names a service: "exprtool" for
// exprd.v1.ExprTool (the service name's last part, lower-cased); "*" grants
// every service. Changing the tool registry (RegisterManual,
// DeregisterManual) is an admin act: it needs ScopeRegistryWrite, which
// "*" does not grant. Scopes of the form tools:PATTERN (ScopeToolsPrefix)
// limit which of the registry's tools the token sees, in every service.
type Tokens struct {
	byHash map[[32]byte]Caller
}

// Caller is who a token names: its name, the scopes it grants, and what
// it sees of the tool registry.
type Caller struct {
	name   string
	scopes map[string]bool
	view   toolscope.View // what its tools: scopes let it see of the registry
}

// ParseTokens reads tokens, one per line: `NAME TOKEN SCOPE[,SCOPE...]`;
// blank lines and lines starting with # are skipped. ";" also ends a line,
// so the list fits in one environment variable. Errors name the line.
func ParseTokens(r io.Reader) (Tokens, error) {
	t := Tokens{byHash: map[[32]byte]Caller{}}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		for _, line := range strings.Split(sc.Text(), ";") {
			n++
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				return t, fmt.Errorf("tokens line %d: want NAME TOKEN SCOPES, got %d fields", n, len(f))
			}
			if len(f[1]) < 16 {
				return t, fmt.Errorf("tokens line %d (%s): the token is shorter than 16 characters", n, f[0])
			}
			h := sha256.Sum256([]byte(f[1]))
			if _, dup := t.byHash[h]; dup {
				return t, fmt.Errorf("tokens line %d (%s): the token is given twice", n, f[0])
			}
			c := Caller{name: f[0], scopes: map[string]bool{}}
			var scopes []string
			for _, s := range strings.Split(f[2], ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.scopes[s] = true
					scopes = append(scopes, s)
				}
			}
			c.view = toolscope.Of(scopes)
			t.byHash[h] = c
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if len(t.byHash) == 0 {
		return t, fmt.Errorf("tokens: none given")
	}
	return t, nil
}

// Name is the caller's name, from its line of the tokens.
func (c Caller) Name() string { return c.name }

// Lookup returns the caller a bearer token names and the scopes it
// grants; false for a token not in the list. It is the check of other
// front doors (the MCP endpoint) that take the same tokens.
func (t Tokens) Lookup(token string) (name string, scopes []string, ok bool) {
	c, ok := t.byHash[sha256.Sum256([]byte(token))]
	if !ok {
		return "", nil, false
	}
	for s := range c.scopes {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	return c.name, scopes, true
}

type callerKey struct{}

// CallerName is the authenticated caller's name, or "".
func CallerName(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// ScopeToolsPrefix starts a scope that limits what a token sees of the
// tool registry: "tools:math" is the manual math's tools,
// "tools:catalog.get*" the tools whose full name starts with catalog.get,
// "tools:*" all; a token with none sees every tool, as every caller does
// without auth. A tool the token does not see is, to it, not registered:
// ListTools and SearchTools leave it out, CodeMode refuses it as off the
// whitelist, AgentLoop and ExprTool as an unknown tool. The MCP endpoint
// reads the same scopes.
const ScopeToolsPrefix = toolscope.Prefix

// ScopeRegistryWrite is the scope that RegisterManual and DeregisterManual
// need when auth is on. Only a token that names it has it.
const ScopeRegistryWrite = "registry.write"

// adminMethods need an admin scope of their own instead of their service's.
var adminMethods = map[string]string{
	exprdv1.ToolRegistry_RegisterManual_FullMethodName:   ScopeRegistryWrite,
	exprdv1.ToolRegistry_DeregisterManual_FullMethodName: ScopeRegistryWrite,
}

// scopeOf is the scope a method needs: "/exprd.v1.ExprTool/Call" needs
// "exprtool" (its service's), an admin method its admin scope.
func scopeOf(fullMethod string) string {
	if s, ok := adminMethods[fullMethod]; ok {
		return s
	}
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if i := strings.LastIndexByte(svc, '.'); i >= 0 {
		svc = svc[i+1:]
	}
	return strings.ToLower(svc)
}

// Check checks the bearer token of a call to fullMethod, in ctx's incoming
// metadata, and returns its caller: none (TOKEN_MISSING) or an
// unknown one (TOKEN_UNKNOWN) is Unauthenticated, one without the
// method's scope PermissionDenied (SCOPE_MISSING). The server's tap
// checks it before the call's stream is admitted (its tap), so that no
// byte of a message is read for a call without a token.
func (t Tokens) Check(ctx context.Context, fullMethod string) (Caller, error) {
	token, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return Caller{}, rpcstatus.New(codes.Unauthenticated, `the call carries no bearer token: send the metadata "authorization: Bearer <token>"`,
			rpcstatus.Info(exprdv1.ErrorReason_TOKEN_MISSING))
	}
	c, ok := t.byHash[sha256.Sum256([]byte(token))]
	if !ok {
		return Caller{}, rpcstatus.New(codes.Unauthenticated, "the bearer token is not known", rpcstatus.Info(exprdv1.ErrorReason_TOKEN_UNKNOWN))
	}
	scope := scopeOf(fullMethod)
	_, admin := adminMethods[fullMethod]
	if !c.scopes[scope] && (admin || !c.scopes["*"]) {
		return Caller{}, rpcstatus.New(codes.PermissionDenied, fmt.Sprintf("caller %q has no %q scope", c.name, scope), rpcstatus.Info(exprdv1.ErrorReason_SCOPE_MISSING, rpcstatus.MetaScope, scope))
	}
	return c, nil
}

// With carries the caller into a call's context: its name (CallerName)
// and what it sees of the tool registry (toolscope.FromContext).
func (c Caller) With(ctx context.Context) context.Context {
	return toolscope.WithView(context.WithValue(ctx, callerKey{}, c.name), c.view)
}

// AuthFunc is the auth interceptors' check. A call the tap admitted
// carries its caller already; one that did not go through the tap (a
// server used as an http.Handler, which runs none) is checked here, by
// the same check.
func (t Tokens) AuthFunc(ctx context.Context) (context.Context, error) {
	if CallerName(ctx) != "" {
		return ctx, nil
	}
	method, _ := grpc.Method(ctx)
	c, err := t.Check(ctx, method)
	if err != nil {
		return nil, err
	}
	return c.With(ctx), nil
}
