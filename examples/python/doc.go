// Package python holds exprd's Python client (client.py, over grpcio with
// stubs generate.py makes from proto/ at run time) and the test that runs
// it against a real `exprd --demo`: an ExprTool session (state, patch,
// writes, a rejected message, a confirm, the client-run downloadCsv) and an
// AgentLoop turn with the demo model whose expr tool runs in the client.
// The test installs Debian's python3-grpcio, python3-protobuf,
// protobuf-compiler, protobuf-compiler-grpc and libprotobuf-dev with
// install-deps.sh when they are missing;
// when that fails it skips, or fails when CI is set.
package python
