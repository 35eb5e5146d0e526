package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Case 14: hostile OpenAPI documents, served on loopback and registered
// over ToolRegistry.RegisterManual by a caller with registry.write.
//
//   - wide: 100 operations whose request and response bodies are one
//     schema of 3,000 properties, each a $ref to a schema of its own
//     (~372 KB);
//   - deep: 100 operations over a chain of 3,000 schemas, each the allOf
//     of a $ref to the next and a $ref to a shared leaf (~544 KB).
const (
	openAPIOps   = 100
	openAPIParts = 3000
	wideBytes    = 372_000
	deepBytes    = 544_000
)

type openAPIServer struct {
	srv        *http.Server
	url        string
	wide, deep []byte
}

func startOpenAPIServer() (*openAPIServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &openAPIServer{url: "http://" + lis.Addr().String()}
	s.wide = openAPIDoc(s.url, wideSchemas, wideBytes)
	s.deep = openAPIDoc(s.url, deepSchemas, deepBytes)
	mux := http.NewServeMux()
	for path, body := range map[string][]byte{"/wide.json": s.wide, "/deep.json": s.deep} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		})
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

func (s *openAPIServer) Close() error { return s.srv.Close() }

// wideSchemas: Big has openAPIParts properties, each a $ref to a part
// with a description of pad bytes.
func wideSchemas(pad int) (map[string]any, string) {
	props := map[string]any{}
	schemas := map[string]any{}
	for i := range openAPIParts {
		name := fmt.Sprintf("Part%04d", i)
		props[fmt.Sprintf("p%04d", i)] = map[string]any{"$ref": "#/components/schemas/" + name}
		part := map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "string"}}}
		if pad > 0 {
			part["description"] = strings.Repeat("w", pad)
		}
		schemas[name] = part
	}
	schemas["Big"] = map[string]any{"type": "object", "properties": props}
	return schemas, "Big"
}

// deepSchemas: Link0000 is allOf [$ref Link0001, $ref Leaf], and so on
// to the last, which is the leaf's $ref alone.
func deepSchemas(pad int) (map[string]any, string) {
	schemas := map[string]any{"Leaf": map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "string"}}}}
	for i := range openAPIParts {
		link := map[string]any{}
		if pad > 0 {
			link["description"] = strings.Repeat("d", pad)
		}
		if i == openAPIParts-1 {
			link["allOf"] = []any{map[string]any{"$ref": "#/components/schemas/Leaf"}}
		} else {
			link["allOf"] = []any{map[string]any{"$ref": fmt.Sprintf("#/components/schemas/Link%04d", i+1)}, map[string]any{"$ref": "#/components/schemas/Leaf"}}
		}
		schemas[fmt.Sprintf("Link%04d", i)] = link
	}
	return schemas, "Link0000"
}

// openAPIDoc is a document of openAPIOps operations on schemas, padded to
// about size bytes.
func openAPIDoc(server string, schemas func(pad int) (map[string]any, string), size int) []byte {
	build := func(pad int) []byte {
		comps, root := schemas(pad)
		ref := map[string]any{"$ref": "#/components/schemas/" + root}
		body := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref}}}
		paths := map[string]any{}
		for i := range openAPIOps {
			paths[fmt.Sprintf("/op%03d", i)] = map[string]any{"post": map[string]any{
				"operationId": fmt.Sprintf("op%03d", i), "summary": "An operation.", "requestBody": body,
				"responses": map[string]any{"200": map[string]any{"description": "ok", "content": body["content"]}},
			}}
		}
		b, _ := json.Marshal(map[string]any{
			"openapi": "3.0.3", "info": map[string]any{"title": "hostile", "version": "1"},
			"servers": []any{map[string]any{"url": server}}, "paths": paths,
			"components": map[string]any{"schemas": comps},
		})
		return b
	}
	bare := build(0)
	if len(bare) >= size {
		return bare
	}
	// A description adds its pad and 17 bytes of key and quotes.
	return build(max((size-len(bare))/openAPIParts-17, 1))
}

// registrations is n admin clients registering the document at path under
// a name of their own (replace: true) in a loop; each answer must be
// typed. The names are deregistered at the end.
func registrations(ctx context.Context, e *env, t *tally, doc string, n int) error {
	conns, err := dialPool(e.addr, caseSource(14), 1, withToken(e.tokens.admin))
	if err != nil {
		return err
	}
	defer conns.Close()
	cl := exprdv1.NewToolRegistryClient(conns.get(0))
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("hostile_%s_%d", doc, i)
		wg.Go(func() {
			for first := true; first || ctx.Err() == nil; first = false {
				cctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
				t0 := time.Now()
				resp, err := cl.RegisterManual(cctx, &exprdv1.RegisterManualRequest{
					Name: name, Source: &exprdv1.RegisterManualRequest_Url{Url: e.openAPI.url + "/" + doc + ".json"}, Replace: true,
				})
				cancel()
				if err != nil {
					t.rpcError(err, func(c codes.Code) bool { return c != codes.OK }, false, time.Since(t0))
					pauseIfRefused(err)
					continue
				}
				t.answer(fmt.Sprintf("%s: registered, %d tools", doc, len(resp.GetTools())), "", true, time.Since(t0))
			}
			cctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
			defer cancel()
			_, _ = cl.DeregisterManual(cctx, &exprdv1.DeregisterManualRequest{Name: name})
		})
	}
	wg.Wait()
	return nil
}

// openAPIWide is 14a.
func openAPIWide(ctx context.Context, e *env, t *tally) (string, error) {
	err := registrations(ctx, e, t, "wide", e.cfg.openAPIClients)
	return fmt.Sprintf("%d admin clients registering, in a loop, a %.0f KB OpenAPI document from loopback: %d operations whose bodies are one schema of %d properties, each a $ref to a schema of its own",
		e.cfg.openAPIClients, float64(len(e.openAPI.wide))/1000, openAPIOps, openAPIParts), err
}

// openAPIDeep is 14b.
func openAPIDeep(ctx context.Context, e *env, t *tally) (string, error) {
	err := registrations(ctx, e, t, "deep", e.cfg.openAPIClients)
	return fmt.Sprintf("%d admin clients registering, in a loop, a %.0f KB OpenAPI document from loopback: %d operations over a chain of %d schemas, each the allOf of a $ref to the next and one to a shared leaf",
		e.cfg.openAPIClients, float64(len(e.openAPI.deep))/1000, openAPIOps, openAPIParts), err
}
