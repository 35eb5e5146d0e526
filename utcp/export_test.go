package utcp

import "encoding/json"

// DecodeHTTPTemplate checks an http template as its transport reads it,
// for the black-box tests.
func DecodeHTTPTemplate(raw json.RawMessage) error {
	_, err := decodeHTTPSpec(raw, httpMethods, DefaultContentType)
	return err
}
