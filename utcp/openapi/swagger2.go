package openapi

import (
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

// toV3 turns a Swagger 2 document into OpenAPI 3 part by part, as
// kin-openapi's openapi2conv.ToV3 does (its code, MIT), without the
// reference resolution ToV3 ends with: that walks a referenced schema anew
// at every reference to it, so that a hundred operations posting one body
// of 3,000 parts cost a hundred walks of it. Nothing here follows a
// reference: the conversion reads the converted document's references
// itself, each definition once (schemaScope).
func toV3(doc2 *openapi2.T) (*openapi3.T, error) {
	doc3 := &openapi3.T{
		OpenAPI:      "3.0.3",
		Info:         &doc2.Info,
		Components:   &openapi3.Components{},
		Tags:         doc2.Tags,
		Extensions:   extensionsOnly(doc2.Extensions),
		ExternalDocs: doc2.ExternalDocs,
	}
	if host := doc2.Host; host != "" {
		if strings.Contains(host, "/") {
			return nil, fmt.Errorf("invalid host %q. This MUST be the host only and does not include the scheme nor sub-paths", host)
		}
		schemes := doc2.Schemes
		if len(schemes) == 0 {
			schemes = []string{"https"}
		}
		basePath := doc2.BasePath
		if basePath == "" {
			basePath = "/"
		}
		for _, scheme := range schemes {
			u := url.URL{Scheme: scheme, Host: host, Path: basePath}
			doc3.AddServer(&openapi3.Server{URL: u.String()})
		}
	} else if basePath := doc2.BasePath; basePath != "" {
		doc3.AddServer(&openapi3.Server{URL: (&url.URL{Path: basePath}).String()})
	}

	doc3.Components.Schemas = make(map[string]*openapi3.SchemaRef)
	if parameters := doc2.Parameters; len(parameters) != 0 {
		doc3.Components.Parameters = make(map[string]*openapi3.ParameterRef)
		doc3.Components.RequestBodies = make(map[string]*openapi3.RequestBodyRef)
		for k, parameter := range parameters {
			v3Parameter, v3RequestBody, v3SchemaMap, err := openapi2conv.ToV3Parameter(doc3.Components, parameter, doc2.Consumes)
			switch {
			case err != nil:
				return nil, err
			case v3RequestBody != nil:
				doc3.Components.RequestBodies[k] = v3RequestBody
			case v3SchemaMap != nil:
				for _, v3Schema := range v3SchemaMap {
					doc3.Components.Schemas[k] = v3Schema
				}
			default:
				doc3.Components.Parameters[k] = v3Parameter
			}
		}
	}
	if paths := doc2.Paths; len(paths) != 0 {
		doc3.Paths = openapi3.NewPathsWithCapacity(len(paths))
		for path, pathItem := range paths {
			r, err := openapi2conv.ToV3PathItem(doc2, doc3.Components, pathItem, doc2.Consumes)
			if err != nil {
				return nil, err
			}
			doc3.Paths.Set(path, r)
		}
	}
	if responses := doc2.Responses; len(responses) != 0 {
		doc3.Components.Responses = make(openapi3.ResponseBodies, len(responses))
		for k, response := range responses {
			r, err := openapi2conv.ToV3Response(response, doc2.Produces)
			if err != nil {
				return nil, err
			}
			doc3.Components.Responses[k] = r
		}
	}
	maps.Copy(doc3.Components.Schemas, openapi2conv.ToV3Schemas(doc2.Definitions))
	if m := doc2.SecurityDefinitions; len(m) != 0 {
		schemes := make(map[string]*openapi3.SecuritySchemeRef, len(m))
		for k, v := range m {
			r, err := openapi2conv.ToV3SecurityScheme(v)
			if err != nil {
				return nil, err
			}
			schemes[k] = r
		}
		doc3.Components.SecuritySchemes = schemes
	}
	doc3.Security = openapi2conv.ToV3SecurityRequirements(doc2.Security)
	return doc3, nil
}

// extensionsOnly keeps the x- keys of a document's extensions.
func extensionsOnly(ext map[string]any) map[string]any {
	for k := range ext {
		if !strings.HasPrefix(k, "x-") {
			delete(ext, k)
		}
	}
	return ext
}
