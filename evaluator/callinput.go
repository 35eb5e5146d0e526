package evaluator

import "github.com/exprd/exprd/evaluator/jsonvalue"

// callInput is a call's input, decoded.
type callInput struct {
	steps   []stepInput
	read    string
	hasRead bool
}

type stepInput struct {
	set, expr, confirm string
	hasSet             bool
}

// decodeCallFast decodes a call input of the usual shape straight into a
// callInput: an object of "steps" (objects of string fields) and "read",
// each key once, valid as validInput says. Anything else, it returns false
// and the caller takes the general path (decode, schema, explanation),
// which a fuzz test holds it to.
func decodeCallFast(input []byte, read bool, maxSteps int) (callInput, bool) {
	var in callInput
	l := jsonvalue.NewLexer(input)
	if !l.Delim('{') {
		return in, false
	}
	hasSteps := false
	for first := true; !l.Delim('}'); first = false {
		if !first && !l.Delim(',') {
			return in, false
		}
		key, ok := l.String()
		if !ok || !l.Delim(':') {
			return in, false
		}
		switch {
		case key == "steps" && !hasSteps:
			hasSteps = true
			if in.steps, ok = decodeStepsFast(l, maxSteps); !ok {
				return in, false
			}
		case key == "read" && !in.hasRead && read:
			in.hasRead = true
			if in.read, ok = l.String(); !ok || in.read == "" {
				return in, false
			}
		default:
			return in, false
		}
	}
	return in, l.End() && (hasSteps || in.hasRead)
}

func decodeStepsFast(l *jsonvalue.Lexer, maxSteps int) ([]stepInput, bool) {
	if !l.Delim('[') {
		return nil, false
	}
	steps := []stepInput{}
	for first := true; !l.Delim(']'); first = false {
		if (!first && !l.Delim(',')) || len(steps) == maxSteps || !l.Delim('{') {
			return nil, false
		}
		var s stepInput
		var hasExpr, hasConfirm bool
		for firstKey := true; !l.Delim('}'); firstKey = false {
			if !firstKey && !l.Delim(',') {
				return nil, false
			}
			key, ok := l.String()
			if !ok || !l.Delim(':') {
				return nil, false
			}
			val, ok := l.String()
			if !ok {
				return nil, false
			}
			switch {
			case key == "set" && !s.hasSet:
				s.set, s.hasSet = val, true
			case key == "expr" && !hasExpr && val != "":
				s.expr, hasExpr = val, true
			case key == "confirm" && !hasConfirm && val != "":
				s.confirm, hasConfirm = val, true
			default:
				return nil, false
			}
		}
		if !hasExpr {
			return nil, false
		}
		steps = append(steps, s)
	}
	return steps, true
}

// callInputOf extracts the callInput of a decoded input that validInput
// accepted.
func callInputOf(obj map[string]any) callInput {
	var in callInput
	raw, ok := obj["steps"].([]any)
	if ok {
		in.steps = make([]stepInput, len(raw))
	}
	for i, r := range raw {
		sm := r.(map[string]any)
		s := &in.steps[i]
		s.set, s.hasSet = sm["set"].(string)
		s.expr, _ = sm["expr"].(string)
		s.confirm, _ = sm["confirm"].(string)
	}
	in.read, in.hasRead = obj["read"].(string)
	return in
}
