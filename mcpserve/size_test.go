package mcpserve_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/utcp"
)

// The published catalogues registered together: what a host loads into
// its model's context from tools/list in code mode, against gateway mode,
// in tokens of about 4 bytes of JSON each (a stated approximation of
// common tokenizers on JSON). Code mode must take at least 98% fewer.
func TestListSizeCodeAgainstGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 10 MB of OpenAPI documents")
	}
	t.Parallel()
	reg := demoRegistry(t, utcp.WithVariables(map[string]string{
		"openai_APIKEYAUTH_API_KEY": "sk-test", "twilio_ACCOUNTSID_AUTHTOKEN_USERNAME": "u", "twilio_ACCOUNTSID_AUTHTOKEN_PASSWORD": "p",
	}))
	for name, file := range map[string]string{"github": "github-selection.json", "openai": "openai-openapi.json", "twilio": "twilio-api-v2010.json"} {
		doc, err := os.ReadFile("../utcp/testdata/catalogs/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Register(context.Background(), name, utcp.FromText(string(doc)).AllowProtocols("http")); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	size := func(expose mcpserve.Expose) (bytes, tools int) {
		url, _ := serve(t, mcpserve.Config{Registry: reg, Expose: expose})
		cs := connect(t, url, "2025-11-25", "")
		cursor := ""
		for {
			res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(res.Tools)
			bytes += len(raw)
			tools += len(res.Tools)
			if cursor = res.NextCursor; cursor == "" {
				return bytes, tools
			}
		}
	}
	codeBytes, codeTools := size(mcpserve.ExposeCode)
	gwBytes, gwTools := size(mcpserve.ExposeTools)
	t.Logf("tools/list: code mode %d tools, %d bytes (about %d tokens); gateway mode %d tools, %d bytes (about %d tokens); %.2f%% fewer",
		codeTools, codeBytes, codeBytes/4, gwTools, gwBytes, gwBytes/4, 100*(1-float64(codeBytes)/float64(gwBytes)))
	if float64(codeBytes) > 0.02*float64(gwBytes) {
		t.Errorf("code mode lists %d bytes, over 2%% of gateway mode's %d", codeBytes, gwBytes)
	}
}
