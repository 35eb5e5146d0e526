package httptransport

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/exprd/exprd/utcp/manual"
)

// Parameter styles say how one argument is written into the query, the
// path or a header: OpenAPI 3's style and explode, serialised as the
// OpenAPI specification and RFC 6570 define them. An http-family template
// names them per argument in `parameter_styles` (package openapi writes
// one for every parameter of the document); an argument without one is
// written as the reference clients write it (axios: `k[]=v`, `k[sub]=v`),
// so a native UTCP manual sends what it always sent.
const (
	StyleForm           = "form"
	StyleSpaceDelimited = "spaceDelimited"
	StylePipeDelimited  = "pipeDelimited"
	StyleDeepObject     = "deepObject"
	StyleTabDelimited   = "tabDelimited" // Swagger 2's tsv, which OpenAPI 3 has no style for
	StyleSimple         = "simple"
	StyleLabel          = "label"
	StyleMatrix         = "matrix"
)

// Place is where an http-family template sends an argument.
type Place int

// The places, each spelt as OpenAPI's `in` spells it (String).
const (
	PlaceQuery Place = iota
	PlacePath
	PlaceHeader
	PlaceBody
)

func (p Place) String() string {
	return [...]string{"query", "path", "header", "body"}[p]
}

// placeStyles are the styles each place takes, its default first.
var placeStyles = [...][]string{
	PlaceQuery:  {StyleForm, StyleSpaceDelimited, StylePipeDelimited, StyleDeepObject, StyleTabDelimited},
	PlacePath:   {StyleSimple, StyleLabel, StyleMatrix},
	PlaceHeader: {StyleSimple},
}

// Styles are the parameter styles an argument sent at p may take, its
// default first (none for the body).
func (p Place) Styles() []string { return slices.Clone(placeStyles[p]) }

// PlaceOf says where an http-family template sends the argument name,
// given its url, header_fields and body_field ("" for none), as a call
// decides it: header_fields, then the body_field, then {name} in the URL,
// else the query.
func PlaceOf(url string, headerFields []string, bodyField, name string) Place {
	s := httpSpec{url: url, headerFields: headerFields, bodyField: bodyField}
	return s.placeOf(name)
}

// paramStyle is one argument's serialisation.
type paramStyle struct {
	style   string
	explode bool
}

// paramStyleJSON is an entry of a template's parameter_styles.
type paramStyleJSON struct {
	Style   string `json:"style"`
	Explode *bool  `json:"explode"`
}

// defaultExplode is OpenAPI's: true for form, false for every other style.
func DefaultExplode(style string) bool { return style == StyleForm }

// placeOf says where buildRequest sends the argument name, in its order:
// header_fields, then the body_field, then {name} in the URL, else the query.
func (s *httpSpec) placeOf(name string) Place {
	switch {
	case slices.Contains(s.headerFields, name):
		return PlaceHeader
	case s.bodyField != "" && name == s.bodyField:
		return PlaceBody
	case strings.Contains(s.url, "{"+name+"}"):
		return PlacePath
	}
	return PlaceQuery
}

// decodeParamStyles checks a template's parameter_styles against where each
// argument is sent: a style the place does not take is a *FieldError.
func (s *httpSpec) decodeParamStyles(raw map[string]json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	s.styles = make(map[string]paramStyle, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		path := manual.JoinPath("parameter_styles", name)
		var e paramStyleJSON
		if err := manual.DecodeFields(raw[name], &e); err != nil {
			return prefixFieldErr(err, path)
		}
		place := s.placeOf(name)
		if place == PlaceBody {
			return &manual.FieldError{Path: path, Msg: "names the body_field argument, which is sent as the body"}
		}
		allowed := placeStyles[place]
		st := paramStyle{style: e.Style}
		if st.style == "" {
			st.style = allowed[0]
		}
		if !slices.Contains(allowed, st.style) {
			return &manual.FieldError{Path: manual.JoinPath(path, "style"), Msg: fmt.Sprintf(
				"%q is not a style of a %s parameter (one of %s)", e.Style, place, strings.Join(allowed, ", "))}
		}
		st.explode = DefaultExplode(st.style)
		if e.Explode != nil {
			st.explode = *e.Explode
		}
		s.styles[name] = st
	}
	return nil
}

// uriEncode percent-encodes all but RFC 3986's unreserved characters, as
// RFC 6570 expands a variable (and as OpenAPI's allowReserved: false
// means). The delimiters a style writes between values (`,` `=` `&` `.`
// `;`) stay literal; those RFC 3986 does not allow in a query (`|`, and the
// brackets of deepObject) are written encoded, as OpenAPI 3.1.1 advises.
func uriEncode(s string) string {
	return percentEncode(s, func(c byte) bool {
		return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
	}, false)
}

// styleValue is one value of a styled argument: a scalar as JavaScript's
// String() writes it, an array or object nested inside the argument as its
// JSON text (the styles do not define nesting).
func styleValue(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		raw, _ := json.Marshal(v)
		return string(raw)
	}
	return jsString(v)
}

