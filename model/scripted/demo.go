package scripted

import (
	_ "embed"
	"fmt"
)

// demoScript is the model of `exprd --demo`.
//
//go:embed demo.json
var demoScript []byte

// DemoScript returns the demo's script. It knows one question, about the
// products: to any user message the model calls the `expr` tool once, to
// select the five cheapest products of the demo state, and once the tool
// result is back it answers. It loops, so it serves any number of
// conversations.
func DemoScript() Script {
	s, err := ParseScript(demoScript)
	if err != nil {
		panic(fmt.Sprintf("scripted: the embedded demo script is broken: %v", err))
	}
	return s
}

// Demo starts a server that replays [DemoScript].
func Demo() (*Server, error) { return Start(DemoScript()) }
