package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// bigTool is the tool of the big provider, as CodeMode names it.
const bigTool = "big.get"

// bigProvider is a loopback HTTP UTCP provider whose one tool, get,
// answers a JSON body of a fixed size (5 MiB by default), whatever it is
// asked.
type bigProvider struct {
	srv *http.Server
	url string
}

func startBigProvider(size int) (*bigProvider, error) {
	body := bigBody(size)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &bigProvider{url: "http://" + lis.Addr().String() + "/get"}
	mux := http.NewServeMux()
	mux.HandleFunc("/get", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	})
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(lis) }()
	return p, nil
}

func (p *bigProvider) Close() error { return p.srv.Close() }

// bigBody is a JSON object of size bytes: {"items": [{"id": N, "text":
// "xxxx…"}, …]}, padded to the exact size.
func bigBody(size int) []byte {
	var b strings.Builder
	b.Grow(size + 128)
	b.WriteString(`{"items":[`)
	text := strings.Repeat("x", 200)
	for i := 0; b.Len() < size-300; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"text":"%s"}`, i, text)
	}
	b.WriteString(`],"pad":"`)
	b.WriteString(strings.Repeat("p", max(size-b.Len()-2, 0)))
	b.WriteString(`"}`)
	return []byte(b.String())
}

// writeManual writes the UTCP manual of the big provider into dir as
// big.json: exprd's --manuals-dir registers it as the manual "big" (the
// registry refuses writes over the API without auth, by design).
func writeManual(dir, url string) error {
	manual := map[string]any{
		"utcp_version": "1.0.1", "manual_version": "1.0.0",
		"tools": []any{map[string]any{
			"name": "get", "description": "Answers a large JSON document.",
			"inputs":  map[string]any{"type": "object"},
			"outputs": map[string]any{"type": "object"},
			"tags":    []string{"hostile"},
			"tool_call_template": map[string]any{
				"call_template_type": "http", "http_method": "GET", "url": url,
			},
		}},
	}
	b, err := json.Marshal(manual)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "big.json"), b, 0o600)
}
