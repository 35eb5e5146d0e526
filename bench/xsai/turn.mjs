// turn.mjs runs the xsai side of exprd's "AgentLoop vs xsai" benchmark
// (bench/cmd/agentxsai): the same two-step turn that exprd's AgentLoop runs
// (the model calls the math provider's add tool, then answers), with
// xsai's generateText in this process, against the same scripted
// OpenAI-compatible server and the same HTTP tool.
//
//	node turn.mjs --base-url http://127.0.0.1:P/v1 --math-url http://127.0.0.1:Q \
//	  --warmup 10 --turns 50
//
// It prints one JSON object on stdout: each measured turn's wall time in
// nanoseconds (generateText's call to its resolved result), their median,
// p10 and p90, how many turns were verified, and this process's peak RSS
// (VmHWM from /proc/self/status) and current RSS. Any turn that does not
// come out as scripted fails the run (exit 1, the reason on stderr).
//
// Fairness: this side runs the loop in-process, where exprd's turn crosses
// gRPC to a separate exprd process; both sides make the same two
// non-streamed model requests (generateText never streams; the harness
// configures exprd's provider likewise unless --stream) and the same tool
// request per turn, to the same servers, with keep-alive connections.
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

import { generateText } from 'xsai'

const { values: opts } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    'math-url': { type: 'string' },
    'model': { type: 'string', default: 'scripted-model' },
    'prompt': { type: 'string', default: 'What is 2 + 3?' },
    'a': { type: 'string', default: '2' },
    'b': { type: 'string', default: '3' },
    'want-text': { type: 'string', default: '2 + 3 = 5.' },
    'max-steps': { type: 'string', default: '10' },
    'warmup': { type: 'string', default: '10' },
    'turns': { type: 'string', default: '50' },
  },
})
for (const k of ['base-url', 'math-url']) {
  if (!opts[k]) {
    console.error(`turn.mjs: --${k} is required`)
    process.exit(2)
  }
}
const warmup = Number(opts.warmup)
const turns = Number(opts.turns)
const maxSteps = Number(opts['max-steps'])
const a = Number(opts.a)
const b = Number(opts.b)
const wantResult = JSON.stringify({ result: a + b })

// The tool: what exprd's UTCP executor does for math.add, a GET with the
// arguments in the query string (key order), answering {"result": N}. Its
// schema is the one the math provider's manual declares, sent as it is
// (strict off), as exprd sends the manual's.
let executed = 0
const add = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Adds two numbers: a + b.',
    parameters: {
      type: 'object',
      required: ['a', 'b'],
      properties: { a: { type: 'number' }, b: { type: 'number' } },
      additionalProperties: false,
    },
  },
  async execute(args, { abortSignal }) {
    const q = new URLSearchParams({ a: String(args.a), b: String(args.b) })
    const res = await fetch(`${opts['math-url']}/math/add?${q}`, { signal: abortSignal })
    if (!res.ok)
      throw new Error(`math provider answered ${res.status}: ${await res.text()}`)
    executed++
    return res.json()
  },
}

async function turn() {
  return generateText({
    baseURL: opts['base-url'],
    model: opts.model,
    messages: [{ role: 'user', content: opts.prompt }],
    tools: [add],
    maxSteps,
  })
}

// verify checks one turn's result: two steps, the first calling add with
// the scripted arguments and getting the provider's answer, the second the
// scripted text.
function verify(res, ranBefore) {
  const fail = (why) => {
    throw new Error(`turn not as scripted: ${why}: ${JSON.stringify(res)}`)
  }
  if (executed !== ranBefore + 1)
    fail(`the tool ran ${executed - ranBefore} times, want 1`)
  if (res.steps.length !== 2)
    fail(`${res.steps.length} steps, want 2`)
  const [first, last] = res.steps
  if (first.toolCalls.length !== 1 || first.toolCalls[0].toolName !== 'add')
    fail('the first step did not call add once')
  const tr = first.toolResults[0]
  if (tr.args.a !== a || tr.args.b !== b)
    fail(`add got ${JSON.stringify(tr.args)}`)
  if (tr.result !== wantResult)
    fail(`add answered ${tr.result}, want ${wantResult}`)
  if (last.finishReason !== 'stop' || res.text !== opts['want-text'])
    fail(`final text ${JSON.stringify(res.text)}, want ${JSON.stringify(opts['want-text'])}`)
}

function quantile(sorted, q) {
  if (sorted.length === 0)
    return 0
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))))
  return sorted[i]
}

function peakRSSKiB() {
  const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) : 0
}

let verified = 0
for (let i = 0; i < warmup; i++) {
  const before = executed
  verify(await turn(), before)
}
const durations = []
for (let i = 0; i < turns; i++) {
  const before = executed
  const t0 = process.hrtime.bigint()
  const res = await turn()
  const t1 = process.hrtime.bigint()
  verify(res, before)
  verified++
  durations.push(Number(t1 - t0))
}
const sorted = [...durations].sort((x, y) => x - y)
process.stdout.write(`${JSON.stringify({
  runtime: `node ${process.version}`,
  xsai: JSON.parse(readFileSync(new URL('./node_modules/xsai/package.json', import.meta.url), 'utf8')).version,
  warmup,
  turns,
  verified,
  tool_calls: executed,
  durations_ns: durations,
  median_ns: quantile(sorted, 0.5),
  p10_ns: quantile(sorted, 0.1),
  p90_ns: quantile(sorted, 0.9),
  peak_rss_kib: peakRSSKiB(),
  rss_bytes: process.memoryUsage().rss,
})}\n`)
