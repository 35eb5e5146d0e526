// Package rpcstatus builds every gRPC status exprd returns. Each carries a
// google.rpc.ErrorInfo (domain "exprd", a reason from the ErrorReason enum
// of proto/exprd/v1/errors.proto, whose comments give each reason's code
// and details; docs/errors.md is their table) and the details its code
// calls for: a BadRequest naming the field for INVALID_ARGUMENT, a
// QuotaFailure naming the limit for RESOURCE_EXHAUSTED, a
// PreconditionFailure for FAILED_PRECONDITION, and a RetryInfo where a
// retry can help. A status that reaches a handler's return without an
// ErrorInfo (made by grpc-go, or by code that builds its own) gets its
// code's name as its reason (Final, FinalUnary, FinalStream).
//
// It knows nothing of exprd's services: mapping the core's typed errors to
// statuses is the server's (server/errors.go).
package rpcstatus

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
)

// Domain is the ErrorInfo domain of every error exprd returns.
const Domain = "exprd"

// The ErrorInfo metadata keys.
const (
	MetaField      = "field"          // the request field, with a BadRequest
	MetaQuota      = "quota"          // the limit, with a QuotaFailure
	MetaScope      = "scope"          // the scope a token lacks
	MetaHTTPStatus = "http_status"    // the status a model server answered
	MetaRetryAfter = "retry_after_ms" // the model server's Retry-After
	MetaAction     = "action"         // what the overload manager did: refused, cancelled
)

// The subjects of QuotaFailure violations, one per limit: the names the
// limits have in docs/configuration.md.
const (
	QuotaStateBytes      = "max_state_bytes"
	QuotaStateContainers = "max_state_containers"
	QuotaStateDepth      = "max_state_depth"
	QuotaSlowReader      = "slow_reader_timeout"
	QuotaCallsInFlight   = "max_calls_in_flight"
	QuotaStreamsPerConn  = "max_streams_per_connection"
	QuotaSessions        = "max_sessions"
	QuotaRate            = "rate_limit"
	QuotaMemoryBudget    = "memory_budget"
	QuotaInfraPerConn    = "max_infra_calls_per_connection"
	QuotaTurnsPerCaller  = "turn_max_per_caller"
	QuotaOverload        = "overload"
)

// DefaultRetryDelay is a RetryInfo's delay when nothing says better.
const DefaultRetryDelay = time.Second

// Info is the ErrorInfo of reason, with metadata as key, value pairs.
func Info(reason exprdv1.ErrorReason, kv ...string) *errdetails.ErrorInfo {
	return info(reason.String(), kv...)
}

func info(reason string, kv ...string) *errdetails.ErrorInfo {
	i := &errdetails.ErrorInfo{Domain: Domain, Reason: reason}
	if len(kv) > 0 {
		i.Metadata = make(map[string]string, len(kv)/2)
		for j := 0; j+1 < len(kv); j += 2 {
			i.Metadata[kv[j]] = kv[j+1]
		}
	}
	return i
}

// CodeInfo is the ErrorInfo of a status no reason was chosen for: its
// code's name.
func CodeInfo(c codes.Code) *errdetails.ErrorInfo { return info(codeReason(c)) }

// Retry says a retry may help after d.
func Retry(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

// New is the error of code with msg, its ErrorInfo first and then
// details. Every status exprd builds is made here.
func New(code codes.Code, msg string, info *errdetails.ErrorInfo, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(append([]protoadapt.MessageV1{info}, details...)...); err == nil {
		st = d
	}
	return st.Err()
}

// BadRequest is INVALID_ARGUMENT (INVALID_FIELD) with a BadRequest detail
// naming the field.
func BadRequest(field, desc string) error {
	return InvalidField(exprdv1.ErrorReason_INVALID_FIELD, field, desc)
}

// InvalidField is INVALID_ARGUMENT with reason and a BadRequest naming
// field.
func InvalidField(reason exprdv1.ErrorReason, field, desc string) error {
	return New(codes.InvalidArgument, field+": "+desc, Info(reason, MetaField, field),
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}})
}

// FailedPrecondition is FAILED_PRECONDITION with msg, info and a
// PreconditionFailure saying which condition failed (kind, subject) and
// why (desc).
func FailedPrecondition(msg string, info *errdetails.ErrorInfo, kind, subject, desc string) error {
	return New(codes.FailedPrecondition, msg, info, &errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{
		{Type: kind, Subject: subject, Description: desc},
	}})
}

// quotaReasons are the limits with a reason of their own; the others are
// QUOTA_EXCEEDED.
var quotaReasons = map[string]exprdv1.ErrorReason{
	QuotaRate:         exprdv1.ErrorReason_RATE_LIMITED,
	QuotaMemoryBudget: exprdv1.ErrorReason_MEMORY_BUDGET,
	QuotaSlowReader:   exprdv1.ErrorReason_SLOW_READER,
}

// Exhausted is RESOURCE_EXHAUSTED with a QuotaFailure naming the limit
// (subject), then details (a RetryInfo where waiting helps).
func Exhausted(subject, desc string, details ...protoadapt.MessageV1) error {
	reason, ok := quotaReasons[subject]
	if !ok {
		reason = exprdv1.ErrorReason_QUOTA_EXCEEDED
	}
	return New(codes.ResourceExhausted, desc, Info(reason, MetaQuota, subject),
		append([]protoadapt.MessageV1{QuotaFailure(subject, desc)}, details...)...)
}

// QuotaFailure is the detail of a ResourceExhausted: which limit, and what.
func QuotaFailure(subject, desc string) *errdetails.QuotaFailure {
	return &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: subject, Description: desc}}}
}

// Internal is all a client learns of a fault of exprd's own.
func Internal() error {
	return New(codes.Internal, "internal error", Info(exprdv1.ErrorReason_INTERNAL))
}

// FromContext is the status of a call its client cancelled or let run
// past its deadline.
func FromContext(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return New(codes.DeadlineExceeded, "the call's deadline passed", Info(exprdv1.ErrorReason_DEADLINE_EXCEEDED))
	}
	return New(codes.Canceled, "the call was cancelled", Info(exprdv1.ErrorReason_CANCELLED))
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

// WithReason is st with an ErrorInfo: its own, or one naming its code.
func WithReason(st *status.Status) *status.Status {
	if st.Code() == codes.OK {
		return st
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return st
		}
	}
	if d, err := st.WithDetails(CodeInfo(st.Code())); err == nil {
		return d
	}
	return st
}

// Final is what the client gets of err: a status with an ErrorInfo. A
// context error is the client's cancel or deadline; any other error that
// is not a status is a fault of the server's (its text is not for the
// client): INTERNAL, logged.
func Final(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return WithReason(st).Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return FromContext(err)
	}
	log.ErrorContext(ctx, "internal error: a handler returned an error that is not a status", "err", err)
	return Internal()
}

// FinalUnary gives every error a unary call returns an ErrorInfo.
func FinalUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		return resp, Final(ctx, log, err)
	}
}

// FinalStream gives every error a stream ends with an ErrorInfo.
func FinalStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return Final(ss.Context(), log, handler(srv, ss))
	}
}

// Memory is the status of what the memory budget could not hold:
// RESOURCE_EXHAUSTED with a QuotaFailure, and a RetryInfo when the budget
// is only busy.
func Memory(spent *membudget.ExhaustedError) error {
	if spent.Unreachable {
		return Exhausted(QuotaMemoryBudget, spent.Error())
	}
	return Exhausted(QuotaMemoryBudget, spent.Error(), Retry(DefaultRetryDelay))
}
