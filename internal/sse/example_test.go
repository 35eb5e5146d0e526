package sse_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/exprd/exprd/internal/sse"
)

func ExampleReader() {
	body := strings.NewReader(": keep-alive\r\n" +
		"event: delta\r\ndata: {\"text\":\"Hel\"}\r\n\r\n" +
		"data: line one\rdata: line two\r\r" +
		"data: [DONE]") // cut: no blank line after it
	r := sse.NewReader(body, 1<<20)
	for {
		ev, err := r.Next()
		var cut *sse.UnterminatedError
		switch {
		case err == io.EOF:
			fmt.Println("end")
			return
		case errors.As(err, &cut):
			fmt.Printf("cut, pending %q\n", cut.Event.Data)
			return
		case err != nil:
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %q\n", ev.Type, ev.Data)
	}
	// Output:
	// delta: "{\"text\":\"Hel\"}"
	// message: "line one\nline two"
	// cut, pending "[DONE]"
}
