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
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
)

// errorDomain is the ErrorInfo domain of every error exprd returns.
const errorDomain = "exprd"

// The ErrorInfo reasons: proto/exprd/v1/errors.proto's ErrorReason is
// their contract, each value's comment giving its code and details, and
// docs/errors.md their table. The reason is the value's name.
var (
	reasonInvalidField          = exprdv1.ErrorReason_INVALID_FIELD.String()
	reasonTokenMissing          = exprdv1.ErrorReason_TOKEN_MISSING.String()
	reasonTokenUnknown          = exprdv1.ErrorReason_TOKEN_UNKNOWN.String()
	reasonScopeMissing          = exprdv1.ErrorReason_SCOPE_MISSING.String()
	reasonRateLimited           = exprdv1.ErrorReason_RATE_LIMITED.String()
	reasonQuotaExceeded         = exprdv1.ErrorReason_QUOTA_EXCEEDED.String()
	reasonMemoryBudget          = exprdv1.ErrorReason_MEMORY_BUDGET.String()
	reasonSlowReader            = exprdv1.ErrorReason_SLOW_READER.String()
	reasonOverloaded            = exprdv1.ErrorReason_OVERLOADED.String()
	reasonCompressionRefused    = exprdv1.ErrorReason_COMPRESSION_REFUSED.String()
	reasonCancelled             = exprdv1.ErrorReason_CANCELLED.String()
	reasonDeadline              = exprdv1.ErrorReason_DEADLINE_EXCEEDED.String()
	reasonAbortedByClient       = exprdv1.ErrorReason_ABORTED_BY_CLIENT.String()
	reasonReplyNotAwaited       = exprdv1.ErrorReason_REPLY_NOT_AWAITED.String()
	reasonAlreadyStarted        = exprdv1.ErrorReason_ALREADY_STARTED.String()
	reasonCallInFlight          = exprdv1.ErrorReason_CALL_IN_FLIGHT.String()
	reasonTurnTimeout           = exprdv1.ErrorReason_TURN_TIMEOUT.String()
	reasonStepTimeout           = exprdv1.ErrorReason_STEP_TIMEOUT.String()
	reasonHookFailed            = exprdv1.ErrorReason_HOOK_FAILED.String()
	reasonModelRateLimited      = exprdv1.ErrorReason_MODEL_RATE_LIMITED.String()
	reasonModelUnavailable      = exprdv1.ErrorReason_MODEL_UNAVAILABLE.String()
	reasonModelTimeout          = exprdv1.ErrorReason_MODEL_TIMEOUT.String()
	reasonModelAuth             = exprdv1.ErrorReason_MODEL_AUTH.String()
	reasonModelNotFound         = exprdv1.ErrorReason_MODEL_NOT_FOUND.String()
	reasonModelEndpointNotFound = exprdv1.ErrorReason_MODEL_ENDPOINT_NOT_FOUND.String()
	reasonModelRejected         = exprdv1.ErrorReason_MODEL_REJECTED_REQUEST.String()
	reasonModelBadReply         = exprdv1.ErrorReason_MODEL_BAD_REPLY.String()
	reasonStoreUnavailable      = exprdv1.ErrorReason_REGISTRY_STORE_UNAVAILABLE.String()
	reasonManualExists          = exprdv1.ErrorReason_MANUAL_EXISTS.String()
	reasonToolExists            = exprdv1.ErrorReason_TOOL_EXISTS.String()
	reasonManualNotFound        = exprdv1.ErrorReason_MANUAL_NOT_FOUND.String()
	reasonToolNotFound          = exprdv1.ErrorReason_TOOL_NOT_FOUND.String()
	reasonManualReadOnly        = exprdv1.ErrorReason_MANUAL_READ_ONLY.String()
	reasonInvalidManual         = exprdv1.ErrorReason_INVALID_MANUAL.String()
	reasonVariableUnbound       = exprdv1.ErrorReason_VARIABLE_UNBOUND.String()
	reasonEgressRefused         = exprdv1.ErrorReason_EGRESS_REFUSED.String()
	reasonInsecureURL           = exprdv1.ErrorReason_INSECURE_URL.String()
	reasonProviderRefused       = exprdv1.ErrorReason_PROVIDER_REFUSED.String()
	reasonProviderTimeout       = exprdv1.ErrorReason_PROVIDER_TIMEOUT.String()
	reasonProviderUnavail       = exprdv1.ErrorReason_PROVIDER_UNAVAILABLE.String()
	reasonInternal              = exprdv1.ErrorReason_INTERNAL.String()
	reasonNoRegistry            = exprdv1.ErrorReason_NO_TOOL_REGISTRY.String()
	reasonNoModels              = exprdv1.ErrorReason_NO_MODEL_PROVIDERS.String()
	reasonRegistryReadOnly      = exprdv1.ErrorReason_REGISTRY_READ_ONLY.String()
	reasonTurnNotFound          = exprdv1.ErrorReason_TURN_NOT_FOUND.String()
	reasonSeqOutOfRange         = exprdv1.ErrorReason_SEQ_OUT_OF_RANGE.String()
	reasonTurnStoreUnavail      = exprdv1.ErrorReason_TURN_STORE_UNAVAILABLE.String()
	reasonTurnElsewhere         = exprdv1.ErrorReason_TURN_ON_ANOTHER_REPLICA.String()
	reasonDetachedTimeout       = exprdv1.ErrorReason_TURN_DETACHED_TIMEOUT.String()
	reasonTurnTakenOver         = exprdv1.ErrorReason_TURN_TAKEN_OVER.String()
	reasonTurnTakeover          = exprdv1.ErrorReason_TURN_TAKEOVER_FAILED.String()
)

