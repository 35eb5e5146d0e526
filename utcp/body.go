package utcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/exprd/exprd/membudget"
)

// ReadBody reads a provider's answer whole, refusing more than limit bytes
// (a *TransportError, ReasonTooLarge). size is its length when known (a
// Content-Length; -1 when not): such a body is read into one buffer of
// that size. What it reads is reserved, as it reads, from the memory
// budget of the registry's call under ctx (WithMemoryBudget): a budget
// that cannot hold it is ReasonMemory. A read that fails is the caller's
// context error when ctx ended, else ReasonBroken.
func ReadBody(ctx context.Context, r io.Reader, size, limit int64, tool string) ([]byte, error) {
	if size > limit {
		return nil, &TransportError{Tool: tool, Reason: ReasonTooLarge, cause: fmt.Errorf("body of %d bytes over %d", size, limit)}
	}
	var data []byte
	var err error
	mem := callMemory(ctx)
	if size >= 0 {
		if err := mem.Resize(ctx, mem.Size()+bodyMemory(size)); err != nil {
			return nil, memoryError(ctx, tool, err)
		}
		data = make([]byte, size+1)
		var n int
		n, err = io.ReadFull(r, data)
		data = data[:n]
		switch {
		case err == io.ErrUnexpectedEOF && int64(n) == size:
			err = nil // all that was announced
		case err == nil:
			err = fmt.Errorf("body longer than its Content-Length")
		case err == io.EOF && size == 0:
			err = nil
		}
	} else {
		data, err = readReserving(ctx, io.LimitReader(r, limit+1), mem)
		if errors.Is(err, errMemory) {
			return nil, memoryError(ctx, tool, errors.Unwrap(err))
		}
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, &TransportError{Tool: tool, Reason: ReasonBroken, cause: err}
	}
	if int64(len(data)) > limit {
		return nil, &TransportError{Tool: tool, Reason: ReasonTooLarge, cause: fmt.Errorf("body over %d bytes", limit)}
	}
	return data, nil
}

type callMemoryKey struct{}

// withCallMemory returns ctx carrying the reservation a call's reads grow
// in the registry's memory budget (nil: none).
func withCallMemory(ctx context.Context, r *membudget.Reservation) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, callMemoryKey{}, r)
}

func callMemory(ctx context.Context) *membudget.Reservation {
	r, _ := ctx.Value(callMemoryKey{}).(*membudget.Reservation)
	return r
}

// bodyMemory is what a body of n bytes holds while it is read and
// decoded: the bytes, and the value decoded from them.
func bodyMemory(n int64) int64 { return 3 * n }

// errMemory marks readReserving's failure to reserve.
var errMemory = errors.New("memory")

// readReserving is io.ReadAll that grows mem by bodyMemory of each chunk
// before it reads it.
func readReserving(ctx context.Context, r io.Reader, mem *membudget.Reservation) ([]byte, error) {
	const chunk = 64 << 10
	data := make([]byte, 0, 512)
	for {
		if mem != nil && cap(data)-len(data) < chunk {
			if err := mem.Resize(ctx, mem.Size()+bodyMemory(chunk)); err != nil {
				return nil, fmt.Errorf("%w: %w", errMemory, err)
			}
			data = slices.Grow(data, chunk)
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, len(data)+1)
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// memoryError is a read the memory budget could not hold (ReasonMemory),
// or the caller's own cancellation.
func memoryError(ctx context.Context, tool string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &TransportError{Tool: tool, Reason: ReasonMemory, cause: err}
}
