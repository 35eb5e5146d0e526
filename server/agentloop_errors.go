package server

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// errAborted is the cause of a turn the client aborted (AgentCancel).
var errAborted = errors.New("the client aborted the turn")

// status maps a turn's failure to its gRPC status (statusOf): the
// client's abort, then the turn's own errors, with the config's fields
// named under start. What a client sees never holds a model provider's own
// error text: that is logged.
func (a *agentLoop) status(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errAborted) {
		return abortedByClient()
	}
	var (
		he    *agent.HistoryError
		spent *membudget.ExhaustedError
	)
	switch {
	case ctx.Err() != nil:
	case errors.As(err, &he) && he.Err == nil:
		// The history's limit: RESOURCE_EXHAUSTED, as a state over
		// max_state_bytes is.
		return rpcstatus.Exhausted(quotaHistoryBytes, he.Error())
	case errors.As(err, &he) && errors.As(he.Err, &spent):
		return rpcstatus.Memory(spent)
	}
	return statusOf(ctx, a.s.opts.logger, err, "start")
}

// wireField renames a field of agent.Config to its AgentStart name.
func wireField(f string) string {
	for _, r := range [][2]string{{".parameters", ".parameters_json"}, {".timeout", ".timeout_ms"}, {"_timeout", "_timeout_ms"}} {
		if strings.HasSuffix(f, r[0]) {
			return strings.TrimSuffix(f, r[0]) + r[1]
		}
	}
	return f
}

// refield moves the field of err's BadRequest from under the prefix from
// to under to; an error with no BadRequest becomes one naming to.
func refield(err error, from, to string) error {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			v := br.GetFieldViolations()[0]
			if rest, ok := strings.CutPrefix(v.GetField(), from); ok {
				return rpcstatus.BadRequest(to+rest, v.GetDescription())
			}
			return rpcstatus.BadRequest(v.GetField(), v.GetDescription())
		}
	}
	return rpcstatus.BadRequest(to, st.Message())
}
