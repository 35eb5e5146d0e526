// Package httptransport is the HTTP family of exprd's UTCP call templates:
// `http`, `streamable_http` and `sse`, as utcp.Transports. Transports
// returns their factories, for utcp.WithTransports (utcpall.New gives
// them to every registry it makes). Every request goes through the
// registry's HTTP client (utcp.Env), so the registry's egress policy,
// redirect rule and response caps hold.
//
// # Requests
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
// header, percent-encoded as RFC 3986 and 6570 say (PlaceOf says where an
// argument goes, Place.Styles which styles it may take): package openapi
// gives every parameter its document's, so an OpenAPI-derived tool sends
// an array as tags=a&tags=b by default (form, explode), where a native
// manual's template sends tags[]=a&tags[]=b as the reference client does.
// A call sends `Accept: application/json, text/plain, */*` (DefaultAccept,
// what the reference client sends) unless the template or a header field
// sets Accept. JSON responses are decoded (numbers as float64), others
// returned as text. An http template discovers: registering it fetches its
// URL (utcp.Discoverer), and the tools converted from what it fetched send
// its headers and use its auth_tools.
//
// # Streams
//
// streamable_http yields chunks as they arrive (NDJSON lines decoded as
// JSON; application/json whole; text as strings; other types as []byte, in
// reads of chunk_size, default DefaultChunkSize); sse yields one chunk per
// event, its data decoded as JSON when it is JSON, filtered by event_type.
// Call collects a stream's chunks into a list, bounded by the response cap;
// CallStream on an http tool yields its one result.
//
// # Auth
//
// api_key (header, query or cookie), basic, and oauth2 client credentials:
// tokens are fetched with the credentials in the form body and, if the
// endpoint refuses them, as HTTP Basic; they are cached per manual, token
// URL, client, scope and secret in the registry's utcp.Env.Shared (one
// cache for the transports of one Transports call), fetched once for
// concurrent calls, and refreshed TokenRefreshMargin before they expire (or
// at half their life). WithClock sets the cache's clock.
package httptransport
