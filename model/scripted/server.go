package scripted

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the server.
const (
	// MaxRequestBytes bounds a request body; a larger one gets 413.
	MaxRequestBytes = 8 << 20
	// readHeaderTimeout bounds a client's request line and headers.
	readHeaderTimeout = 10 * time.Second
)

// Server is a chat-completions server on loopback that replays a [Script].
// Its methods are safe for concurrent use.
type Server struct {
	script  Script
	url     string
	srv     *http.Server
	done    chan struct{}
	created int64

	wg    sync.WaitGroup // Serve, every connection and every handler
	conns atomic.Int64   // connections opened

	mu       sync.Mutex
	next     int // the turn a pass goes on from
	used     []bool
	requests []Request
	closed   bool
}

// Start validates the script and starts a server for it on 127.0.0.1 at a
// free port. Close it when done.
func Start(script Script) (*Server, error) {
	if err := script.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scripted: listen: %w", err)
	}
	s := &Server{
		script:  script,
		url:     "http://" + ln.Addr().String(),
		done:    make(chan struct{}),
		created: script.Created,
		used:    make([]bool, len(script.Turns)),
	}
	if s.created == 0 {
		s.created = time.Now().Unix()
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
		// Close waits for every connection's goroutine, which may linger
		// after its handler (net/http waits before closing a connection
		// whose request body was not read).
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.wg.Add(1)
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.wg.Done()
			}
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Connections is how many connections clients have opened so far: a client
// that reuses its connections opens one per request it makes at once.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// URL is the server's root, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// BaseURL is the URL to configure an OpenAI-compatible client with:
// URL()+"/v1". The server also answers without the /v1 prefix.
func (s *Server) BaseURL() string { return s.url + "/v1" }

// Requests returns the requests received so far, in order: a copy of the
// list and of each header map (bodies are shared: do not modify them).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Close stops the server, ends the replies in flight, and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	_ = s.srv.Close()
	s.wg.Wait()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case path == "/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case path == "/models" && r.Method == http.MethodGet:
		s.models(w)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) models(w http.ResponseWriter) {
	name := s.script.Model
	if name == "" {
		name = DefaultModel
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","created":%d,"owned_by":"scripted"}]}`, name, s.created)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	rec := Request{Turn: -1, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	switch {
	case errors.As(err, &tooLarge):
		s.record(rec)
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request body too large")
		return
	case err != nil:
		s.record(rec)
		return
	}
	chat, err := decodeChat(body)
	if err != nil {
		s.record(rec)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not a chat-completions request: "+err.Error())
		return
	}
	rec.Chat = chat
	if k := s.script.APIKey; k != "" && r.Header.Get("Authorization") != "Bearer "+k {
		s.record(rec)
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "missing or wrong API key")
		return
	}
	if chat.Model == "" || len(chat.Messages) == 0 {
		s.record(rec)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model and messages are required")
		return
	}
	turn, n := s.pick(rec)
	if turn < 0 {
		writeError(w, http.StatusBadRequest, "script_mismatch", fmt.Sprintf(
			"scripted: no turn left that matches request %d (last message role %q, last user message %q)",
			n, chat.Messages[len(chat.Messages)-1].Role, chat.LastUser()))
		return
	}
	t := &s.script.Turns[turn]
	if t.Follow {
		made := *t
		made.Text, made.ToolCalls = follow(&chat)
		t = &made
	}
	rp := &reply{s: s, w: w, r: r, turn: t, chat: &chat, n: n}
	if !rp.serve() {
		s.mu.Lock()
		s.requests[n].Aborted = !s.closed
		s.mu.Unlock()
		// Drop the connection: whatever was written is no whole reply.
		panic(http.ErrAbortHandler)
	}
}

// record appends a request no turn answers.
func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.N = len(s.requests)
	s.requests = append(s.requests, rec)
}

// pick records the request and chooses its turn: the first unused one from
// where the last pass left off that fits, then (with Loop) from the start.
func (s *Server) pick(rec Request) (turn, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.N = len(s.requests)
	defer func() {
		rec.Turn = turn
		s.requests = append(s.requests, rec)
	}()
	if t := s.findLocked(&rec.Chat); t >= 0 {
		return t, rec.N
	}
	if s.script.Loop {
		clear(s.used)
		s.next = 0
		if t := s.findLocked(&rec.Chat); t >= 0 {
			return t, rec.N
		}
	}
	return -1, rec.N
}

func (s *Server) findLocked(chat *ChatRequest) int {
	for i := s.next; i < len(s.script.Turns); i++ {
		if !s.used[i] && s.script.Turns[i].Match.fits(chat) {
			s.used[i] = true
			if i == s.next {
				for s.next < len(s.used) && s.used[s.next] {
					s.next++
				}
			}
			return i
		}
	}
	return -1
}

func (m *Match) fits(chat *ChatRequest) bool {
	if m == nil {
		return true
	}
	if m.LastRole != "" && chat.Messages[len(chat.Messages)-1].Role != m.LastRole {
		return false
	}
	if m.LastUser != "" && !strings.Contains(strings.ToLower(chat.LastUser()), strings.ToLower(m.LastUser)) {
		return false
	}
	return true
}

// wait sleeps for ms milliseconds; false when the client or the server went
// away first.
func (s *Server) wait(r *http.Request, ms int) bool {
	if ms <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%s,"type":%q,"code":null}}`, quote(msg), typ)
}
