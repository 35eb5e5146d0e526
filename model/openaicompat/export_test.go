package openaicompat

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// CompatCase is a streamed reply as some server sends it, and the turn it
// must make: the cases of testdata/compat.json feed both the compatibility
// test and the fuzz target's seeds.
type CompatCase struct {
	Name   string            `json:"name"`
	Chunks []json.RawMessage `json:"chunks"` // a JSON string is sent verbatim, anything else as its JSON
	SSE    string            `json:"sse"`    // or the whole body
	Want   CompatWant        `json:"want"`
	Error  string            `json:"error"` // stream-cut, malformed-chunk, no-choices, model-reported
}

// CompatWant is the Response a case must assemble.
type CompatWant struct {
	ID, Model, Text, Refusal string
	Calls                    []CompatCall
	Finish                   string `json:"finish"`
	RawFinish                string `json:"raw_finish"`
	Usage                    struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
}

// CompatCall is a tool call a case must assemble; ID "*" is any generated id.
type CompatCall struct {
	ID, Name, Arguments string
	Invalid             bool
}

// DataChunks are the case's chunks as "data:" payloads.
func (c CompatCase) DataChunks() []string {
	out := make([]string, 0, len(c.Chunks))
	for _, raw := range c.Chunks {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, s)
			continue
		}
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		out = append(out, b.String())
	}
	return out
}

// Body is the case's whole SSE body.
func (c CompatCase) Body() string {
	if c.SSE != "" {
		return c.SSE
	}
	var b strings.Builder
	for _, d := range c.DataChunks() {
		b.WriteString("data: " + d + "\n\n")
	}
	return b.String()
}

// LoadCompatCases reads testdata/compat.json.
func LoadCompatCases(tb testing.TB) []CompatCase {
	tb.Helper()
	data, err := os.ReadFile("testdata/compat.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []CompatCase
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		tb.Fatalf("testdata/compat.json: %v", err)
	}
	return cases
}
