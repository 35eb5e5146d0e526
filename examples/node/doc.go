// Package node holds exprd's Node client (client.mjs, over @grpc/grpc-js
// and the protos in proto/) and the test that runs it against a real
// `exprd --demo`: an ExprTool session (state, patch, writes, a rejected
// message, a confirm, the client-run downloadCsv) and an AgentLoop turn
// with the demo model. The test skips when node or npm is not on PATH.
package node
