package server

import (
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/server/internal/stream"
)

// What the services' bidi streams share: their machinery's configuration,
// the message that must open a Run, and picking a model provider.

// streamConfig is what every stream of the server shares
// (server/internal/stream).
func (s *Server) streamConfig() stream.Config {
	return stream.Config{OutboxBytes: s.opts.outboxBytes, SlowReaderTimeout: s.opts.slowReaderTimeout, Memory: s.opts.memory, Recover: s.recovered}
}

// modelProvider picks a model provider by name ("" is the default). A
// server with no providers at all, whether its registry is nil or empty,
// cannot plan prompts or run agent turns: FAILED_PRECONDITION, with a
// PreconditionFailure. An unknown name is the client's: INVALID_ARGUMENT
// naming field.
func modelProvider(models *model.Registry, name, field string) (model.Provider, error) {
	if models == nil || len(models.Names()) == 0 {
		const desc = "this server has no model providers configured: prompts and agent turns need one"
		return nil, rpcstatus.FailedPrecondition(desc, rpcstatus.Info(exprdv1.ErrorReason_NO_MODEL_PROVIDERS), "MODEL_PROVIDERS", "models", desc)
	}
	p, err := models.Get(name)
	if err != nil {
		return nil, rpcstatus.BadRequest(field, err.Error())
	}
	return p, nil
}

// errFirstNotStart ends a stream whose first message is not Start, or
// that ended before any.
var errFirstNotStart = rpcstatus.BadRequest("start", "the stream's first message must be Start")