// The ErrorInfo metadata keys.
const (
	metaField      = "field"          // the request field, with a BadRequest
	metaQuota      = "quota"          // the limit, with a QuotaFailure
	metaScope      = "scope"          // the scope a token lacks
	metaHTTPStatus = "http_status"    // the status a model server answered
	metaRetryAfter = "retry_after_ms" // the model server's Retry-After
	metaAction     = "action"         // what the overload manager did: refused, cancelled
)

// defaultRetryDelay is a RetryInfo's delay when nothing says better.
const defaultRetryDelay = time.Second

// errorInfo is the ErrorInfo of reason, with metadata as key, value pairs.
func errorInfo(reason string, kv ...string) *errdetails.ErrorInfo {
	info := &errdetails.ErrorInfo{Domain: errorDomain, Reason: reason}
	if len(kv) > 0 {
		info.Metadata = make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			info.Metadata[kv[i]] = kv[i+1]
		}
	}
	return info
}

// retryInfo says a retry may help after d.
func retryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

// statusErr is the error of code with msg, its ErrorInfo first and then
// details. Every status the server builds is made here.
func statusErr(code codes.Code, msg string, info *errdetails.ErrorInfo, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(append([]protoadapt.MessageV1{info}, details...)...); err == nil {
		st = d
	}
	return st.Err()
}

// badRequest is INVALID_ARGUMENT (INVALID_FIELD) with a BadRequest detail
// naming the field.
func badRequest(field, desc string) error {
	return invalidField(reasonInvalidField, field, desc)
}

// invalidField is INVALID_ARGUMENT with reason and a BadRequest naming
// field.
func invalidField(reason, field, desc string) error {
	return statusErr(codes.InvalidArgument, field+": "+desc, errorInfo(reason, metaField, field),
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}})
}

// failedPrecondition is FAILED_PRECONDITION with msg, info and a
// PreconditionFailure saying which condition failed (kind, subject) and
// why (desc).
func failedPrecondition(msg string, info *errdetails.ErrorInfo, kind, subject, desc string) error {
	return statusErr(codes.FailedPrecondition, msg, info, &errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{
		{Type: kind, Subject: subject, Description: desc},
	}})
}

// quotaReasons are the limits with a reason of their own; the others are
// QUOTA_EXCEEDED.
var quotaReasons = map[string]string{
	quotaRate:         reasonRateLimited,
	quotaMemoryBudget: reasonMemoryBudget,
	quotaSlowReader:   reasonSlowReader,
}

