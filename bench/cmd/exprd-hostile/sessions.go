package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// The Session cases: 1 (big states), 3 (deep set addresses), 6 (clients
// that never read) and 7 (allocating programs); callFlood serves 10b too.

// stateFlood is case 1: each stream sends a state past the containers
// bound (Rejected RESOURCE_EXHAUSTED, max_state_containers or
// memory_budget wanted), then a legal one of normal objects, which a call
// reading it must see unless the memory budget refused it
// (RESOURCE_EXHAUSTED, memory_budget).
func stateFlood(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.stateStreams
	conns, err := dialPool(e.addr, caseSource(1), (n+31)/32, withToken(e.tokens.cases[1]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stateStream(ctx, e, conns.get(i), t) })
	}
	wg.Wait()
	return fmt.Sprintf("%d streams: a %.1f MB state of %d empty objects, then a legal %.1f MB one of %d objects, in a loop",
		n, mb(len(e.hostileState)), (len(e.hostileState)-8)/3, mb(len(e.legalState)), e.legalItems), nil
}

func stateStream(ctx context.Context, e *env, conn *grpc.ClientConn, t *tally) {
	s, ok := open(conn, e, t, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
	if !ok {
		return
	}
	defer s.close()
	wantRead := fmt.Sprintf(`{"value":%d}`, e.legalItems)
	// At least one round, however short the case.
	for n := 0; n == 0 || ctx.Err() == nil; n++ {
		t0 := time.Now()
		if err := s.send(stateMsg(e.hostileState)); err != nil {
			s.record(t, "hostile state (send)", err, time.Since(t0))
			return
		}
		m, err := s.recv()
		if err != nil {
			s.record(t, "hostile state", err, time.Since(t0))
			return
		}
		// Past the containers bound, or refused before decoding by a
		// memory budget that cannot hold it now: either is right.
		t.answer("hostile state: "+kindOf(m), messageOf(m), isQuota(m, "max_state_containers") || isQuota(m, "memory_budget"), time.Since(t0))

		t0 = time.Now()
		id := strconv.Itoa(n)
		if err := s.send(stateMsg(e.legalState)); err != nil {
			s.record(t, "legal state (send)", err, time.Since(t0))
			return
		}
		if err := s.send(callMsg(id, `{"read": "len(scopes.root.items)"}`)); err != nil {
			s.record(t, "legal state's call (send)", err, time.Since(t0))
			return
		}
		a, early, err := s.awaitAnswer(id)
		switch {
		case err != nil:
			s.record(t, "legal state's call", err, time.Since(t0))
			return
		case early != nil:
			// A legal state the memory budget cannot hold now is refused,
			// not acknowledged: right, and nothing acknowledged is lost.
			t.answer("legal state: "+kindOf(early), messageOf(early), isQuota(early, "memory_budget"), time.Since(t0))
		default:
			t.answer("legal state: read back "+answerKind(a), a.GetAnswerJson(), a.GetAnswerJson() == wantRead, time.Since(t0))
		}
	}
}

// deepAddresses is case 3: calls whose set address is far past 1,024
// bytes and 64 segments; each must be answered guardrail-violation.
func deepAddresses(ctx context.Context, e *env, t *tally) (string, error) {
	err := callFlood(ctx, e, t, 3, e.cfg.deepStreams, "deep call", e.deepCall,
		func(a *exprdv1.Answer) bool { return a.GetReason() == "guardrail-violation" })
	return fmt.Sprintf("%d streams: calls setting a %d-byte, %d-segment address, in a loop",
		e.cfg.deepStreams, len(e.deepAddress), strings.Count(e.deepAddress, ".")+1), err
}

// allocatingPrograms is case 7: calls whose one step allocates until its
// time budget ends it; each must be answered, with its value or
// budget-exceeded.
func allocatingPrograms(ctx context.Context, e *env, t *tally) (string, error) {
	err := callFlood(ctx, e, t, 7, e.cfg.allocStreams, "allocating call", e.allocCall,
		func(a *exprdv1.Answer) bool { return a.GetReason() == "" || a.GetReason() == "budget-exceeded" })
	return fmt.Sprintf("%d streams: calls whose one step is %s (100 MB if it ran to the end), in a loop", e.cfg.allocStreams, allocExpr), err
}

// callFlood is n Session streams of case number c (over two connections)
// sending call, named what, in a loop; right says whether an answer is of
// the kind wanted.
func callFlood(ctx context.Context, e *env, t *tally, c, n int, what, call string, right func(*exprdv1.Answer) bool) error {
	conns, err := dialPool(e.addr, caseSource(c), 2, withToken(e.tokens.cases[c]))
	if err != nil {
		return err
	}
	defer conns.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, ok := open(conns.get(i), e, t, &exprdv1.Open{})
			if !ok {
				return
			}
			defer s.close()
			for n := 0; n == 0 || ctx.Err() == nil; n++ {
				id := strconv.Itoa(n)
				t0 := time.Now()
				if err := s.send(callMsg(id, call)); err != nil {
					s.record(t, what+" (send)", err, time.Since(t0))
					return
				}
				a, early, err := s.awaitAnswer(id)
				switch {
				case err != nil:
					s.record(t, what, err, time.Since(t0))
					return
				case early != nil:
					t.answer(kindOf(early), messageOf(early), false, time.Since(t0))
				default:
					t.answer(answerKind(a), a.GetAnswerJson(), right(a), time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// silentReaders is case 6: streams that send calls producing many
// StepWrites and never read. Nothing comes back by design; what is
// measured is the steady client and exprd's memory, and that exprd lets
// go of the streams once they are cancelled.
func silentReaders(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.silentStreams
	// A fixed 64 KiB window (no BDP growth): exprd's sends block as soon
	// as the stream's window is full, and this process buffers little.
	conns, err := dialPool(e.addr, caseSource(6), (n+7)/8, withToken(e.tokens.cases[6]),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			t0 := time.Now()
			stream, err := exprdv1.NewExprToolClient(conns.get(i)).Session(sctx)
			if err != nil {
				t.rpcError(err, nil, false, time.Since(t0))
				return
			}
			if err := stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}}); err != nil {
				return
			}
			// Send blocks once exprd stops reading; the case's end cancels it.
			for n := 0; sctx.Err() == nil && (e.cfg.silentCalls == 0 || n < e.cfg.silentCalls); n++ {
				if stream.Send(callMsg(strconv.Itoa(n), e.silentCall)) != nil {
					return
				}
				t.sent("call sent, never read")
			}
			<-sctx.Done()
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d streams that never read, each sending calls of %d steps writing %d KB each (%.1f MB of StepWrites a call) until sending blocks",
		n, silentSteps, silentValue/1000, mb(silentSteps*silentValue)), nil
}

// open opens a session and waits for Opened, counting the open as a
// request.
func open(conn *grpc.ClientConn, e *env, t *tally, o *exprdv1.Open) (*session, bool) {
	t0 := time.Now()
	s, err := openSession(conn, e.cfg.deadline, o)
	if err != nil {
		t.rpcError(err, nil, false, time.Since(t0))
		return nil, false
	}
	m, err := s.recv()
	if err != nil {
		s.record(t, "open", err, time.Since(t0))
		s.cancel()
		return nil, false
	}
	if m.GetOpened() == nil {
		t.answer("open: "+kindOf(m), messageOf(m), false, time.Since(t0))
		s.close()
		return nil, false
	}
	t.answer("Opened", "", true, time.Since(t0))
	return s, true
}

// awaitAnswer reads until the Answer of call id. early is the first
// Rejected that came before it (the call's, or a state's), if any.
func (s *session) awaitAnswer(id string) (a *exprdv1.Answer, early *exprdv1.SessionResponse, err error) {
	for {
		m, err := s.recv()
		if err != nil {
			return nil, early, err
		}
		if a := m.GetAnswer(); a != nil && a.GetCallId() == id {
			return a, early, nil
		}
		if m.GetRejected() != nil && early == nil {
			early = m
			if m.GetRejected().GetCallId() == id {
				return nil, early, nil // the call itself was refused
			}
		}
	}
}

func stateMsg(state string) *exprdv1.SessionRequest {
	return &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: state}}}
}

