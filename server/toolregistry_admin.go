package server

import (
	"context"
	"fmt"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"

	"google.golang.org/grpc/codes"

	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp"
)

// Changing the registry is an admin act. With auth on, RegisterManual and
// DeregisterManual need auth.ScopeRegistryWrite (checked with the token, in
// authFunc). With auth off nobody can be told apart, so writes are refused
// unless the operator opted in (WithRegistryWritesWithoutAuth). Manuals the
// operator loaded before the server started (--manuals-dir, the demo) are
// read-only over the API. Listing and searching stay open.

// FlagRegistryWritesWithoutAuth is exprd's flag that allows registry writes
// with auth off; the refusal names it.
const FlagRegistryWritesWithoutAuth = "--registry-writes-without-auth"

// WithRegistryWritesWithoutAuth lets any client register and deregister
// manuals when the server has no auth (default: refused with
// FAILED_PRECONDITION). Meant for a single-user machine, never a shared
// service.
func WithRegistryWritesWithoutAuth() Option {
	return func(o *options) error { o.registryWritesWithoutAuth = true; return nil }
}

// writable refuses a registry write the server does not allow, and one
// that would replace or remove a manual the operator loaded.
func (t *toolRegistry) writable(_ context.Context, manual string, replacing bool) error {
	if !t.authOn && !t.writesWithoutAuth {
		desc := "registry writes need auth: configure bearer tokens (--auth-tokens-file) and give the writer the " +
			fmt.Sprintf("%q scope, or start exprd with %s on a machine no one else can reach", auth.ScopeRegistryWrite, FlagRegistryWritesWithoutAuth)
		return rpcstatus.FailedPrecondition("the tool registry is read-only: "+desc, rpcstatus.Info(exprdv1.ErrorReason_REGISTRY_READ_ONLY), "AUTH", "exprd.v1.ToolRegistry", desc)
	}
	name := utcp.SanitizeManualName(manual)
	if t.store.Operator(name) && replacing {
		return resourceStatus(codes.PermissionDenied, fmt.Errorf("manual %q was loaded by the operator: it cannot be replaced or removed over the API", name),
			"manual", name, "loaded by the operator; read-only over the API")
	}
	return nil
}
