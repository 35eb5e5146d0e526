// Package evaltest holds the evaluator's test cases as data and what runs
// them: the cases of evaluator/testdata/calls.json ([LoadCases]), a catalogue
// of host functions ([Functions]), a [Host] that records what a call asked
// of its client, and [Check], which compares a run with a case.
//
// The evaluator's own tests run every case directly; the gRPC server's tests
// run the same cases over the wire, converting what they receive into the
// types [Check] takes ([ParseAnswer] helps). Nothing here needs a
// testing.T.
//
// A case is a JSON object:
//
//	{"name": "select the five lowest priced",
//	 "state": "products",
//	 "settings": {"read": true, "functions": ["downloadCsv"], "tool_functions": ["downloadCsv"], "note": "..."},
//	 "budgets": {"max_iterations": 1000},
//	 "confirm": [true, false],
//	 "input": {"steps": [...], "read": "..."},
//	 "want": {"answer": {"value": 5}},
//	 "writes": [{"step": 0, "path": "scopes.root.selected", "value": {...}}],
//	 "client_calls": [{"name": "downloadCsv", "args": {...}}],
//	 "state_after": {...}}
//
// Its fields:
//
//   - state names demo/<name>.json of the repository (found by walking
//     up from the cases file to go.mod), or is an inline JSON object; absent
//     means {}.
//   - settings names functions of the catalogue. tool_functions, when
//     present (even []), replaces the session's functions for tool calls: a
//     name among functions is a reference to it, any other name is the
//     catalogue's function, owned by the tool alone.
//   - budgets uses the field names of proto/exprd/v1/exprtool.proto Budgets;
//     0 or absent means the server's maximum.
//   - confirm replies, in order, to the call's confirm requests; past its
//     end every request is accepted.
//   - input is the tool input as a JSON value; input_raw is raw text instead
//     (for input that is not JSON).
//   - want is {"answer": A}, the exact answer JSON, or {"reason": R,
//     "message_contains": S}, an error answer. A case that expects the time
//     budget to run out says "time budget" in message_contains. Over the
//     wall clock, on a loaded machine, any other case may run out of it
//     too ([OverTime]), and a runner may try it again; a runner that gives
//     each case a clock counting work instead ([StepClock] with
//     evaluator.WithClock or server.WithClock, as exprd's own tests do)
//     need not.
//   - writes, client_calls and state_after are checked when present; an
//     empty writes or client_calls list means none.
package evaltest
