package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Case 8: peers that send before, or instead of, a token, over raw
// HTTP/2 (rawConn): a gRPC client library would never send any of it.

const (
	callMethod   = "/exprd.v1.ExprTool/Call"
	healthCheck  = "/grpc.health.v1.Health/Check"
	healthWatch  = "/grpc.health.v1.Health/Watch"
	hpackName    = "x-hostile-bin"
	hpackValue   = 4000 // base64 characters: the entry (with its name and 32) fits HPACK's 4,096-byte table
	maxRecvBytes = 16 << 20
)

// preSource is the k-th loopback address of case 8's clients: 127.0.8.k.
func preSource(k int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 8, byte(k)}) }

// emptyMessage is a gRPC message of no bytes (an empty request).
var emptyMessage = grpcFrame(nil, false)

// holdGrace is how long after a case's end a held stream that carries
// no token may still be refused: exprd can refuse it from its headers,
// so a stream it still holds then is one it never refused.
const holdGrace = time.Second

// hpackFlood is 8a: one connection, streams whose header blocks repeat a
// -bin field by its HPACK index (a byte each on the wire, the field's
// value decoded each time), no token, held open without a message until
// the case ends; then each sends an empty message and must be answered.
func hpackFlood(ctx context.Context, e *env, t *tally) (string, error) {
	c, err := dialRaw(e.addr, preSource(1))
	if err != nil {
		return "", err
	}
	defer c.close()
	field := hpack.HeaderField{Name: hpackName, Value: strings.Repeat("QUFB", hpackValue/4)}
	refs := max(e.cfg.hpackBytes/int(field.Size()), 1)
	hdrs := grpcHeaders(c.authority, callMethod)
	for range refs {
		hdrs = append(hdrs, field)
	}
	t0 := time.Now()
	var streams []*rawStream
	for range e.cfg.hpackStreams {
		st, _ := c.open(hdrs, false, false)
		if st == nil {
			recordRaw(t, "hpack stream", c.goneOutcome(), true, time.Since(t0), nil)
			continue
		}
		streams = append(streams, st)
	}
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
	defer cancel()
	for _, st := range streams {
		if !st.answered() {
			_ = c.send(dctx, st, emptyMessage, true)
		}
	}
	for _, st := range streams {
		o, ok := st.wait(dctx)
		recordRaw(t, "hpack stream", o, ok, time.Since(t0), refusedOrUnauthenticated)
	}
	return fmt.Sprintf("%d streams on one connection, no token, each header block a %d-character %s field %d times by its HPACK index (%.1f MB decoded a stream, %d bytes on the wire), held without a message until the case ended, then an empty one",
		e.cfg.hpackStreams, hpackValue, hpackName, refs, mb(refs*int(field.Size())), refs+hpackValue), nil
}

// refusedOrUnauthenticated: what a stream without a token should get.
func refusedOrUnauthenticated(o outcome) bool {
	return !o.ours && !strings.HasPrefix(o.kind, "grpc OK")
}

