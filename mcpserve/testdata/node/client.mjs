// A client nobody here wrote: the official TypeScript MCP SDK (pinned in
// package.json), against exprd's MCP endpoint. It lists the tools, calls
// the code-mode tools, and tries without a token; it prints one JSON
// object of what it saw, for mcpserve's test to check.
//
// EXPRD_MCP_URL is the endpoint; EXPRD_MCP_TOKEN a bearer token ("": none).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.EXPRD_MCP_URL);
const token = process.env.EXPRD_MCP_TOKEN ?? "";

async function connect(withToken) {
  const headers = withToken && token ? { Authorization: `Bearer ${token}` } : {};
  const client = new Client({ name: "exprd-node-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  await client.connect(transport);
  return client;
}

const out = {};
const client = await connect(true);
out.protocolVersion = client.transport.protocolVersion ?? null;
out.server = client.getServerVersion();
const names = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  names.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
out.tools = names;

const search = await client.callTool({ name: "search_tools", arguments: { task_description: "multiply two numbers", limit: 3 } });
out.search = search.structuredContent;
const info = await client.callTool({ name: "tools_info", arguments: { names: ["math.multiply"] } });
out.info = info.structuredContent;
const chain = await client.callTool({
  name: "call_tool_chain",
  arguments: {
    code: 'let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7}); codemode.CallTool("math.multiply", {"a": r1.result, "b": 3})',
    timeout: 10000,
  },
});
out.chain = { isError: chain.isError ?? false, structured: chain.structuredContent };
const bad = await client.callTool({ name: "call_tool_chain", arguments: { code: "1 +" } });
out.bad = { isError: bad.isError ?? false, text: bad.content?.[0]?.text ?? "" };
await client.close();

try {
  const anon = await connect(false);
  await anon.listTools();
  out.withoutToken = "served";
  await anon.close();
} catch (e) {
  out.withoutToken = `${e?.code ?? ""} ${e?.message ?? e}`;
}
process.stdout.write(JSON.stringify(out) + "\n");
