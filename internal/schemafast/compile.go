package schemafast

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// location names the document every compile reads; each compile has a
// compiler of its own, so they never clash.
const location = "mem:///schema.json"

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise)
// that fetches nothing: a $ref must stay inside the document. Its errors
// read "not valid JSON: …" or "not a valid JSON Schema: " and
// CompileValue's.
func Compile(doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	s, err := CompileValue(v)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	return s, nil
}

// CompileValue is Compile for a schema already decoded (as encoding/json
// or jsonschema.UnmarshalJSON decode it). Its error says on one line what
// is wrong: "not valid against the metaschema: " and at most
// MaxSchemaProblems of the metaschema's failing keywords, or the
// compiler's complaint without its internal locations.
func CompileValue(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(location, doc); err != nil {
		return nil, errors.New(compileMessage(err))
	}
	s, err := c.Compile(location)
	if err != nil {
		return nil, errors.New(compileMessage(err))
	}
	return s, nil
}

// MaxSchemaProblems bounds the metaschema's complaints a refused schema's
// error lists.
const MaxSchemaProblems = 3

// compileMessage is CompileValue's error.
func compileMessage(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		return "not valid against the metaschema: " + strings.Join(Problems(sve.Err, MaxSchemaProblems), "; ")
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, location, "")
	msg = strings.ReplaceAll(msg, "mem:///", "") // a relative $ref's
	msg = strings.ReplaceAll(msg, "\"#", "\"")
	msg, _, _ = strings.Cut(msg, "\n")
	return msg
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not fetched (%s)", url)
}

// Problems renders a validation error as "at /path: what" parts, one a
// leaf of its tree of causes (the real errors, also under a $ref), at most
// limit of them (0: all). An error of another kind is its text.
func Problems(err error, limit int) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if limit > 0 && len(out) >= limit {
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, "at /"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) == 0 {
		out = append(out, ve.ErrorKind.LocalizedString(printer))
	}
	return out
}

// Message renders a validation error as its Problems joined with "; ":
// the form a model reads best.
func Message(err error) string { return strings.Join(Problems(err, 0), "; ") }

var printer = message.NewPrinter(language.English)
