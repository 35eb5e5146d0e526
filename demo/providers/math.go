package providers

import (
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Math is an HTTP UTCP provider: its manual at /utcp offers add, subtract,
// multiply, divide and sqrt, each a GET with its numbers in the query
// string, answering {"result": N}.
type Math struct {
	srv *http.Server
	url string
}

// StartMath serves Math on a loopback port.
func StartMath() (*Math, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &Math{url: "http://" + lis.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", m.manual)
	// An operation's error is its code: what a caller of exprd is shown
	// with --show-provider-messages (the message never is).
	ops := map[string]func(a, b float64) (float64, error){
		"add":      func(a, b float64) (float64, error) { return a + b, nil },
		"subtract": func(a, b float64) (float64, error) { return a - b, nil },
		"multiply": func(a, b float64) (float64, error) { return a * b, nil },
		"divide": func(a, b float64) (float64, error) {
			if b == 0 {
				return 0, mathError{"division_by_zero", "division by zero"}
			}
			return a / b, nil
		},
		"sqrt": func(a, _ float64) (float64, error) {
			if a < 0 {
				return 0, mathError{"negative_square_root", "the square root of a negative number"}
			}
			return math.Sqrt(a), nil
		},
	}
	for name, op := range ops {
		mux.HandleFunc("GET /math/"+name, func(w http.ResponseWriter, r *http.Request) {
			a, errA := strconv.ParseFloat(r.URL.Query().Get("a"), 64)
			b, errB := strconv.ParseFloat(r.URL.Query().Get("b"), 64)
			if errA != nil || (name != "sqrt" && errB != nil) {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "not_a_number", "message": "a and b must be numbers"}})
				return
			}
			v, err := op(a, b)
			if err != nil {
				me := err.(mathError)
				writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": map[string]string{"code": me.code, "message": me.msg}})
				return
			}
			writeJSON(w, http.StatusOK, map[string]float64{"result": v})
		})
	}
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = m.srv.Serve(lis) }()
	return m, nil
}

// mathError is an operation's failure: a code and a message.
type mathError struct{ code, msg string }

func (e mathError) Error() string { return e.msg }

// URL is the provider's base URL; its manual is at URL()+"/utcp".
func (m *Math) URL() string { return m.url }

// Close stops the provider.
func (m *Math) Close() error { return m.srv.Close() }

func (m *Math) manual(w http.ResponseWriter, _ *http.Request) {
	two := json.RawMessage(`{"type":"object","required":["a","b"],"properties":{"a":{"type":"number"},"b":{"type":"number"}},"additionalProperties":false}`)
	one := json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{"type":"number"}},"additionalProperties":false}`)
	out := json.RawMessage(`{"type":"object","properties":{"result":{"type":"number"}}}`)
	tool := func(name, desc string, in json.RawMessage) map[string]any {
		return map[string]any{
			"name": name, "description": desc, "inputs": in, "outputs": out, "tags": []string{"math", "arithmetic"},
			"tool_call_template": map[string]any{"call_template_type": "http", "http_method": "GET", "url": m.url + "/math/" + name},
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"utcp_version": "1.0.1", "manual_version": "1.0.0",
		"tools": []any{
			tool("add", "Adds two numbers: a + b.", two),
			tool("subtract", "Subtracts b from a: a - b.", two),
			tool("multiply", "Multiplies two numbers: a × b.", two),
			tool("divide", "Divides a by b.", two),
			tool("sqrt", "The square root of a.", one),
		},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
