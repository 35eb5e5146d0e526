package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// builtinClientFunctions are the client-run functions exprctl declares with
// their schemas and runs itself in `expr`.
var builtinClientFunctions = map[string]*exprdv1.Function{
	"downloadCsv": {
		Name:             "downloadCsv",
		Description:      "Downloads rows as a CSV file for the user. The columns are the sorted union of the rows' keys.",
		InputSchemaJson:  `{"type":"object","required":["rows"],"additionalProperties":false,"properties":{"rows":{"type":"array","items":{"type":"object"}}}}`,
		OutputSchemaJson: `{"type":"object","required":["rows"],"properties":{"rows":{"type":"integer","description":"The rows written."}}}`,
		Runner:           exprdv1.Function_RUNNER_CLIENT,
	},
}

// downloadCsv returns the downloadCsv function: it writes its rows as CSV
// to path (truncating it on each call), or to w when path is empty. A
// failure to write is told in full on stderr; the model is told only that
// it failed.
func downloadCsv(w io.Writer, path string, stderr io.Writer) client.Function {
	return func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		var buf bytes.Buffer
		n, err := writeCSV(&buf, args)
		if err != nil {
			return nil, err
		}
		if path != "" {
			err = os.WriteFile(path, buf.Bytes(), 0o644)
		} else {
			_, err = w.Write(buf.Bytes())
		}
		if err != nil {
			fmt.Fprintf(stderr, "exprctl: downloadCsv: %v\n", err)
			return nil, fmt.Errorf("writing the CSV failed")
		}
		return json.Marshal(map[string]int{"rows": n})
	}
}

// writeCSV writes {"rows": [objects]} as CSV: a header of the sorted union
// of the rows' keys, then one record per row. Strings are written as they
// are, null and missing keys as empty fields, everything else as its
// compact JSON.
func writeCSV(w io.Writer, args json.RawMessage) (int, error) {
	var in struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return 0, fmt.Errorf(`want {"rows": [objects]}: %v`, err)
	}
	keys := map[string]bool{}
	for _, row := range in.Rows {
		for k := range row {
			keys[k] = true
		}
	}
	header := make([]string, 0, len(keys))
	for k := range keys {
		header = append(header, k)
	}
	sort.Strings(header)
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return 0, err
	}
	record := make([]string, len(header))
	for _, row := range in.Rows {
		for i, k := range header {
			record[i] = field(row[k])
		}
		if err := cw.Write(record); err != nil {
			return 0, err
		}
	}
	cw.Flush()
	return len(in.Rows), cw.Error()
}

func field(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			return s
		}
	}
	var c bytes.Buffer
	if err := json.Compact(&c, v); err == nil {
		return c.String()
	}
	return string(v)
}
