// Package grpctransport is the `grpc` call template of exprd's UTCP adapter:
// a utcp.Transport for go-utcp's UTCPService providers and for any unary or
// server-streaming method of a service that offers server reflection.
// A registry gets it explicitly: utcp.WithTransport(grpctransport.Type,
// grpctransport.New) (utcpall.New does), or a factory NewFactory builds
// with options in its place.
//
// # Template
//
//	{
//	  "call_template_type": "grpc",
//	  "host": "127.0.0.1",                 // default 127.0.0.1; "host:port" is read too
//	  "port": 9339,                        // default 9339; a number or a string of digits
//	  "service_name": "grpcpb.UTCPService",// default; any other name is called through reflection
//	  "method_name": "CallTool",           // required with reflection
//	  "use_ssl": false,                    // default false
//	  "target": "device-1",                // optional, sent as metadata "target"
//	  "auth": {...},                       // optional: basic or api_key, sent as metadata
//	  "tool_name": "add",                  // exprd's: the provider's name for the tool
//	  "timeout": 5000                      // as for every template (utcp)
//	}
//
// These are go-utcp's provider fields. `auth` of type basic is sent on
// every RPC as metadata `authorization: Basic base64(user:pass)`; api_key as
// metadata named by var_name, lower-cased (default x-api-key), or as a
// `cookie` entry with location "cookie"; location "query" and oauth2 are
// refused when the template is built.
//
// # UTCPService (service_name empty or grpcpb.UTCPService)
//
// Call sends CallTool{tool, args_json}; result_json is decoded as JSON, or
// returned as text when it is not JSON (nil when empty). Stream sends
// CallToolStream and yields each response's result_json, decoded the same
// way. With method_name "CallToolStream", Call returns the list of the
// stream's chunks. `tool` is the provider's own name for the tool:
// tool_name when the template has it, else the registered name without its
// `<manual>.` prefix. A template of this kind also discovers
// (utcp.FromTemplate): GetManual's tools are registered with this template
// (CallTool, tool_name set) and inputs {"type": "object"}, GetManual
// carrying no schemas.
//
// # Reflection (any other service_name)
//
// The method's descriptors are fetched through the provider's server
// reflection (grpc.reflection.v1, falling back to v1alpha) on the first
// call, and cached per connection and service for the registry's life,
// dropped when the provider answers Unimplemented (it was redeployed). The
// arguments are mapped onto the input message with protojson: a field the
// message does not have, or a value of the wrong type, is a
// *manual.InvalidArgumentsError naming the message and its fields, and
// nothing is sent. The output is protojson with the .proto's field names,
// unpopulated fields left out, decoded to map[string]any. A unary method is
// Called (Stream yields its one result); a server-streaming method is
// Streamed (Call returns the list of its outputs). Client-streaming and
// bidirectional methods are refused.
//
// # Connections and security
//
// One grpc.ClientConn per provider address and security, kept in the
// registry's Env.Shared and closed with it: never a connection per call.
// use_ssl uses TLS 1.2 or later with the system's roots (WithTLSConfig for
// a private CA or a client certificate); every connection dials through
// the registry's egress policy (utcp.Env.DialContext, with gRPC's
// passthrough resolver so that the policy resolves and judges the host);
// plaintext may reach only the hosts utcp.Env.PlaintextAllowed allows
// (those the operator's egress policy lists), else the call fails with
// utcp.ReasonInsecureURL before anything is sent, its message telling the
// template's author to set use_ssl. Responses are capped at
// the registry's WithMaxResponseBytes per message (and in total for a
// collected stream). The call's context (deadline, cancellation) is the
// RPC's.
//
// # Errors
//
// Failures are *utcp.TransportError. A status the provider answered is
// ReasonStatus with Status the HTTP equivalent of the gRPC code (NotFound
// → 404, PermissionDenied → 403, Internal → 500, …) and Body {"code":
// "NotFound"}; the status's message is free text, never shown (it stays
// behind Unwrap, for logs). No connection is ReasonUnreachable (grpc-go's own message, which names
// addresses, is left out); a stream whose connection breaks is ReasonBroken;
// a stream is never ended cleanly by an error. A response over the cap is
// ReasonTooLarge. The caller's cancellation and deadline come back as the
// context's error, which the registry reports as a cancellation or a
// *utcp.TimeoutError.
package grpctransport
