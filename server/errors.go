package server

// The one place that turns errors into gRPC statuses: the core's typed
// errors (agent, model, utcp, toolstore, codemode, evaluator, membudget,
// overload) are mapped by statusOf and overloadStatus, and every status the server builds goes through
// statusErr, so each carries a google.rpc.ErrorInfo (domain "exprd", a
// stable reason) and, where a retry can help, a RetryInfo. A status that
// reaches a handler's return without one (made by grpc-go, or by code that
// builds its own) gets its code's name as its reason (finalErrors).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// resourceReasons name a status about a manual or a tool by its code and
// the resource's kind.
var resourceReasons = map[codes.Code]map[string]exprdv1.ErrorReason{
	codes.AlreadyExists:    {"manual": exprdv1.ErrorReason_MANUAL_EXISTS, "tool": exprdv1.ErrorReason_TOOL_EXISTS},
	codes.NotFound:         {"manual": exprdv1.ErrorReason_MANUAL_NOT_FOUND, "tool": exprdv1.ErrorReason_TOOL_NOT_FOUND},
	codes.PermissionDenied: {"manual": exprdv1.ErrorReason_MANUAL_READ_ONLY},
}

// resourceStatus is code with err's message (a package's prefix left
// out) and a ResourceInfo naming the manual or tool.
func resourceStatus(code codes.Code, err error, kind, name, desc string) error {
	info := rpcstatus.CodeInfo(code)
	if reason, ok := resourceReasons[code][kind]; ok {
		info = rpcstatus.Info(reason)
	}
	return rpcstatus.New(code, clientText(err), info,
		&errdetails.ResourceInfo{ResourceType: kind, ResourceName: name, Description: desc})
}

