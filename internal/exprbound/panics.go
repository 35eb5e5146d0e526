package exprbound

import (
	"errors"
	"reflect"
	"runtime"
	"strings"

	"github.com/expr-lang/expr/file"
)

// expr's VM turns a Go panic inside an operation into an error whose text
// is Go's: `reflect: call of reflect.Value.Len on zero Value` for
// map(null, #), `interface conversion: interface {} is nil, not string` for
// trim(null), `reflect: call of reflect.Value.Type on zero Value` for
// int(null). PanicMessage words them for the model, by their type; the
// error's position and snippet still say where.

// PanicMessage returns the message for err when a Go runtime panic is in
// its chain.
func PanicMessage(err error) (string, bool) {
	var ve *reflect.ValueError
	if errors.As(err, &ve) {
		switch ve.Kind {
		case reflect.Invalid:
			return "a value here is null where the operation needs an array, an object, a string or a number (a key that is not in the state reads as null: use ?? to give a default)", true
		case reflect.Map:
			return "a value here is an object where the operation needs an array (keys, values and toPairs make arrays of an object)", true
		}
		return "a value here has the wrong type for the operation", true
	}
	var te *runtime.TypeAssertionError
	if errors.As(err, &te) {
		return "a value here has the wrong type for the operation (often null, from a key that is not in the state: use ?? to give a default)", true
	}
	var re runtime.Error
	if errors.As(err, &re) {
		return "the operation cannot be done on the values here", true
	}
	// reflect panics with a string, which the VM makes the message:
	// "reflect: slice index out of range" for [][0] of a typed empty
	// array (map(filter([], ...), ...)[0]).
	var fe *file.Error
	if errors.As(err, &fe) && strings.HasPrefix(fe.Message, "reflect: ") {
		if strings.Contains(fe.Message, "index out of range") {
			return "an index here is past the end of the array (len gives its length)", true
		}
		return "a value here has the wrong type for the operation", true
	}
	return "", false
}
