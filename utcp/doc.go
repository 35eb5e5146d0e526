// Package utcp is exprd's UTCP adapter: it reads UTCP manuals, keeps the
// tools they offer in a Registry, and calls them through the transport of
// each tool's call template. It reads the manuals and sends the requests
// the reference UTCP clients do, and is stricter where they are weak
// (docs/utcp-compat.md lists both).
//
// The package is the core: the registry, its variables, errors and egress
// policy. What it registers is package manual's: a Manual of Tools, their
// CallTemplates and schemas, read and checked there. What varies is given
// to New as options, from packages of their own that import this one:
//
//   - transports (WithTransport): httptransport (http, streamable_http,
//     sse), grpctransport (grpc) and mcptransport (mcp); only `text` is
//     built in;
//   - a Converter for documents that are not manuals (WithConverter):
//     openapi, for OpenAPI 3 and Swagger 2;
//   - a search Index (WithIndex): search;
//   - observers of every call (WithCallObserver): metrics, spans.
//
// utcpall.New gives a registry all of them; cmd/exprd and the tests above
// utcp use it.
//
// # Manuals
//
// Package manual reads a manual ({utcp_version, manual_version, tools},
// or the older go-utcp form) strictly: a manual is refused whole, with a
// *manual.Error naming the JSON path of what is wrong
// (`tools[3].tool_call_template.url: missing`), so nothing is
// half-registered. Input and output schemas are compiled as it reads them;
// their $refs may only point inside the schema.
//
// Registry.Register reads a manual from a Source: FromURL (a UTCP manual, or
// a document the registry's Converter reads, such as OpenAPI, in JSON or
// YAML), FromFile, FromText (an inline manual, the `text` template),
// FromTemplate (any manual call template whose transport discovers) or
// FromManual. A converted document is read tolerantly
// (manual.ReadConverted): an operation it cannot read is skipped, and so
// is one that needs a variable the operator has not bound. Tools are named `<manual>.<tool>`: the
// manual's name has every non-word character turned into `_`, and the
// tool's name is prefixed unless it already starts with `<manual>.`. Every
// method that takes a manual's name (Replace, Deregister, Remove) or a
// tool's full name (Tool, Call, CallStream; NormalizeToolName) sanitises the
// manual part the same way, so the name a manual was registered under
// (`my-api`, `my-api.get`) works everywhere; what they return shows the
// sanitised form. Register refuses a name already taken
// (*AlreadyExistsError); Replace reads and checks the new manual in full,
// then swaps it for the old one in one step, leaving the old one as it was
// on any error. A template's allowed_communication_protocols (default: its
// own type) filter the tools; when every tool is filtered out registration
// fails and says so, where the SDK silently registers nothing. LoadDir
// registers a directory of manuals at start, all or nothing.
//
// # Calls
//
// Registry.Call and Registry.CallStream take a full tool name, check the
// arguments against the tool's input schema (an
// *manual.InvalidArgumentsError, and nothing is sent), resolve the
// template's variables, and run it under the smallest of the caller's
// deadline and the template's `timeout` (a number of milliseconds or a
// duration string; default DefaultTimeout, 10 s). Cancelling the caller's
// context cancels the provider's request. What a call reads of its answer is
// reserved from the memory budget (WithMemoryBudget) as it reads (ReadBody).
// Every call of a registered tool is shown to the call observers
// (CallObserver): they may time it and run it under a span.
//
// Every connection goes through the egress policy (WithEgress; default:
// public addresses only), checked on the resolved address of each
// connection, redirects and OAuth2 token requests included; plain http://
// may reach only hosts the policy lists. A redirect to another host is not
// followed; bodies are capped (WithMaxResponseBytes, default 8 MiB). A
// transport reaches providers only through its Env: the registry's HTTP
// client, DialContext, CheckURL and CheckHostField.
//
// A status >= 400 is a *TransportError carrying the status and, only where
// the operator opted in (WithProviderMessages), its reason phrase and the
// error type and code of the provider's JSON body, each kept only when it
// is a short identifier-like token that gives away no bound value
// (Env.ProviderFields): an allowlist, since the free text of an answer
// (its message, HTML, stack traces, internal host names, an echoed key)
// must not reach a model or a client, and no list of patterns finds all
// of that in prose. The body, bounded, stays behind Unwrap for logs
// (Env.ProviderError makes every transport's status errors).
//
// A stream ends with io.EOF only when the provider ended it cleanly; a
// connection that breaks is a *TransportError with ReasonBroken. Calling a
// streaming tool with Call returns the list of its chunks; CallStream on a
// tool whose transport does not stream yields its one result. `text`
// templates register but cannot be called.
//
// Auth (a template's `auth`, Auth): api_key (header, query or cookie;
// var_name default X-Api-Key), basic, and oauth2 client credentials; each
// transport sends the kinds its protocol has.
//
// # Variables
//
// ${VAR} and $VAR in any string of a call template (except strings
// containing `$ref`) are replaced by the value under the manual's namespaced
// key, vars.NamespacedKey(manual, VAR) (`demo_shop` + `API_TOKEN` →
// `demo__shop_API_TOKEN`), looked up in the configured variables
// (WithVariables), then the loaders (WithDotEnvFile, WithSecretDir,
// WithEnv, WithVariableLoader). There is no fallback to the bare name nor to
// the process's environment; a missing variable is a *vars.NotFoundError
// naming the key and is never sent. The discovery template is resolved at
// registration, tool templates on every call. Package vars reads the
// sources and resolves; the values bound to a manual are its vars.Secrets,
// which its provider's messages never show.
//
// # Errors
//
// Errors are typed, wrapped with %w, and match one sentinel each:
// ErrNotFound (*NotFoundError, with close names), manual.ErrInvalidArguments
// (*manual.InvalidArgumentsError, *QueryError), ErrTransport
// (*TransportError: a Reason, the status and the provider's short message,
// never its raw body nor a lower-level error's text, which stay behind
// Unwrap for logs), ErrTimeout (*TimeoutError), manual.ErrInvalid
// (*manual.Error), ErrAlreadyExists (*AlreadyExistsError), ErrLimit
// (*LimitError) and vars.ErrNotFound. A caller's cancellation is returned as
// context.Canceled. Only server/ maps them to gRPC codes.
//
// # Search
//
// Registry.Search ranks the whole registry for a query with the registry's
// Index, which every registration and removal derives anew (Index.With)
// and searches read without locks. A query is bounded by MaxQueryBytes and
// MaxQueryTerms (*QueryError).
//
// # Transports
//
// A Transport (Call, Stream) is built per tool template by the
// TransportFactory given for its call_template_type (WithTransport), with an
// Env that carries the registry's HTTP client, limits and a Shared pool for
// long-lived connections and caches. A factory refuses a template field with
// a *manual.FieldError (manual.DecodeFields names a mistyped one); its
// transport fails with *TransportError (DoError for a failed HTTP request,
// ReadBody for a body). A transport that implements Discoverer can also
// register manuals; one whose discovered tools call back through the
// registered template reads it as written from DiscoveryTemplate (mcp). One
// that implements DriftReporter tells whether its provider now lists another
// definition of a tool than the registered one (Registry.Drift). What is
// registered under WithOperator (LoadDir) is the operator's (Env.Operator):
// only there may a template start a process (an mcp stdio server). A
// provider that asks the user for input while a call runs (an MCP server's
// elicitation) is relayed through the userinput.Asker the call's context
// carries.
package utcp
