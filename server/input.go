package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exprd/exprd/server/internal/stream"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"

	"google.golang.org/grpc/codes"

	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp/userinput"
)

// errInputTimeout ends a request for user input the client did not answer
// in time.
var errInputTimeout = errors.New("the user did not answer in time")

// inputAnswer is a client's reply to a request for user input, as it came,
// and what CheckReply made of it.
type inputAnswer struct {
	action  userinput.Action
	content []byte
	reply   userinput.Reply
}

// inputAsker relays a tool's request for user input (userinput.Asker) to
// the client of a stream that opted in (CodeMode.Run's and AgentLoop.Run's
// relay_input_requests): send sends the request event under an id, and the
// client's reply with that id comes back through replies. A reply the
// request's CheckReply refuses is Rejected and the request goes on
// waiting; the wait ends at the timeout, the call's end, or the client's
// half-close, each failing the call.
type inputAsker struct {
	timeout time.Duration
	replies *stream.Correlator[string, *inputAnswer]
	send    func(ctx context.Context, id string, req *userinput.Request) error
}

func newInputAsker(timeout time.Duration, send func(context.Context, string, *userinput.Request) error) *inputAsker {
	return &inputAsker{timeout: timeout, send: send,
		replies: stream.NewCorrelator[string, *inputAnswer](notAwaited("request for input"))}
}

// inputActions are the replies' actions by their proto enum's number
// (the same in CodeMode's InputReply and AgentLoop's AgentInputReply);
// ACTION_UNSPECIFIED and unknown numbers are none.
var inputActions = map[int32]userinput.Action{1: userinput.Accept, 2: userinput.Decline, 3: userinput.Cancel}

// deliver hands a client's reply to the request waiting under id.
func (a *inputAsker) deliver(id string, action int32, content string) error {
	return a.replies.Deliver(id, &inputAnswer{action: inputActions[action], content: []byte(content)})
}

// AskInput implements userinput.Asker.
func (a *inputAsker) AskInput(ctx context.Context, req *userinput.Request) (userinput.Reply, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errInputTimeout)
	defer cancel()
	id := a.replies.ID()
	check := func(ans *inputAnswer) error {
		if ans.action == "" {
			return rpcstatus.BadRequest("input_reply.action", "give ACTION_ACCEPT, ACTION_DECLINE or ACTION_CANCEL")
		}
		r, err := req.CheckReply(ans.action, ans.content)
		switch {
		case errors.Is(err, userinput.ErrReplyTooLarge):
			return rpcstatus.New(codes.ResourceExhausted, "input_reply.content_json: "+err.Error(), rpcstatus.Info(exprdv1.ErrorReason_QUOTA_EXCEEDED),
				rpcstatus.QuotaFailure("max_input_reply_bytes", err.Error()))
		case err != nil:
			return rpcstatus.BadRequest("input_reply.content_json", err.Error())
		}
		ans.reply = r
		return nil
	}
	ans, err := a.replies.Ask(ctx, id, check, func() error { return a.send(ctx, id, req) })
	switch {
	case errors.Is(err, stream.ErrClientGone):
		return userinput.Reply{}, errors.New("the client closed its side of the stream before answering")
	case errors.Is(context.Cause(ctx), errInputTimeout):
		return userinput.Reply{}, fmt.Errorf("the user did not answer within %s", a.timeout)
	case err != nil:
		return userinput.Reply{}, err
	}
	return ans.reply, nil
}
