package utcp

import "context"

// CallObserver is told of every call of a registered tool, through Call or
// CallStream (WithCallObserver). It is called when the call starts, once
// the name has been found in the registry, with the tool's full name (as
// the registry knows it: NormalizeToolName), before the arguments are
// checked. It returns the context the call runs under (one carrying a
// span, say: the provider's request is made under it) and end, which the
// registry calls exactly once when the call is over: with the error Call
// returns (nil on success); for a stream, when it ends (nil at io.EOF,
// else the error Next returned) or is closed first (nil). A call of a name
// the registry does not hold is not observed: its name is the caller's,
// not one of the registry's bounded set.
type CallObserver func(ctx context.Context, tool string) (_ context.Context, end func(err error))

// observeAll nests observers, the first outermost: its end runs last.
func observeAll(obs []CallObserver) CallObserver {
	switch len(obs) {
	case 0:
		return nil
	case 1:
		return obs[0]
	}
	return func(ctx context.Context, tool string) (context.Context, func(error)) {
		ends := make([]func(error), len(obs))
		for i, o := range obs {
			ctx, ends[i] = o(ctx, tool)
		}
		return ctx, func(err error) {
			for i := len(ends) - 1; i >= 0; i-- {
				ends[i](err)
			}
		}
	}
}