// styleParts is an argument's values: an array's non-null elements; an
// object's keys, in order, each followed by its value (null values left
// out); a scalar's single value. isObject tells the last two apart.
func styleParts(v any) (parts []string, isObject bool) {
	switch x := v.(type) {
	case []any:
		parts = make([]string, 0, len(x))
		for _, e := range x {
			if e != nil {
				parts = append(parts, styleValue(e))
			}
		}
		return parts, false
	case map[string]any:
		parts = make([]string, 0, 2*len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if x[k] != nil {
				parts = append(parts, k, styleValue(x[k]))
			}
		}
		return parts, true
	}
	return []string{jsString(v)}, false
}

// queryDelimiter joins the values of a non-exploded array or object.
func queryDelimiter(style string) string {
	switch style {
	case StyleSpaceDelimited:
		return "%20"
	case StylePipeDelimited:
		return "%7C"
	case StyleTabDelimited:
		return "%09"
	}
	return "," // form, and deepObject's arrays, which OpenAPI leaves undefined
}

// addStyled writes name=v to the query in style st: scalars as name=v;
// arrays exploded as name=a&name=b, else name=a,b (or the style's
// delimiter); objects exploded as k=v&k2=v2, else name=k,v,k2,v2;
// deepObject objects as name[k]=v, nested objects as name[k][k2]=v and
// arrays in them as name[k][]=a. Null, and an empty array or object, send
// nothing.
func (q *queryBuilder) addStyled(name string, v any, st paramStyle) {
	n := uriEncode(name)
	switch x := v.(type) {
	case nil:
		return
	case map[string]any:
		if st.style == StyleDeepObject {
			q.addDeep(n, x)
			return
		}
	case []any:
	default:
		q.addEncoded(n, uriEncode(jsString(x)))
		return
	}
	parts, isObject := styleParts(v)
	switch {
	case len(parts) == 0:
	case st.explode && isObject:
		for i := 0; i < len(parts); i += 2 {
			q.addEncoded(uriEncode(parts[i]), uriEncode(parts[i+1]))
		}
	case st.explode:
		for _, p := range parts {
			q.addEncoded(n, uriEncode(p))
		}
	default:
		q.addEncoded(n, joinEncoded(parts, queryDelimiter(st.style)))
	}
}

// addDeep writes a deepObject: key[k]=v, recursing into nested objects.
func (q *queryBuilder) addDeep(key string, obj map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		sub := key + "%5B" + uriEncode(k) + "%5D"
		switch x := obj[k].(type) {
		case nil:
		case map[string]any:
			q.addDeep(sub, x)
		case []any:
			for _, e := range x {
				if e != nil {
					q.addEncoded(sub+"%5B%5D", uriEncode(styleValue(e)))
				}
			}
		default:
			q.addEncoded(sub, uriEncode(styleValue(x)))
		}
	}
}

func (q *queryBuilder) addEncoded(k, v string) {
	if q.b.Len() > 0 {
		q.b.WriteByte('&')
	}
	q.b.WriteString(k)
	q.b.WriteByte('=')
	q.b.WriteString(v)
}

func joinEncoded(parts []string, sep string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(uriEncode(p))
	}
	return b.String()
}

// styledPath expands {name} in style st (RFC 6570's {name}, {.name} and
// {;name}, exploded with a `*`): simple a,b and k,v (exploded k=v,k2=v2);
// label .a,b (exploded .a.b, .k=v.k2=v2); matrix ;name=a,b (exploded
// ;name=a;name=b, ;k=v;k2=v2). Null and an empty array or object expand to
// nothing.
func styledPath(name string, v any, st paramStyle) string {
	if v == nil {
		return ""
	}
	parts, isObject := styleParts(v)
	if len(parts) == 0 {
		return ""
	}
	prefix, sep := "", ","
	switch st.style {
	case StyleLabel:
		prefix = "."
		if st.explode {
			sep = "."
		}
	case StyleMatrix:
		prefix = ";"
		if st.explode {
			sep = ";"
		}
	}
	var b strings.Builder
	b.WriteString(prefix)
	named := st.style == StyleMatrix
	switch {
	case st.explode && isObject:
		for i := 0; i < len(parts); i += 2 {
			if i > 0 {
				b.WriteString(sep)
			}
			writeNamed(&b, uriEncode(parts[i]), uriEncode(parts[i+1]), named)
		}
	case st.explode && named:
		for i, p := range parts {
			if i > 0 {
				b.WriteString(sep)
			}
			writeNamed(&b, uriEncode(name), uriEncode(p), true)
		}
	default:
		if named {
			b.WriteString(uriEncode(name))
			if len(parts) > 1 || parts[0] != "" {
				b.WriteByte('=')
			}
		}
		b.WriteString(joinEncoded(parts, sep))
	}
	return b.String()
}

// writeNamed writes k=v; matrix (named) writes k alone for an empty v, as
// RFC 6570's `;` operator does.
func writeNamed(b *strings.Builder, k, v string, named bool) {
	b.WriteString(k)
	if named && v == "" {
		return
	}
	b.WriteByte('=')
	b.WriteString(v)
}

// styledHeader writes a header value in the simple style: a,b for arrays,
// k,v,k2,v2 for objects (exploded k=v,k2=v2). Header values are not
// percent-encoded.
func styledHeader(v any, st paramStyle) string {
	parts, isObject := styleParts(v)
	if !isObject || !st.explode {
		return strings.Join(parts, ",")
	}
	pairs := make([]string, 0, len(parts)/2)
	for i := 0; i < len(parts); i += 2 {
		pairs = append(pairs, parts[i]+"="+parts[i+1])
	}
	return strings.Join(pairs, ",")
}
