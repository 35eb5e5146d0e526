// Package utcp is exprd's UTCP adapter: it reads UTCP manuals, keeps the
// tools they offer in a Registry, ranks them for a query, and calls them over
// HTTP, streamable HTTP and SSE (gRPC plugs in through the same seam). It
// reads the manuals and sends the requests the reference UTCP clients do
// (shared/UTCP-NOTES.md), and is stricter where they are weak.
//
// # Manuals
//
// A manual is {utcp_version, manual_version, tools}; each tool is {name,
// description, inputs, outputs, tags, average_response_size,
// tool_call_template}. The older go-utcp form ({version, tools} with
// `tool_provider` or `provider` holding a `provider_type`) is read too. An
// unknown key on a manual or a tool is refused, unknown keys inside a call
// template are ignored, and a manual is refused whole, with an error naming
// the JSON path of what is wrong (`tools[3].tool_call_template.url:
// missing`): nothing is half-registered. Input and output schemas are
// compiled (draft 2020-12 unless `$schema` says otherwise) at registration;
// their $refs may only point inside the schema.
//
// Registry.Register reads a manual from a Source: FromURL (a UTCP manual, or
// an OpenAPI 3 / Swagger 2 document in JSON or YAML, converted as the
// reference clients do — see ConvertOpenAPI), FromFile, FromText (an inline
// manual, the `text` template), FromTemplate (any manual call template whose
// transport discovers) or FromManual. Tools are named `<manual>.<tool>`: the
// manual's name has every non-word character turned into `_`, and the tool's
// name is prefixed unless it already starts with `<manual>.`. Every method
// that takes a manual's name (Replace, Deregister, Remove) or a tool's full
// name (Tool, Call, CallStream; NormalizeToolName) sanitises the manual part
// the same way, so the name a manual was registered under (`my-api`,
// `my-api.get`) works everywhere; what they return shows the sanitised form.
// Register refuses a name already taken (*AlreadyExistsError); Replace reads
// and checks the new manual in full, then swaps it for the old one in one
// step, leaving the old one as it was on any error. A template's
// allowed_communication_protocols (default: its own type) filter the tools;
// when every tool is filtered out registration fails and says so, where the
// SDK silently registers nothing. LoadDir registers a directory of manuals
// at start, all or nothing.
//
// # Calls
//
// Registry.Call and Registry.CallStream take a full tool name, check the
// arguments against the tool's input schema (an *InvalidArgumentsError, and
// nothing is sent), resolve the template's variables, and run it under the
// smallest of the caller's deadline and the template's `timeout` (a number of
// milliseconds or a duration string; default DefaultTimeout, 10 s).
// Cancelling the caller's context cancels the provider's request.
//
// The http template maps arguments in the SDK's order: header_fields become
// headers; the body_field argument (default "body") is the body, encoded for
// content_type (default application/json); {param} in the URL is replaced by
// the URL-encoded argument (a missing one fails before any request); every
// other argument goes to the query string, for every method, in key order,
// arrays as k[]=v, objects as k[sub]=v, booleans as true/false, nulls
// dropped. An argument the template's `parameter_styles` (exprd's own
// field; the reference clients ignore it) gives an OpenAPI style and
// explode is written in that style instead, in the query, the path or a
// header, percent-encoded as RFC 3986 and 6570 say: ConvertOpenAPI gives
// every parameter its document's, so an OpenAPI-derived tool sends an array
// as tags=a&tags=b by default (form, explode), where a native manual's
// template sends tags[]=a&tags[]=b as the reference client does. A call
// sends `Accept: application/json, text/plain, */*` (DefaultAccept, what
// the reference client sends) unless the template or a header field sets
// Accept. A status >= 400 is a *TransportError carrying the status and, of
// the body, and only where the operator opted in (WithProviderMessages) the
// provider's own short message (its JSON `error`, `message` or `detail`
// field, or `error.message`, when that is one line of at most
// MaxProviderMessageChars; see ProviderErrorBody), with host names,
// addresses, URLs and key-like strings removed: the reference clients pass
// the whole body on, but it is upstream raw text (HTML, stack traces,
// internal host names) that must not reach a model or a client. The body,
// bounded, stays behind Unwrap for logs. JSON responses are decoded
// (numbers as float64), others returned as text.
//
// Every connection goes through the egress policy (WithEgress; default:
// public addresses only), checked on the resolved address of each
// connection, redirects and OAuth2 token requests included; plain http://
// may reach only hosts the policy lists. A redirect to another host is not
// followed; bodies are capped (WithMaxResponseBytes, default 8 MiB).
//
// streamable_http yields chunks as they arrive (NDJSON lines decoded as JSON;
// text as strings; other types as []byte); sse yields one chunk per event,
// its data decoded as JSON when it is JSON, filtered by event_type. A stream
// ends with io.EOF only when the provider ended it cleanly; a connection that
// breaks is a *TransportError with ReasonBroken. Calling a streaming tool
// with Call returns the list of its chunks; CallStream on an http tool
// yields its one result. `text` templates register but cannot be called.
//
// Auth: api_key (header, query or cookie; var_name default X-Api-Key),
// basic, and oauth2 client credentials (tokens cached per token URL, client
// and scope, fetched once for concurrent calls, refreshed before they
// expire).
//
// # Variables
//
// ${VAR} and $VAR in any string of a call template (except strings
// containing `$ref`) are replaced by the value under the manual's namespaced
// key, NamespacedKey(manual, VAR) (`demo_shop` + `API_TOKEN` →
// `demo__shop_API_TOKEN`), looked up in the configured variables
// (WithVariables), then the loaders (WithDotEnvFile, WithVariableLoader),
// then the environment. There is no fallback to the bare name; a missing
// variable is a *VariableNotFoundError naming the key and is never sent. The
// discovery template is resolved at registration, tool templates on every
// call.
//
// # Errors
//
// Errors are typed, wrapped with %w, and match one sentinel each:
// ErrNotFound (*NotFoundError, with close names), ErrInvalidArguments,
// ErrTransport (*TransportError: a Reason, the status and the provider's
// short message, never its raw body nor a lower-level error's text, which
// stay behind Unwrap for logs), ErrTimeout (*TimeoutError), ErrInvalidManual
// (*ManualError), ErrAlreadyExists (*AlreadyExistsError) and
// ErrVariableNotFound. A caller's cancellation is returned as
// context.Canceled. Only server/ maps them to gRPC codes.
//
// # Search
//
// Registry.Search ranks the whole registry for a query (BM25F over tool
// name, manual name, tags, description and input property names, with light
// stemming, a few synonyms and everyday phrasings).
//
// # Transports
//
// A Transport (Call, Stream) is built per tool template by the
// TransportFactory registered for its call_template_type, with an Env that
// carries the registry's HTTP client, limits and a Shared pool for long-lived
// connections. A transport that implements Discoverer can also register
// manuals. RegisterTransport adds a type to every new Registry;
// WithTransport to one. A gRPC transport (go-utcp's UTCPService) plugs in
// this way, from a package of its own.
package utcp
