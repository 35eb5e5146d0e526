// Command select cuts a published OpenAPI 3 document down to the
// operations of some tags (the first segment of their operationId) and the
// components they reach, everything else as published. It made
// github-selection.json from GitHub's REST API description:
//
//	npm pack @octokit/openapi@23.0.2 && tar xzf octokit-openapi-23.0.2.tgz
//	go run ./utcp/testdata/catalogs/select package/generated/api.github.com.json \
//	    issues,pulls,gists,reactions,git,search,users,activity > utcp/testdata/catalogs/github-selection.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: select DOCUMENT TAG,TAG,...")
		os.Exit(2)
	}
	if err := run(os.Args[1], strings.Split(os.Args[2], ",")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func run(file string, tags []string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	paths, _ := doc["paths"].(map[string]any)
	kept := map[string]any{}
	for p, v := range paths {
		item, _ := v.(map[string]any)
		out := map[string]any{}
		for k, op := range item {
			if !slices.Contains(methods, k) {
				out[k] = op
				continue
			}
			id, _ := op.(map[string]any)["operationId"].(string)
			if tag, _, _ := strings.Cut(id, "/"); slices.Contains(tags, tag) {
				out[k] = op
			}
		}
		for k := range out {
			if slices.Contains(methods, k) {
				kept[p] = out
				break
			}
		}
	}
	// The components the kept operations reach, through $refs.
	refs := map[string]bool{}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				ref, ok := v.(string)
				if k != "$ref" || !ok {
					walk(v)
					continue
				}
				if refs[ref] || !strings.HasPrefix(ref, "#/components/") {
					continue
				}
				refs[ref] = true
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				kind, _ := doc["components"].(map[string]any)[parts[0]].(map[string]any)
				walk(kind[strings.Join(parts[1:], "/")])
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(kept)
	components := map[string]any{}
	for ref := range refs {
		parts := strings.SplitN(strings.TrimPrefix(ref, "#/components/"), "/", 2)
		kind, _ := doc["components"].(map[string]any)[parts[0]].(map[string]any)
		if components[parts[0]] == nil {
			components[parts[0]] = map[string]any{}
		}
		components[parts[0]].(map[string]any)[parts[1]] = kind[parts[1]]
	}
	doc["paths"], doc["components"] = kept, components
	delete(doc, "x-webhooks")
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
