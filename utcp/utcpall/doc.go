// Package utcpall builds a utcp.Registry with every part exprd ships: the
// http, streamable_http and sse transports (httptransport), the grpc
// transport (grpctransport), the mcp transport (mcptransport), OpenAPI
// conversion (openapi) and search
// (search). The server and the tests of packages above utcp make their
// registries here; utcp itself stays free of its transports.
package utcpall