// exhausted is RESOURCE_EXHAUSTED with a QuotaFailure naming the limit
// (subject), then details (a RetryInfo where waiting helps).
func exhausted(subject, desc string, details ...protoadapt.MessageV1) error {
	reason, ok := quotaReasons[subject]
	if !ok {
		reason = reasonQuotaExceeded
	}
	return statusErr(codes.ResourceExhausted, desc, errorInfo(reason, metaQuota, subject),
		append([]protoadapt.MessageV1{quotaFailure(subject, desc)}, details...)...)
}

// resourceReasons name a status about a manual or a tool by its code and
// the resource's kind.
var resourceReasons = map[codes.Code]map[string]string{
	codes.AlreadyExists:    {"manual": reasonManualExists, "tool": reasonToolExists},
	codes.NotFound:         {"manual": reasonManualNotFound, "tool": reasonToolNotFound},
	codes.PermissionDenied: {"manual": reasonManualReadOnly},
}

// resourceStatus is code with err's message (a package's prefix left
// out) and a ResourceInfo naming the manual or tool.
func resourceStatus(code codes.Code, err error, kind, name, desc string) error {
	reason := resourceReasons[code][kind]
	if reason == "" {
		reason = codeReason(code)
	}
	return statusErr(code, clientText(err), errorInfo(reason),
		&errdetails.ResourceInfo{ResourceType: kind, ResourceName: name, Description: desc})
}

// internalError is all a client learns of a fault of exprd's own.
func internalError() error {
	return statusErr(codes.Internal, "internal error", errorInfo(reasonInternal))
}

// contextStatus is the status of a call its client cancelled or let run
// past its deadline.
func contextStatus(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return statusErr(codes.DeadlineExceeded, "the call's deadline passed", errorInfo(reasonDeadline))
	}
	return statusErr(codes.Canceled, "the call was cancelled", errorInfo(reasonCancelled))
}

// overloadStatus is the status of an RPC the overload manager refused
// (err a *overload.RefusedError: a retry may be admitted) or cancelled (a
// *overload.ShedError): RESOURCE_EXHAUSTED, OVERLOADED. The heap's figures
// stay in the manager's log.
func overloadStatus(err error) error {
	var se *overload.ShedError
	if errors.As(err, &se) {
		const desc = "the server ran short of memory and cancelled this call to free what it held"
		return statusErr(codes.ResourceExhausted, desc, errorInfo(reasonOverloaded, metaQuota, quotaOverload, metaAction, "cancelled"),
			quotaFailure(quotaOverload, desc))
	}
	const desc = "the server is short of memory and refuses new calls for now; retry later"
	return statusErr(codes.ResourceExhausted, desc, errorInfo(reasonOverloaded, metaQuota, quotaOverload, metaAction, "refused"),
		quotaFailure(quotaOverload, desc), retryInfo(defaultRetryDelay))
}

