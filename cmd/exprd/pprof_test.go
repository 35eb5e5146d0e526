package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestDebugPprofAddr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		serve bool
	}{
		{name: "off by default", args: nil},
		{name: "off when empty", args: []string{"--debug-pprof-addr", ""}},
		{name: "served when set", args: []string{"--debug-pprof-addr", "127.0.0.1:0"}, serve: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.pprof.start(slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			if !tc.serve {
				if p != nil {
					t.Fatalf("serving profiles on %s, want off", p.addr)
				}
				return
			}
			if p == nil {
				t.Fatal("not serving profiles")
			}
			base := "http://" + p.addr.String()
			for path, want := range map[string]string{
				"/debug/pprof/":                  "heap",
				"/debug/pprof/heap?debug=1":      "heap profile:",
				"/debug/pprof/goroutine?debug=1": "goroutine profile:",
			} {
				res, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
					t.Errorf("GET %s: %d, want 200 with %q in\n%.300s", path, res.StatusCode, want, body)
				}
			}
			// Nothing else is served there.
			res, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("GET /metrics on the profile address: %d, want 404", res.StatusCode)
			}
		})
	}
}