// overloadStatus is the status of an RPC the overload manager refused
// (err a *overload.RefusedError: a retry may be admitted) or cancelled (a
// *overload.ShedError): RESOURCE_EXHAUSTED, OVERLOADED. The heap's figures
// stay in the manager's log.
func overloadStatus(err error) error {
	var se *overload.ShedError
	if errors.As(err, &se) {
		desc := "the server ran short of memory and cancelled this call to free what it held"
		if se.Fair > 0 {
			desc = "this caller held more than its fair share of the server's memory budget while another caller waited for room: the server cancelled this call to free what it held"
		}
		return rpcstatus.New(codes.ResourceExhausted, desc, rpcstatus.Info(exprdv1.ErrorReason_OVERLOADED, rpcstatus.MetaQuota, rpcstatus.QuotaOverload, rpcstatus.MetaAction, "cancelled"),
			rpcstatus.QuotaFailure(rpcstatus.QuotaOverload, desc))
	}
	const desc = "the server is short of memory and refuses new calls for now; retry later"
	return rpcstatus.New(codes.ResourceExhausted, desc, rpcstatus.Info(exprdv1.ErrorReason_OVERLOADED, rpcstatus.MetaQuota, rpcstatus.QuotaOverload, rpcstatus.MetaAction, "refused"),
		rpcstatus.QuotaFailure(rpcstatus.QuotaOverload, desc), rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
}

// abortedByClient ends an agent turn the client aborted.
func abortedByClient() error {
	return rpcstatus.New(codes.Canceled, errAborted.Error(), rpcstatus.Info(exprdv1.ErrorReason_ABORTED_BY_CLIENT))
}

// packagePrefixes are the prefixes utcp and codemode put on their errors'
// text. A client reads plain sentences, so clientText leaves them out;
// only the text shown changes, nothing is decided by it.
var packagePrefixes = []string{"utcp: ", "codemode: "}

// clientText is err's text without a package's prefix.
func clientText(err error) string {
	msg := err.Error()
	for _, p := range packagePrefixes {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// statusOf maps an error of the core to the status a client sees; it is
// the only code that reads the core's error types. field is the request
// field the client's input errors name: a registration's source ("url"),
// "options", "provider", or "start" for an agent turn (whose config and
// model fields are named under it). The client's cancel or deadline (ctx)
// comes before the error. What
// a client sees never holds a provider's text, an address or a stack:
// errors that are not the client's are logged whole on log (nil: the
// default logger).
func statusOf(ctx context.Context, log *slog.Logger, err error, field string) error {
	var (
		fe    *agent.FieldError
		he    *agent.HookError
		te    *agent.TimeoutError
		me    *agent.ModelError
		up    *model.UnknownProviderError
		le    *utcp.LimitError
		ae    *utcp.AlreadyExistsError
		nf    *utcp.NotFoundError
		mae   *manual.Error
		ve    *vars.NotFoundError
		tre   *utcp.TransportError
		spent *membudget.ExhaustedError
	)
	if log == nil {
		log = slog.Default()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), overload.ErrOverloaded):
		return overloadStatus(context.Cause(ctx))
	case ctx.Err() != nil:
		return rpcstatus.FromContext(ctx.Err())

	case errors.Is(err, agent.ErrInvalidConfig) && errors.As(err, &fe):
		return rpcstatus.BadRequest(field+"."+wireField(fe.Field), fe.Reason)
	case errors.Is(err, agent.ErrInvalidConfig):
		return rpcstatus.BadRequest(field, err.Error())
	case errors.As(err, &he):
		return hookStatus(ctx, log, he)
	case errors.As(err, &te) && te.Turn:
		return rpcstatus.New(codes.DeadlineExceeded, te.Error(), rpcstatus.Info(exprdv1.ErrorReason_TURN_TIMEOUT))
	case errors.As(err, &te):
		return rpcstatus.New(codes.DeadlineExceeded, te.Error(), rpcstatus.Info(exprdv1.ErrorReason_STEP_TIMEOUT))
	case errors.As(err, &me):
		modelField := field + ".model"
		if me.ModelFromHook {
			modelField = "hook_reply.model"
		}
		return modelStatus(ctx, log, err, modelField, me.Model)
	case errors.As(err, &up):
		return rpcstatus.BadRequest(field, up.Error())

	case errors.As(err, &spent):
		// What the work needed did not fit in the memory budget now.
		return rpcstatus.Memory(spent)
	case errors.Is(err, codemode.ErrInvalidOptions):
		return rpcstatus.BadRequest(field, clientText(err))

	case errors.Is(err, toolstore.ErrUnavailable):
		log.WarnContext(ctx, "the tool registry's store is unavailable", "err", err)
		return rpcstatus.New(codes.Unavailable, storeUnavailable(err), rpcstatus.Info(exprdv1.ErrorReason_REGISTRY_STORE_UNAVAILABLE), rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
	case errors.As(err, &le):
		return rpcstatus.Exhausted("registry_max_"+le.What, fmt.Sprintf("the registry holds at most %d %s; this registration would make %d", le.Limit, le.What, le.Would))
	case errors.As(err, &ae):
		return resourceStatus(codes.AlreadyExists, err, ae.Kind, ae.Name, "already registered; set replace to replace it")
	case errors.As(err, &nf):
		desc := "not registered"
		if len(nf.Similar) > 0 {
			desc += "; close names: " + strings.Join(nf.Similar, ", ")
		}
		return resourceStatus(codes.NotFound, err, nf.Kind, nf.Name, desc)
	case errors.As(err, &mae):
		return rpcstatus.InvalidField(exprdv1.ErrorReason_INVALID_MANUAL, inside(field, mae.Path), mae.Msg)
	case errors.As(err, &ve):
		return rpcstatus.InvalidField(exprdv1.ErrorReason_VARIABLE_UNBOUND, inside(field, ve.Path),
			fmt.Sprintf("the variable %q has no value bound to manual %q on the server (the operator binds it as %s)", ve.Name, ve.Manual, ve.Key))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonEgress:
		// The name resolved to an address the policy refuses: the source
		// must change. Which address stays in the log.
		log.WarnContext(ctx, "egress refused", "field", field, "cause", errors.Unwrap(tre))
		return rpcstatus.InvalidField(exprdv1.ErrorReason_EGRESS_REFUSED, field, clientText(tre))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonInsecureURL:
		// Refused before anything was sent: retrying will not help.
		return rpcstatus.InvalidField(exprdv1.ErrorReason_INSECURE_URL, field, clientText(tre))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonStatus && clientStatus(tre.Status):
		// The provider refused the request for the manual (404, 403, …):
		// the source must change, retrying will not help.
		return rpcstatus.InvalidField(exprdv1.ErrorReason_PROVIDER_REFUSED, field, clientText(tre))
	case errors.Is(err, utcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return rpcstatus.New(codes.DeadlineExceeded, clientText(err), rpcstatus.Info(exprdv1.ErrorReason_PROVIDER_TIMEOUT))
	case errors.Is(err, context.Canceled):
		return rpcstatus.FromContext(err)
	case errors.Is(err, utcp.ErrTransport):
		return rpcstatus.New(codes.Unavailable, clientText(err), rpcstatus.Info(exprdv1.ErrorReason_PROVIDER_UNAVAILABLE), rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
	case errors.Is(err, manual.ErrInvalidArguments):
		return rpcstatus.BadRequest(field, clientText(err))
	}
	log.ErrorContext(ctx, "internal error", "err", err)
	return rpcstatus.Internal()
}

// inside is the field of a path inside field's document ("manual_json" and
// "tools[0].url": "manual_json.tools[0].url"); a url source's template is
// its url, so a path equal to field is field.
func inside(field, path string) string {
	if path == "" || path == field {
		return field
	}
	return field + "." + path
}

// storeUnavailable says which step could not reach the store, not why: the
// cause may name the store's hosts.
func storeUnavailable(err error) string {
	var ue *toolstore.UnavailableError
	if errors.As(err, &ue) {
		return fmt.Sprintf("the tool registry's store is unavailable (%s); the change may not have been made: list the manual, or retry", ue.Op)
	}
	return "the tool registry's store is unavailable; retry later"
}

// hookStatus is the status of a hook, or an approval, that failed: the
// status the server's hook refused the client's reply with (it is carried
// back through the loop), a reply naming another call or holding a wrong
// field (INVALID_ARGUMENT on hook_reply), anything else ABORTED. Only a
// hook's error is searched for a status: elsewhere one may be a remote
// provider's, whose words are not for the client.
func hookStatus(ctx context.Context, log *slog.Logger, he *agent.HookError) error {
	var (
		carried interface{ GRPCStatus() *status.Status }
		fe      *agent.FieldError
	)
	switch {
	case errors.As(he.Err, &carried):
		return rpcstatus.WithReason(carried.GRPCStatus()).Err()
	case errors.Is(he, agent.ErrCallIDMismatch):
		return rpcstatus.BadRequest("hook_reply.call_id", fmt.Sprintf("the %s reply for call %q names another call", he.Hook, he.CallID))
	case errors.As(he, &fe):
		return rpcstatus.BadRequest("hook_reply."+fe.Field, fe.Reason)
	}
	log.WarnContext(ctx, "a hook failed", "err", he)
	msg := fmt.Sprintf("step %d: the %s hook failed", he.Step, he.Hook)
	if he.CallID != "" {
		msg = fmt.Sprintf("step %d: the %s hook of call %q failed", he.Step, he.Hook, he.CallID)
	}
	return rpcstatus.New(codes.Aborted, msg, rpcstatus.Info(exprdv1.ErrorReason_HOOK_FAILED))
}

// modelFailed opens the message of a model failure without a status.
const modelFailed = "the model turn failed: "

// modelStatus maps a failed model request. name is the model the request
// named ("" for the provider's own), field the request field the client
// named it in. The message is model.Describe's words, never the server's.
func modelStatus(ctx context.Context, log *slog.Logger, err error, field, name string) error {
	log.WarnContext(ctx, "the model request failed", "err", err)
	var (
		he    *model.HTTPError
		spent *membudget.ExhaustedError
	)
	switch {
	case errors.As(err, &spent):
		// The reply did not fit in this server's memory budget.
		return rpcstatus.Memory(spent)
	case errors.As(err, &he):
		return httpModelStatus(he, field, name)
	case errors.Is(err, context.DeadlineExceeded): // the provider's own timeout: the caller's is handled before
		return rpcstatus.New(codes.DeadlineExceeded, model.Describe(err), rpcstatus.Info(exprdv1.ErrorReason_MODEL_TIMEOUT))
	case errors.Is(err, model.ErrInvalidRequest):
		// The turn's input is checked up front: this is the server's fault.
		return rpcstatus.New(codes.Internal, "the turn made a model request the model package refused", rpcstatus.Info(exprdv1.ErrorReason_INTERNAL))
	case errors.Is(err, model.ErrMalformedChunk), errors.Is(err, model.ErrNoChoices), errors.Is(err, model.ErrReplyTooLarge):
		return rpcstatus.New(codes.Unavailable, modelFailed+model.Describe(err), rpcstatus.Info(exprdv1.ErrorReason_MODEL_BAD_REPLY))
	}
	// Unreachable, cut off, an error reported mid-stream: the next
	// attempt may get through.
	return rpcstatus.New(codes.Unavailable, modelFailed+model.Describe(err), rpcstatus.Info(exprdv1.ErrorReason_MODEL_UNAVAILABLE),
		rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
}

// httpModelStatus maps a status the model server answered: 429 is
// RESOURCE_EXHAUSTED and 5xx (and 408, 409) UNAVAILABLE, each with a
// RetryInfo from Retry-After; the rest cannot succeed by retrying: 401 and
// 403 are the operator's key, a model the client named that the server
// does not have is the client's (INVALID_ARGUMENT on field, MODEL_NOT_FOUND),
// a 404 to a request naming none the provider's settings
// (MODEL_ENDPOINT_NOT_FOUND), any other 4xx a request the server refuses;
// those three FAILED_PRECONDITION with a PreconditionFailure.
func httpModelStatus(he *model.HTTPError, field, name string) error {
	code := he.StatusCode
	answered := fmt.Sprintf("the model server answered %d %s", code, http.StatusText(code))
	httpStatus := strconv.Itoa(code)
	after := he.RetryAfter
	if after <= 0 {
		after = rpcstatus.DefaultRetryDelay
	}
	notFound := code == http.StatusNotFound || he.Code == "model_not_found"
	switch {
	case code == http.StatusTooManyRequests:
		return rpcstatus.New(codes.ResourceExhausted, fmt.Sprintf("%s: it limits this server's requests; retry after %s", answered, after),
			rpcstatus.Info(exprdv1.ErrorReason_MODEL_RATE_LIMITED, rpcstatus.MetaHTTPStatus, httpStatus, rpcstatus.MetaRetryAfter, strconv.FormatInt(after.Milliseconds(), 10)),
			rpcstatus.Retry(after))
	case he.Temporary():
		return rpcstatus.New(codes.Unavailable, answered, rpcstatus.Info(exprdv1.ErrorReason_MODEL_UNAVAILABLE, rpcstatus.MetaHTTPStatus, httpStatus), rpcstatus.Retry(after))
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		const desc = "it refused this server's credentials; the operator must fix the provider's API key"
		return rpcstatus.FailedPrecondition(answered+": "+desc, rpcstatus.Info(exprdv1.ErrorReason_MODEL_AUTH, rpcstatus.MetaHTTPStatus, httpStatus), preconditionModel, "api_key", desc)
	case notFound && name != "":
		desc := fmt.Sprintf("%s: it has no model %q", answered, name)
		return rpcstatus.New(codes.InvalidArgument, field+": "+desc, rpcstatus.Info(exprdv1.ErrorReason_MODEL_NOT_FOUND, rpcstatus.MetaHTTPStatus, httpStatus, rpcstatus.MetaField, field),
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}})
	case notFound:
		const desc = "the provider's model or endpoint does not exist; the operator must fix the provider's settings"
		return rpcstatus.FailedPrecondition(answered+": "+desc, rpcstatus.Info(exprdv1.ErrorReason_MODEL_ENDPOINT_NOT_FOUND, rpcstatus.MetaHTTPStatus, httpStatus), preconditionModel, "settings", desc)
	}
	const desc = "it refused the request, and the same request cannot succeed"
	return rpcstatus.FailedPrecondition(answered+": "+desc, rpcstatus.Info(exprdv1.ErrorReason_MODEL_REJECTED_REQUEST, rpcstatus.MetaHTTPStatus, httpStatus), preconditionModel, "request", desc)
}

// preconditionModel is the PreconditionFailure type of a model server's
// refusal that no retry can change.
const preconditionModel = "MODEL_PROVIDER"

// clientStatus reports whether an HTTP status says the request itself was
// refused (4xx), not that the provider was busy (408, 429) or failed (5xx).
func clientStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// alreadyStarted is the Rejected status of a second Start or Open (kind):
// a stream is started once.
func alreadyStarted(kind, msg string) error {
	return rpcstatus.FailedPrecondition(msg, rpcstatus.Info(exprdv1.ErrorReason_ALREADY_STARTED), "STREAM_STARTED", kind, msg)
}

// noRegistry refuses an agent tool (field) that needs the UTCP registry
// the server runs without.
func noRegistry(field, desc string) error {
	return rpcstatus.FailedPrecondition(field+": "+desc, rpcstatus.Info(exprdv1.ErrorReason_NO_TOOL_REGISTRY), "TOOL_REGISTRY", "utcp", desc)
}

// stateQuota is the QuotaFailure subject of a state refused for a limit
// (its bytes, its objects and arrays, its depth); ok is false for any other
// refusal.
func stateQuota(err error) (subject string, ok bool) {
	var spent *membudget.ExhaustedError
	if errors.As(err, &spent) {
		return rpcstatus.QuotaMemoryBudget, true
	}
	var big *evaluator.StateTooLargeError
	if !errors.As(err, &big) {
		return "", false
	}
	switch big.What {
	case "containers":
		return rpcstatus.QuotaStateContainers, true
	case "depth":
		return rpcstatus.QuotaStateDepth, true
	}
	return rpcstatus.QuotaStateBytes, true
}

// stateStatus is the status of a refused state: too large is
// RESOURCE_EXHAUSTED with a QuotaFailure (and a RetryInfo when the memory
// budget is only busy), anything else INVALID_ARGUMENT on field.
func stateStatus(field string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err() // the request ended while its state was read
	}
	var spent *membudget.ExhaustedError
	if errors.As(err, &spent) {
		return rpcstatus.Memory(spent)
	}
	subject, ok := stateQuota(err)
	if !ok {
		return rpcstatus.BadRequest(field, err.Error())
	}
	return rpcstatus.Exhausted(subject, err.Error())
}
