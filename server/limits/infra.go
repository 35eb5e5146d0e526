package limits

import (
	"context"
	"fmt"
	"sync"

	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// Infra counts the health and reflection calls open on each
// connection.
type Infra struct {
	perConn int
	mu      sync.Mutex
	conns   map[string]int
}

// NewInfra bounds the health and reflection calls of a connection at
// perConn.
func NewInfra(perConn int) *Infra {
	return &Infra{perConn: perConn, conns: map[string]int{}}
}

// Admit counts a call on ctx's connection until its stream ends (grpc-go
// cancels the stream's context then, whichever way it ends), or refuses
// it RESOURCE_EXHAUSTED past the limit.
func (l *Infra) Admit(ctx context.Context) (context.Context, error) {
	key := ConnKey(ctx)
	l.mu.Lock()
	if l.conns[key] >= l.perConn {
		l.mu.Unlock()
		return nil, rpcstatus.Exhausted(rpcstatus.QuotaInfraPerConn, fmt.Sprintf("%d health and reflection calls are open on this connection, the limit", l.perConn))
	}
	l.conns[key]++
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		if l.conns[key]--; l.conns[key] <= 0 {
			delete(l.conns, key)
		}
		l.mu.Unlock()
	})
	return ctx, nil
}
