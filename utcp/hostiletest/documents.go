package hostiletest

import (
	"fmt"
	"strings"
)

// SharedRefsDocument is an OpenAPI 3 document of ops operations that all
// post one schema of parts $ref parts: 372 KB at 100 and 3,000, which
// took 42 s of CPU and 2.4 GB to register when each operation converted
// every schema it reaches into its own definitions.
func SharedRefsDocument(ops, parts int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example"}], "paths": {`)
	for i := range ops {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d": {"post": {"operationId": "op%d", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Big"}}}}, "responses": {"200": {"description": "ok"}}}}`, i, i)
	}
	b.WriteString(`}, "components": {"schemas": {"Big": {"type": "object", "properties": {`)
	for i := range parts {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d": {"$ref": "#/components/schemas/S%d"}`, i, i)
	}
	b.WriteString(`}}`)
	for i := range parts {
		fmt.Fprintf(&b, `, "S%d": {"type": "object", "properties": {"v": {"type": "string"}}}`, i)
	}
	b.WriteString(`}}}`)
	return []byte(b.String())
}
