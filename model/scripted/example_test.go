package scripted_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/exprd/exprd/model/scripted"
)

// A script of one turn, asked for by a plain HTTP client; the server
// records what it was sent.
func ExampleStart() {
	srv, err := scripted.Start(scripted.Script{Created: 1700000000, Turns: []scripted.Turn{{Text: "Hello there."}}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Post(srv.BaseURL()+"/chat/completions", "application/json", strings.NewReader(
		`{"model": "any", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}`))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "data: ") {
			fmt.Println(line)
		}
	}
	fmt.Println("asked:", srv.Requests()[0].Chat.LastUser())
	// Output:
	// data: {"id":"chatcmpl-scripted-0","object":"chat.completion.chunk","created":1700000000,"model":"any","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}
	// data: {"id":"chatcmpl-scripted-0","object":"chat.completion.chunk","created":1700000000,"model":"any","choices":[{"index":0,"delta":{"content":"Hello "},"finish_reason":null}]}
	// data: {"id":"chatcmpl-scripted-0","object":"chat.completion.chunk","created":1700000000,"model":"any","choices":[{"index":0,"delta":{"content":"there."},"finish_reason":null}]}
	// data: {"id":"chatcmpl-scripted-0","object":"chat.completion.chunk","created":1700000000,"model":"any","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}
	// data: [DONE]
	// asked: Hi
}
