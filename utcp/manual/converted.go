package manual

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/exprd/exprd/internal/turns"
)

// SkippedTool is a tool (or operation) left out of a registration, or
// registered without a part of it (Registered), and why.
type SkippedTool struct {
	Name   string
	Reason string
	// Registered says the tool was registered, without what Reason names
	// (an output schema that was not valid).
	Registered bool
}

// ReadConverted reads doc, the manual a utcp.Converter made of a document
// (decoded JSON: utcp_version, manual_version and tools, numbers as
// json.Number) tolerantly: a document written by someone else costs only the
// operations it gets wrong. An output schema that is not valid is dropped
// from its tool; a tool that still cannot be read (its inputs, its template)
// is skipped; both are reported. It is an error only when no tool is left of
// some. name is the manual's, for errors. The manual's tools that need a
// variable the operator has not bound are skipped at registration, not
// refused. It stops with ctx's error when ctx ends.
func ReadConverted(ctx context.Context, doc map[string]any, name string) (*Manual, []SkippedTool, error) {
	m := &Manual{UTCPVersion: DefaultUTCPVersion, ManualVersion: DefaultManualVersion, converted: true}
	if v, ok := doc["manual_version"].(string); ok && v != "" {
		m.ManualVersion = v
	}
	var skipped []SkippedTool
	ops, _ := doc["tools"].([]any)
	seen := map[string]bool{}
	nodes := 0 // the subschemas of the tools read so far
	for i, op := range ops {
		if err := turns.Yield(ctx); err != nil {
			return nil, nil, err
		}
		path := fmt.Sprintf("tools[%d]", i)
		obj, _ := op.(map[string]any)
		id, _ := obj["name"].(string)
		for _, k := range []string{"inputs", "outputs"} {
			n, _ := schemaNodes(obj[k]) // one over MaxSchemaNodes is refused by its tool
			if nodes += n; nodes > MaxConvertedSchemaNodes {
				return nil, nil, &Error{Manual: name, Msg: fmt.Sprintf(
					"the document's operations hold more than %d subschemas between them (manual.MaxConvertedSchemaNodes); %s and those after it were not read", MaxConvertedSchemaNodes, id)}
			}
		}
		t, err := toolFromValue(obj, path)
		var me *Error
		if err != nil && errors.As(err, &me) && me.Path == path+".outputs" {
			delete(obj, "outputs")
			if t, err = toolFromValue(obj, path); err == nil {
				skipped = append(skipped, SkippedTool{Name: id, Registered: true, Reason: "output schema dropped: " + me.Msg})
			}
		}
		switch {
		case err != nil:
			reason := err.Error()
			if errors.As(err, &me) {
				reason = strings.TrimPrefix(strings.TrimPrefix(me.Path, path), ".") + ": " + me.Msg
			}
			skipped = append(skipped, SkippedTool{Name: id, Reason: reason})
		case seen[t.Name]:
			skipped = append(skipped, SkippedTool{Name: id, Reason: "another operation has this operationId"})
		default:
			seen[t.Name] = true
			m.Tools = append(m.Tools, t)
		}
	}
	if len(m.Tools) == 0 && len(skipped) > 0 {
		return nil, nil, &Error{Manual: name, Msg: fmt.Sprintf("none of the document's %d operations could be converted; %s: %s",
			len(skipped), skipped[0].Name, skipped[0].Reason)}
	}
	return m, skipped, nil
}
