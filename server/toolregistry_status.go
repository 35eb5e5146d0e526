package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
)

// registryStatus maps the registry's errors to codes, each with its
// errdetails: INVALID_ARGUMENT a BadRequest naming field (the request field
// the error is about; for a refused manual, followed by the JSON path inside
// it), NOT_FOUND and ALREADY_EXISTS a ResourceInfo naming the manual or
// tool. The messages are the registry's own, which name paths and keys and
// show of a provider's answer only its status and a short message
// (utcp.ProviderErrorBody). Anything else is INTERNAL, logged.
func (t *toolRegistry) registryStatus(err error, field string) error {
	var (
		me *utcp.ManualError
		ve *utcp.VariableNotFoundError
		te *utcp.TransportError
		ae *utcp.AlreadyExistsError
		nf *utcp.NotFoundError
		le *utcp.LimitError
	)
	switch {
	case errors.Is(err, toolstore.ErrUnavailable):
		return withRetry(status.New(codes.Unavailable, err.Error()), time.Second)
	case errors.As(err, &le):
		return exhausted("registry_max_"+le.What, strings.TrimPrefix(err.Error(), "utcp: "))
	case errors.As(err, &ae):
		return resourceStatus(codes.AlreadyExists, err, ae.Kind, ae.Name, "already registered; set replace to replace it")
	case errors.As(err, &nf):
		desc := "not registered"
		if len(nf.Similar) > 0 {
			desc += "; close names: " + strings.Join(nf.Similar, ", ")
		}
		return resourceStatus(codes.NotFound, err, nf.Kind, nf.Name, desc)
	case errors.As(err, &me):
		path := field
		if me.Path != "" && me.Path != field { // a url source's template is its url
			path += "." + me.Path
		}
		return badRequest(path, me.Msg)
	case errors.As(err, &ve):
		path := field
		if ve.Path != "" && ve.Path != field { // a url source's template is its url
			path += "." + ve.Path
		}
		return badRequest(path, fmt.Sprintf("the variable %q has no value bound to manual %q on the server (the operator binds it as %s)", ve.Name, ve.Manual, ve.Key))
	case errors.As(err, &te) && te.Reason == utcp.ReasonEgress:
		// The name resolved to an address the policy refuses: the source
		// must change. Which address stays in the log.
		t.log.Warn("tool registry: egress refused", "field", field, "cause", errors.Unwrap(te))
		return badRequest(field, strings.TrimPrefix(err.Error(), "utcp: "))
	case errors.As(err, &te) && te.Reason == utcp.ReasonInsecureURL:
		// Refused before anything was sent: retrying will not help.
		return badRequest(field, strings.TrimPrefix(err.Error(), "utcp: "))
	case errors.As(err, &te) && te.Reason == utcp.ReasonStatus && clientStatus(te.Status):
		// The provider refused the request for the manual (404, 403, …):
		// the source must change, retrying will not help.
		return badRequest(field, strings.TrimPrefix(err.Error(), "utcp: "))
	case errors.Is(err, utcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "the request was cancelled")
	case errors.Is(err, utcp.ErrTransport):
		return status.Error(codes.Unavailable, err.Error())
	}
	t.log.Error("tool registry: internal error", "error", err)
	return status.Error(codes.Internal, "internal error")
}

// clientStatus reports whether an HTTP status says the request itself was
// refused (4xx), not that the provider was busy (408, 429) or failed (5xx).
func clientStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// resourceStatus is code with err's message and a ResourceInfo naming the
// manual or tool.
func resourceStatus(code codes.Code, err error, kind, name, desc string) error {
	st := status.New(code, err.Error())
	if d, derr := st.WithDetails(&errdetails.ResourceInfo{ResourceType: kind, ResourceName: name, Description: desc}); derr == nil {
		st = d
	}
	return st.Err()
}

// withRetry adds a RetryInfo saying when a retry may help.
func withRetry(st *status.Status, after time.Duration) error {
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
		st = d
	}
	return st.Err()
}
