package manual

import (
	"encoding/json"
	"errors"
	"reflect"
)

// DecodeFields decodes a call template (or an object inside one) into v
// with encoding/json, for a transport's factory: a field of the wrong type
// is a *FieldError naming it ("url: must be a string, got number").
// Unknown fields are ignored, as the reference clients ignore them.
func DecodeFields(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fieldDecodeError(err)
	}
	return nil
}

// fieldDecodeError turns encoding/json's complaint about a field into a
// *FieldError naming it.
func fieldDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "of another type"
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Map, reflect.Struct:
			want = "an object"
		case reflect.Slice:
			want = "an array"
		case reflect.Int, reflect.Int64, reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "a boolean"
		case reflect.Pointer:
			if te.Type.Elem().Kind() == reflect.Int {
				want = "a number"
			} else {
				want = "a string"
			}
		}
		return &FieldError{Path: te.Field, Msg: "must be " + want + ", got " + te.Value}
	}
	return &FieldError{Msg: err.Error()}
}