// abortedByClient ends an agent turn the client aborted.
func abortedByClient() error {
	return statusErr(codes.Canceled, errAborted.Error(), errorInfo(reasonAbortedByClient))
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
		fe  *agent.FieldError
		he  *agent.HookError
		te  *agent.TimeoutError
		me  *agent.ModelError
		up  *model.UnknownProviderError
		le  *utcp.LimitError
		ae  *utcp.AlreadyExistsError
		nf  *utcp.NotFoundError
		mae *utcp.ManualError
		ve  *utcp.VariableNotFoundError
		tre *utcp.TransportError
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
		return contextStatus(ctx.Err())

	case errors.Is(err, agent.ErrInvalidConfig) && errors.As(err, &fe):
		return badRequest(field+"."+wireField(fe.Field), fe.Reason)
	case errors.Is(err, agent.ErrInvalidConfig):
		return badRequest(field, err.Error())
	case errors.As(err, &he):
		return hookStatus(ctx, log, he)
	case errors.As(err, &te) && te.Turn:
		return statusErr(codes.DeadlineExceeded, te.Error(), errorInfo(reasonTurnTimeout))
	case errors.As(err, &te):
		return statusErr(codes.DeadlineExceeded, te.Error(), errorInfo(reasonStepTimeout))
	case errors.As(err, &me):
		modelField := field + ".model"
		if me.ModelFromHook {
			modelField = "hook_reply.model"
		}
		return modelStatus(ctx, log, err, modelField, me.Model)
	case errors.As(err, &up):
		return badRequest(field, up.Error())

	case errors.Is(err, codemode.ErrInvalidOptions):
		return badRequest(field, clientText(err))

	case errors.Is(err, toolstore.ErrUnavailable):
		log.WarnContext(ctx, "the tool registry's store is unavailable", "err", err)
		return statusErr(codes.Unavailable, storeUnavailable(err), errorInfo(reasonStoreUnavailable), retryInfo(defaultRetryDelay))
	case errors.As(err, &le):
		return exhausted("registry_max_"+le.What, fmt.Sprintf("the registry holds at most %d %s; this registration would make %d", le.Limit, le.What, le.Would))
	case errors.As(err, &ae):
		return resourceStatus(codes.AlreadyExists, err, ae.Kind, ae.Name, "already registered; set replace to replace it")
	case errors.As(err, &nf):
		desc := "not registered"
		if len(nf.Similar) > 0 {
			desc += "; close names: " + strings.Join(nf.Similar, ", ")
		}
		return resourceStatus(codes.NotFound, err, nf.Kind, nf.Name, desc)
	case errors.As(err, &mae):
		return invalidField(reasonInvalidManual, inside(field, mae.Path), mae.Msg)
	case errors.As(err, &ve):
		return invalidField(reasonVariableUnbound, inside(field, ve.Path),
			fmt.Sprintf("the variable %q has no value bound to manual %q on the server (the operator binds it as %s)", ve.Name, ve.Manual, ve.Key))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonEgress:
		// The name resolved to an address the policy refuses: the source
		// must change. Which address stays in the log.
		log.WarnContext(ctx, "egress refused", "field", field, "cause", errors.Unwrap(tre))
		return invalidField(reasonEgressRefused, field, clientText(tre))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonInsecureURL:
		// Refused before anything was sent: retrying will not help.
		return invalidField(reasonInsecureURL, field, clientText(tre))
	case errors.As(err, &tre) && tre.Reason == utcp.ReasonStatus && clientStatus(tre.Status):
		// The provider refused the request for the manual (404, 403, …):
		// the source must change, retrying will not help.
		return invalidField(reasonProviderRefused, field, clientText(tre))
	case errors.Is(err, utcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return statusErr(codes.DeadlineExceeded, clientText(err), errorInfo(reasonProviderTimeout))
	case errors.Is(err, context.Canceled):
		return contextStatus(err)
	case errors.Is(err, utcp.ErrTransport):
		return statusErr(codes.Unavailable, clientText(err), errorInfo(reasonProviderUnavail), retryInfo(defaultRetryDelay))
	case errors.Is(err, utcp.ErrInvalidArguments):
		return badRequest(field, clientText(err))
	}
	log.ErrorContext(ctx, "internal error", "err", err)
	return internalError()
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
		return withReason(carried.GRPCStatus()).Err()
	case errors.Is(he, agent.ErrCallIDMismatch):
		return badRequest("hook_reply.call_id", fmt.Sprintf("the %s reply for call %q names another call", he.Hook, he.CallID))
	case errors.As(he, &fe):
		return badRequest("hook_reply."+fe.Field, fe.Reason)
	}
	log.WarnContext(ctx, "a hook failed", "err", he)
	msg := fmt.Sprintf("step %d: the %s hook failed", he.Step, he.Hook)
	if he.CallID != "" {
		msg = fmt.Sprintf("step %d: the %s hook of call %q failed", he.Step, he.Hook, he.CallID)
	}
	return statusErr(codes.Aborted, msg, errorInfo(reasonHookFailed))
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
		return memoryStatus(spent)
	case errors.As(err, &he):
		return httpModelStatus(he, field, name)
	case errors.Is(err, context.DeadlineExceeded): // the provider's own timeout: the caller's is handled before
		return statusErr(codes.DeadlineExceeded, model.Describe(err), errorInfo(reasonModelTimeout))
	case errors.Is(err, model.ErrInvalidRequest):
		// The turn's input is checked up front: this is the server's fault.
		return statusErr(codes.Internal, "the turn made a model request the model package refused", errorInfo(reasonInternal))
	case errors.Is(err, model.ErrMalformedChunk), errors.Is(err, model.ErrNoChoices), errors.Is(err, model.ErrReplyTooLarge):
		return statusErr(codes.Unavailable, modelFailed+model.Describe(err), errorInfo(reasonModelBadReply))
	}
	// Unreachable, cut off, an error reported mid-stream: the next
	// attempt may get through.
	return statusErr(codes.Unavailable, modelFailed+model.Describe(err), errorInfo(reasonModelUnavailable),
		retryInfo(defaultRetryDelay))
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
		after = defaultRetryDelay
	}
	notFound := code == http.StatusNotFound || he.Code == "model_not_found"
	switch {
	case code == http.StatusTooManyRequests:
		return statusErr(codes.ResourceExhausted, fmt.Sprintf("%s: it limits this server's requests; retry after %s", answered, after),
			errorInfo(reasonModelRateLimited, metaHTTPStatus, httpStatus, metaRetryAfter, strconv.FormatInt(after.Milliseconds(), 10)),
			retryInfo(after))
	case he.Temporary():
		return statusErr(codes.Unavailable, answered, errorInfo(reasonModelUnavailable, metaHTTPStatus, httpStatus), retryInfo(after))
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		const desc = "it refused this server's credentials; the operator must fix the provider's API key"
		return failedPrecondition(answered+": "+desc, errorInfo(reasonModelAuth, metaHTTPStatus, httpStatus), preconditionModel, "api_key", desc)
	case notFound && name != "":
		desc := fmt.Sprintf("%s: it has no model %q", answered, name)
		return statusErr(codes.InvalidArgument, field+": "+desc, errorInfo(reasonModelNotFound, metaHTTPStatus, httpStatus, metaField, field),
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}})
	case notFound:
		const desc = "the provider's model or endpoint does not exist; the operator must fix the provider's settings"
		return failedPrecondition(answered+": "+desc, errorInfo(reasonModelEndpointNotFound, metaHTTPStatus, httpStatus), preconditionModel, "settings", desc)
	}
	const desc = "it refused the request, and the same request cannot succeed"
	return failedPrecondition(answered+": "+desc, errorInfo(reasonModelRejected, metaHTTPStatus, httpStatus), preconditionModel, "request", desc)
}

