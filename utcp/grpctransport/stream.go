package grpctransport

import (
	"context"
	"fmt"
	"io"

	"github.com/exprd/exprd/utcp"
)

// rpcStream yields a server stream's messages as chunks. It owns the RPC's
// context: the RPC is cancelled when the stream ends, fails or is closed,
// so an abandoned stream never holds the connection's resources.
type rpcStream struct {
	ctx      context.Context          // the caller's: its end is the caller's doing
	cancel   context.CancelFunc       // the RPC's
	recv     func() (any, int, error) // the next chunk and its size in bytes; io.EOF at a clean end
	spec     *spec
	tool     string
	done     bool
	received int   // chunks so far
	bytes    int64 // their total size
}

var _ utcp.Stream = (*rpcStream)(nil)

// Next returns the next chunk; io.EOF only when the provider ended the
// stream with OK. Any other end is an error.
func (s *rpcStream) Next() (any, error) {
	if s.done {
		return nil, io.EOF
	}
	v, n, err := s.recv()
	if err == nil {
		s.received++
		s.bytes += int64(n)
		return v, nil
	}
	s.done = true
	s.cancel()
	if err == io.EOF {
		return nil, io.EOF
	}
	if _, ours := err.(*utcp.TransportError); ours {
		return nil, err
	}
	// A connection lost before the first chunk is a provider not reached;
	// after it, a broken stream.
	return nil, s.spec.rpcError(s.ctx, err, s.tool, s.received > 0)
}

// Close cancels the RPC; it is safe after the end.
func (s *rpcStream) Close() error {
	s.done = true
	s.cancel()
	return nil
}

// oneChunk is a unary result as a stream of one chunk.
type oneChunk struct {
	v    any
	done bool
}

func (o *oneChunk) Next() (any, error) {
	if o.done {
		return nil, io.EOF
	}
	o.done = true
	return o.v, nil
}

func (o *oneChunk) Close() error { o.done = true; return nil }

// collect drains a stream into the list of its chunks (what Call returns for
// a streaming method), bounding the total of the messages' sizes.
func collect(st *rpcStream, limit int64) ([]any, error) {
	defer st.Close()
	out := []any{}
	for {
		v, err := st.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if st.bytes > limit {
			return nil, &utcp.TransportError{Tool: st.tool, Reason: utcp.ReasonTooLarge,
				Body: fmt.Sprintf("the stream's messages add up to more than %d bytes", limit)}
		}
		out = append(out, v)
	}
}
