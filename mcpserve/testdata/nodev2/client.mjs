// A client nobody here wrote: the official TypeScript MCP client 2.x
// (@modelcontextprotocol/client, pinned in package.json), which speaks
// the 2026-07-28 revision and drives its input_required round trip. It
// calls a chain that needs approval twice, its user accepting once and
// declining once, and prints one JSON object of what it saw, for
// mcpserve's test to check.
//
// EXPRD_MCP_URL is the endpoint; EXPRD_MCP_TOKEN a bearer token ("": none);
// EXPRD_MCP_CODE the program to run.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = new URL(process.env.EXPRD_MCP_URL);
const token = process.env.EXPRD_MCP_TOKEN ?? "";
const code = process.env.EXPRD_MCP_CODE;

async function run(action) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const client = new Client({ name: "exprd-node-v2-test", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  const asked = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params.message);
    return { action };
  });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  const res = await client.callTool({ name: "call_tool_chain", arguments: { code } });
  await client.close();
  return { asked, isError: res.isError ?? false, text: res.content?.[0]?.text ?? "", structured: res.structuredContent ?? null };
}

const out = { accepted: await run("accept"), declined: await run("decline") };
process.stdout.write(JSON.stringify(out) + "\n");