// preconditionModel is the PreconditionFailure type of a model server's
// refusal that no retry can change.
const preconditionModel = "MODEL_PROVIDER"

// clientStatus reports whether an HTTP status says the request itself was
// refused (4xx), not that the provider was busy (408, 429) or failed (5xx).
func clientStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// codeReasons are the reasons of statuses made without one: the code's
// name.
var codeReasons = map[codes.Code]string{
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

func codeReason(c codes.Code) string {
	if r, ok := codeReasons[c]; ok {
		return r
	}
	return "UNKNOWN"
}

// withReason is st with an ErrorInfo: its own, or one naming its code.
func withReason(st *status.Status) *status.Status {
	if st.Code() == codes.OK {
		return st
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return st
		}
	}
	if d, err := st.WithDetails(errorInfo(codeReason(st.Code()))); err == nil {
		return d
	}
	return st
}

// finalError is what the client gets of err: a status with an ErrorInfo.
// A context error is the client's cancel or deadline; any other error
// that is not a status is a fault of the server's (its text is not for
// the client): INTERNAL, logged.
func finalError(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return withReason(st).Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return contextStatus(err)
	}
	log.ErrorContext(ctx, "internal error: a handler returned an error that is not a status", "err", err)
	return internalError()
}

// finalErrors give every error a unary call returns an ErrorInfo.
func (s *Server) finalErrorsUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		return resp, finalError(ctx, s.opts.logger, err)
	}
}

// finalErrorsStream give every error a stream ends with an ErrorInfo.
func (s *Server) finalErrorsStream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return finalError(ss.Context(), s.opts.logger, handler(srv, ss))
	}
}

// alreadyStarted is the Rejected status of a second Start or Open (kind):
// a stream is started once.
func alreadyStarted(kind, msg string) error {
	return failedPrecondition(msg, errorInfo(reasonAlreadyStarted), "STREAM_STARTED", kind, msg)
}

// noRegistry refuses an agent tool (field) that needs the UTCP registry
// the server runs without.
func noRegistry(field, desc string) error {
	return failedPrecondition(field+": "+desc, errorInfo(reasonNoRegistry), "TOOL_REGISTRY", "utcp", desc)
}
