package schemafast

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var seq atomic.Uint64

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise)
// that fetches nothing: a $ref must stay inside the document. Its errors
// read "not valid JSON: …" or "not a valid JSON Schema: …".
func Compile(doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	url := fmt.Sprintf("mem:///%d.json", seq.Add(1))
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	return s, nil
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not fetched (%s)", url)
}

// Message renders a validation error as "at /path: what" parts joined with
// "; ", from the leaves of its tree of causes (the real errors, also under
// a $ref): the form a model reads best.
func Message(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		parts = append(parts, "at /"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

var printer = message.NewPrinter(language.English)
