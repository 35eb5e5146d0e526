package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// describeParts are what `describe --part` can print, in the order of
// --part all.
var describeParts = []struct {
	name string
	get  func(d *exprdv1.DescribeResponse) string
}{
	{"description", func(d *exprdv1.DescribeResponse) string { return d.GetDescription() }},
	{"input-schema", func(d *exprdv1.DescribeResponse) string { return indentJSON(d.GetInputSchemaJson()) }},
	{"output-schema", func(d *exprdv1.DescribeResponse) string { return indentJSON(d.GetOutputSchemaJson()) }},
	{"core", func(d *exprdv1.DescribeResponse) string { return d.GetCorePrompt() }},
	{"functions", func(d *exprdv1.DescribeResponse) string { return d.GetFunctionsPrompt() }},
}

func partNames() string {
	names := []string{"all"}
	for _, p := range describeParts {
		names = append(names, p.name)
	}
	return strings.Join(names, "|")
}

// describeCmd prints the tool as the server renders it for the settings:
// one part alone as it is, or all of them under "==> part <==" headings.
func describeCmd(e *env, args []string) error {
	fs := e.newFlagSet("describe")
	var sf settingsFlags
	sf.register(fs, "client-run functions to declare (A,B or repeated); downloadCsv comes with its schema")
	fs.StringVar(&sf.note, "note", "", `text appended to the description as "## Note"`)
	part := fs.String("part", "all", partNames())
	if err := parse(fs, args); err != nil {
		return err
	}
	var get func(*exprdv1.DescribeResponse) string
	if *part != "all" {
		for _, p := range describeParts {
			if p.name == *part {
				get = p.get
			}
		}
		if get == nil {
			return usagef("--part %q: want one of %s", *part, partNames())
		}
	}

	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := c.Describe(e.ctx, sf.settings())
	if err != nil {
		return err
	}
	if get != nil {
		fmt.Fprint(e.stdout, withNewline(get(d)))
		return nil
	}
	fmt.Fprintf(e.stdout, "name: %s\n", d.GetName())
	for _, p := range describeParts {
		fmt.Fprintf(e.stdout, "\n==> %s <==\n%s", p.name, withNewline(p.get(d)))
	}
	return nil
}

func indentJSON(b string) string {
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(b), "", "  "); err != nil {
		return b
	}
	return out.String()
}

func withNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
