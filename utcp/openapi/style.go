package openapi

import (
	"slices"

	"github.com/exprd/exprd/utcp/httptransport"
)

// How a converted tool carries the document's serialisation of its
// parameters: the template's parameter_styles gives every query, path and
// header parameter its OpenAPI style and explode, which the http transport
// follows (httptransport's parameter styles). Without them the transport would write arrays
// as the reference clients do (`tags[]=a`), where the document's default
// (form, explode) means `tags=a&tags=b`.

// collectionFormatKey carries a Swagger 2 array parameter's collectionFormat
// through kin-openapi's conversion, which keeps x- extensions but drops
// collectionFormat when it is csv by default, and tsv always.
const collectionFormatKey = "x-exprd-collection-format"

// markCollectionFormats writes each Swagger 2 array parameter's
// collectionFormat (default csv) under collectionFormatKey, and removes the
// key from every other parameter, so that only this code sets it. It
// reports whether it changed anything.
func markCollectionFormats(root map[string]any) (changed bool) {
	if params, ok := root["parameters"].(map[string]any); ok {
		for _, p := range params {
			changed = markCollectionFormat(p) || changed
		}
	}
	paths, _ := root["paths"].(map[string]any)
	for _, item := range paths {
		im, _ := item.(map[string]any)
		for k, v := range im {
			list := v // the path item's own parameters
			if k != "parameters" {
				op, _ := v.(map[string]any)
				list = op["parameters"]
			}
			arr, _ := list.([]any)
			for _, p := range arr {
				changed = markCollectionFormat(p) || changed
			}
		}
	}
	return changed
}

func markCollectionFormat(p any) (changed bool) {
	pm, _ := p.(map[string]any)
	if pm == nil {
		return false
	}
	if _, had := pm[collectionFormatKey]; had {
		delete(pm, collectionFormatKey)
		changed = true
	}
	in, _ := pm["in"].(string)
	if pm["type"] != "array" || in != "query" && in != "path" && in != "header" {
		return changed
	}
	cf, _ := pm["collectionFormat"].(string)
	if cf == "" {
		cf = "csv"
	}
	pm[collectionFormatKey] = cf
	return true
}

// paramStyle is one argument's serialisation.
type paramStyle struct {
	style   string
	explode bool
}

// openAPIParam is one parameter of an operation (not a cookie), as the
// document gives it.
type openAPIParam struct {
	name, in string
	def      map[string]any
}

// parameterStyles is the template's parameter_styles: for every parameter
// sent in the query, the path or a header, its style and explode. Where
// the transport sends an argument is decided as buildRequest decides it
// (header_fields, the body, {name} in url, else the query), and the
// parameter of that location gives the style; a style the location does
// not take is replaced by the location's default.
func (c *converter) parameterStyles(params []openAPIParam, headerFields []any, bodyField, url string) map[string]any {
	var hf []string
	for _, h := range headerFields {
		hf = append(hf, h.(string))
	}
	placeOf := func(name string) httptransport.Place { return httptransport.PlaceOf(url, hf, bodyField, name) }
	out := map[string]any{}
	for _, p := range params {
		place := placeOf(p.name)
		if _, done := out[p.name]; done || place == httptransport.PlaceBody || p.in != place.String() {
			continue
		}
		st := c.paramStyle(p.def, place)
		out[p.name] = map[string]any{"style": st.style, "explode": st.explode}
	}
	// A parameter sent elsewhere than its document says (a query
	// parameter named like a path one) takes that place's default.
	for _, p := range params {
		place := placeOf(p.name)
		if _, done := out[p.name]; done || place == httptransport.PlaceBody {
			continue
		}
		st := place.Styles()[0]
		out[p.name] = map[string]any{"style": st, "explode": httptransport.DefaultExplode(st)}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// paramStyle reads a parameter's style and explode: OpenAPI 3's, or the
// collectionFormat of a Swagger 2 array (csv → form, ssv → spaceDelimited,
// tsv → tabDelimited, pipes → pipeDelimited, multi → form exploded; in a
// path or a header, simple).
func (c *converter) paramStyle(def map[string]any, place httptransport.Place) paramStyle {
	allowed := place.Styles()
	if c.swagger2 {
		cf, _ := def[collectionFormatKey].(string)
		if place != httptransport.PlaceQuery || cf == "" {
			return paramStyle{style: allowed[0], explode: httptransport.DefaultExplode(allowed[0])}
		}
		switch cf {
		case "ssv":
			return paramStyle{style: httptransport.StyleSpaceDelimited}
		case "tsv":
			return paramStyle{style: httptransport.StyleTabDelimited}
		case "pipes":
			return paramStyle{style: httptransport.StylePipeDelimited}
		case "multi":
			return paramStyle{style: httptransport.StyleForm, explode: true}
		}
		return paramStyle{style: httptransport.StyleForm} // csv
	}
	style, _ := def["style"].(string)
	if style == "" {
		style = allowed[0]
	}
	if style == httptransport.StyleTabDelimited || !slices.Contains(allowed, style) {
		// Not a style of this location: its explode means nothing either.
		return paramStyle{style: allowed[0], explode: httptransport.DefaultExplode(allowed[0])}
	}
	st := paramStyle{style: style, explode: httptransport.DefaultExplode(style)}
	if e, ok := def["explode"].(bool); ok {
		st.explode = e
	}
	return st
}
