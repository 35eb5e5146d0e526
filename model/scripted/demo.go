package scripted

import (
	_ "embed"
	"fmt"
)

// demoScript is the model of `exprd --demo`.
//
//go:embed demo.json
var demoScript []byte

// DemoScript returns the demo's script: one looping turn that follows the
// request (Turn.Follow). Asked by CodeMode for a plan, it plans over the
// offered tools from the request's words and numbers; in an agent turn it
// calls the declared tool that best matches the user's message (the
// `expr` tool, selecting the five cheapest products of the demo state,
// when no other matches) and answers with the result; when nothing
// matches it says so.
func DemoScript() Script {
	s, err := ParseScript(demoScript)
	if err != nil {
		panic(fmt.Sprintf("scripted: the embedded demo script is broken: %v", err))
	}
	return s
}

// Demo starts a server that replays [DemoScript].
func Demo() (*Server, error) { return Start(DemoScript()) }