// windowFlood is 8b: streams without a token, each sending one
// flow-control window of a message whose prefix claims 16 MiB, never
// finished; each must be refused by the case's end and a second.
func windowFlood(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.windowStreams
	perConn := 250
	conns := (n + perConn - 1) / perConn
	window := e.cfg.streamWindow
	body := append(grpcPrefix(maxRecvBytes), make([]byte, window-5)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	var sent atomic.Int64
	for k := range conns {
		wg.Go(func() {
			c, err := dialRaw(e.addr, preSource(2))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer c.close()
			t0 := time.Now()
			hdrs := grpcHeaders(c.authority, callMethod)
			var streams []*rawStream
			for i := k * perConn; i < min(n, (k+1)*perConn) && ctx.Err() == nil; i++ {
				st, err := c.open(hdrs, false, false)
				if st == nil {
					recordRaw(t, "unfinished message", c.goneOutcome(), true, time.Since(t0), nil)
					continue
				}
				if err == nil && c.send(ctx, st, body, false) == nil {
					sent.Add(int64(len(body)))
				}
				streams = append(streams, st)
			}
			<-ctx.Done()
			held(t, "unfinished message", streams, t0, true)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return "", fmt.Errorf("dial: %s", errs[0])
	}
	return fmt.Sprintf("%d streams without a token over %d connections, each sending one %d KiB window of a message claiming %d MiB and never finishing it (%.0f MB sent in all)",
		n, conns, window>>10, maxRecvBytes>>20, mb(int(sent.Load()))), nil
}

// held records streams held until the case's end: each answered by then
// (or within holdGrace after) as its outcome; one still waiting is no
// answer when it carries no token (mustRefuse), else held until the
// client let go.
func held(t *tally, what string, streams []*rawStream, t0 time.Time, mustRefuse bool) {
	gctx, cancel := context.WithTimeout(context.Background(), holdGrace)
	defer cancel()
	for _, st := range streams {
		o, ok := st.wait(gctx)
		if !ok && !mustRefuse {
			o, ok = outcome{kind: "held until the client let go", typed: true, ours: true}, true
		}
		recordRaw(t, what, o, ok, time.Since(t0), func(o outcome) bool { return !mustRefuse || refusedOrUnauthenticated(o) })
	}
}

// gzipFlood is 8c: gzip-compressed Calls that inflate to just under
// 16 MiB each, half without a token and half with one, in a loop.
func gzipFlood(ctx context.Context, e *env, t *tally) (string, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range e.cfg.gzipClients {
		withTok := i%2 == 1
		wg.Go(func() {
			c, err := dialRaw(e.addr, preSource(3))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer c.close()
			extra := []hpack.HeaderField{{Name: "grpc-encoding", Value: "gzip", Sensitive: true}}
			what := "gzip message, no token"
			if withTok {
				extra = append(extra, authHeader(e.tokens.cases[8]))
				what = "gzip message with a token"
			}
			hdrs := grpcHeaders(c.authority, callMethod, extra...)
			for first := true; first || ctx.Err() == nil; first = false {
				t0 := time.Now()
				dctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
				st, err := c.open(hdrs, false, false)
				if st == nil {
					cancel()
					recordRaw(t, what, c.goneOutcome(), true, time.Since(t0), nil)
					return
				}
				if err == nil {
					_ = c.send(dctx, st, e.gzipBody, true)
				}
				o, ok := st.wait(dctx)
				cancel()
				recordRaw(t, what, o, ok, time.Since(t0), nil)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return "", fmt.Errorf("dial: %s", errs[0])
	}
	return fmt.Sprintf("%d connections sending Calls compressed with gzip (grpc-encoding: gzip), %d KB each inflating to %.1f MB, half without a token, in a loop",
		e.cfg.gzipClients, len(e.gzipBody)/1000, mb(e.gzipInflated)), nil
}

// gzipCall is a CallRequest whose state is inflated bytes of spaces and
// {}, gzip-compressed, as a gRPC message, and the size it inflates to.
func gzipCall(inflated int) ([]byte, int) {
	req := &exprdv1.CallRequest{StateJson: strings.Repeat(" ", max(inflated-16, 0)) + "{}", InputJson: `{"steps":[]}`}
	raw, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = w.Write(raw)
	_ = w.Close()
	return grpcFrame(b.Bytes(), true), len(raw)
}

// squatters is 8d: streams with a token whose message's prefix claims
// 16 MiB and then nothing, held until the case ends (or exprd resets
// them), from four addresses; meanwhile a legitimate caller of its own
// sends 3 MB states on a Session and reads them back, which must work.
func squatters(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.squatters
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	const addrs = 4
	var squatting atomic.Int64
	for k := range addrs {
		wg.Go(func() {
			c, err := dialRaw(e.addr, preSource(10+k))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer c.close()
			t0 := time.Now()
			hdrs := grpcHeaders(c.authority, callMethod, authHeader(e.tokens.cases[8]))
			var streams []*rawStream
			for i := k; i < n; i += addrs {
				st, err := c.open(hdrs, false, false)
				if st == nil {
					recordRaw(t, "squatter", c.goneOutcome(), true, time.Since(t0), nil)
					continue
				}
				if err == nil && c.send(ctx, st, grpcPrefix(maxRecvBytes), false) == nil {
					squatting.Add(1)
				}
				streams = append(streams, st)
			}
			<-ctx.Done()
			held(t, "squatter", streams, t0, false)
		})
	}
	// The legitimate caller starts once the squatters are in place.
	legitDone := make(chan string, 1)
	go func() {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		legitDone <- legitStates(ctx, e, t.legit)
	}()
	wg.Wait()
	legit := <-legitDone
	if len(errs) > 0 {
		return "", fmt.Errorf("dial: %s", errs[0])
	}
	return fmt.Sprintf("%d streams with a token from %d addresses, each a length prefix claiming %d MiB and nothing more, held until the case ended (%d sent their prefix); %s",
		n, addrs, maxRecvBytes>>20, squatting.Load(), legit), nil
}

// legitBackoff is how long the legitimate caller waits after a failed
// round before the next, and before it sends a refused state again.
const legitBackoff = 100 * time.Millisecond

// legitStates is case 8d's legitimate caller: on one Session, a 3 MB
// state then a call reading its length back, in a loop; each round must
// read back the right length within the steady client's deadline. A state
// refused RESOURCE_EXHAUSTED (the budget spent by others for now) is sent
// again after legitBackoff within the first half of that deadline: what
// must hold is that the caller is served, not that it never waits.
func legitStates(ctx context.Context, e *env, t *tally) string {
	conn := e.legitConn // made and proven before the phase (env)
	if conn == nil {
		return "the legitimate caller had no connection"
	}
	want := fmt.Sprintf(`{"value":%d}`, e.legitItems)
	rounds, wrong, retries := 0, 0, 0
	for first := true; first || ctx.Err() == nil; first = false {
		rounds++
		if w := t.wrong(); w > wrong {
			// A well-behaved client backs off after a failed round.
			wrong = w
			select {
			case <-ctx.Done():
				continue
			case <-time.After(legitBackoff):
			}
		}
		t0 := time.Now()
		s, err := openSession(conn, e.cfg.steadyDeadline, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
		if err != nil {
			t.rpcError(err, nil, false, time.Since(t0))
			continue
		}
		func() {
			defer s.close()
			if m, err := s.recv(); err != nil || m.GetOpened() == nil {
				if err != nil {
					s.record(t, "legitimate open", err, time.Since(t0))
				} else {
					t.answer("legitimate open: "+kindOf(m), messageOf(m), false, time.Since(t0))
				}
				return
			}
			// A state refused for want of memory now (RESOURCE_EXHAUSTED)
			// is sent again after a back-off, as a well-behaved client
			// does, while the round's deadline leaves time for it.
			for attempt := 1; ; attempt++ {
				id := strconv.Itoa(attempt)
				if err := s.send(stateMsg(e.legitState)); err != nil {
					s.record(t, "legitimate state (send)", err, time.Since(t0))
					return
				}
				if err := s.send(callMsg(id, `{"read": "len(scopes.root.items)"}`)); err != nil {
					s.record(t, "legitimate call (send)", err, time.Since(t0))
					return
				}
				a, early, err := s.awaitAnswer(id)
				switch {
				case err != nil:
					s.record(t, "legitimate state", err, time.Since(t0))
				case early != nil && retryable(early) && time.Since(t0)+legitBackoff < e.cfg.steadyDeadline/2:
					retries++
					select {
					case <-ctx.Done():
					case <-time.After(legitBackoff):
						continue
					}
					t.answer("legitimate state: "+kindOf(early), messageOf(early), false, time.Since(t0))
				case early != nil:
					t.answer("legitimate state: "+kindOf(early), messageOf(early), false, time.Since(t0))
				default:
					t.answer("legitimate state: read back "+answerKind(a), a.GetAnswerJson(), a.GetAnswerJson() == want, time.Since(t0))
				}
				return
			}
		}()
	}
	return fmt.Sprintf("a legitimate caller with a token of its own sent a %.1f MB state on a Session and read it back, %d times (%d states sent again after a RESOURCE_EXHAUSTED)", mb(len(e.legitState)), rounds, retries)
}

// rapidResets is 8e: connections opening Calls without a token and
// resetting each at once (HEADERS then RST_STREAM), as fast as they can
// write, then a health check on the same connection, which must be
// answered (or the connection refused with a GOAWAY).
func rapidResets(ctx context.Context, e *env, t *tally) (string, error) {
	var wg sync.WaitGroup
	var total atomic.Int64
	var mu sync.Mutex
	var errs []string
	for range e.cfg.resetConns {
		wg.Go(func() {
			c, err := dialRaw(e.addr, preSource(30))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer c.close()
			t0 := time.Now()
			n, _ := c.rapidReset(ctx, grpcHeaders(c.authority, callMethod), e.cfg.resetsPerConn)
			total.Add(int64(n))
			what := fmt.Sprintf("health check after %s resets", roundDown(n))
			dctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
			defer cancel()
			st, err := c.open(grpcHeaders(c.authority, healthCheck), false, false)
			if st == nil {
				recordRaw(t, what, c.goneOutcome(), true, time.Since(t0), nil)
				return
			}
			if err == nil {
				_ = c.send(dctx, st, emptyMessage, true)
			}
			o, ok := st.wait(dctx)
			recordRaw(t, what, o, ok, time.Since(t0), nil)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return "", fmt.Errorf("dial: %s", errs[0])
	}
	return fmt.Sprintf("%d connections opening Calls without a token and resetting each at once (%d in all, at most %d a connection), then a health check on each",
		e.cfg.resetConns, total.Load(), e.cfg.resetsPerConn), nil
}

// roundDown names a count by its order of magnitude, so that the kinds
// of answer do not split by exact counts.
func roundDown(n int) string {
	p := 1
	for p*10 <= n {
		p *= 10
	}
	return "≥" + strconv.Itoa(n/p*p)
}

// healthStreams is 8f: one connection opening health Watch streams (no
// token needed, no rate limit), each answered by its first message, held
// until the case ends.
func healthStreams(ctx context.Context, e *env, t *tally) (string, error) {
	c, err := dialRaw(e.addr, preSource(40))
	if err != nil {
		return "", err
	}
	defer c.close()
	t0 := time.Now()
	hdrs := grpcHeaders(c.authority, healthWatch)
	var streams []*rawStream
	for range e.cfg.healthStreams {
		st, err := c.open(hdrs, false, true)
		if st == nil {
			recordRaw(t, "health stream", c.goneOutcome(), true, time.Since(t0), nil)
			continue
		}
		if err == nil {
			_ = c.send(ctx, st, emptyMessage, true)
		}
		streams = append(streams, st)
	}
	dctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
	defer cancel()
	for _, st := range streams {
		o, ok := st.wait(dctx)
		recordRaw(t, "health stream", o, ok, time.Since(t0), nil)
	}
	<-ctx.Done()
	return fmt.Sprintf("%d health Watch streams on one connection, each held open until the case ended", e.cfg.healthStreams), nil
}

// retryable reports whether a Session's Rejected is one a client sends
// again later: RESOURCE_EXHAUSTED, the server's memory spent for now.
func retryable(m *exprdv1.SessionResponse) bool {
	return codes.Code(m.GetRejected().GetStatus().GetCode()) == codes.ResourceExhausted
}