func callMsg(id, input string) *exprdv1.SessionRequest {
	return &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: id, InputJson: input}}}
}

// kindOf names a server message for the tally: its type, and for a
// Rejected its code and quota subjects.
func kindOf(m *exprdv1.SessionResponse) string {
	switch {
	case m.GetRejected() != nil:
		r := m.GetRejected()
		s := fmt.Sprintf("Rejected %s %s", r.GetKind(), codes.Code(r.GetStatus().GetCode()))
		if subj := quotaSubjects(r); len(subj) > 0 {
			s += " (" + strings.Join(subj, ", ") + ")"
		}
		return s
	case m.GetAnswer() != nil:
		return answerKind(m.GetAnswer())
	case m.GetOpened() != nil:
		return "Opened"
	case m.GetStepWrite() != nil:
		return "StepWrite"
	}
	return fmt.Sprintf("%T", m.GetMsg())
}

// messageOf is what a Rejected or an Answer says.
func messageOf(m *exprdv1.SessionResponse) string {
	if r := m.GetRejected(); r != nil {
		return r.GetStatus().GetMessage()
	}
	return m.GetAnswer().GetAnswerJson()
}

func answerKind(a *exprdv1.Answer) string {
	if a.GetReason() != "" {
		return "Answer " + a.GetReason()
	}
	return "Answer"
}

func quotaSubjects(r *exprdv1.Rejected) []string {
	var out []string
	for _, d := range r.GetStatus().GetDetails() {
		m, err := d.UnmarshalNew()
		if err != nil {
			continue
		}
		if q, ok := m.(*errdetails.QuotaFailure); ok {
			for _, v := range q.GetViolations() {
				out = append(out, v.GetSubject())
			}
		}
	}
	return out
}

// isQuota reports whether m is a Rejected RESOURCE_EXHAUSTED naming subject.
func isQuota(m *exprdv1.SessionResponse, subject string) bool {
	r := m.GetRejected()
	if r == nil || codes.Code(r.GetStatus().GetCode()) != codes.ResourceExhausted {
		return false
	}
	for _, s := range quotaSubjects(r) {
		if s == subject {
			return true
		}
	}
	return false
}

func mb(n int) float64 { return float64(n) / 1e6 }
