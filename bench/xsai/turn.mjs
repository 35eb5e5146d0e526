// turn.mjs runs the xsai side of exprd's "AgentLoop vs xsai" benchmark
// (bench/cmd/agentxsai): the two-step turn that exprd's AgentLoop runs,
// with xsai's generateText in this process, against the same scripted
// OpenAI-compatible server. --tool picks the workload's tool:
//
//   - add (http-tool): the math provider's add, called over HTTP as
//     exprd's UTCP executor calls it;
//   - get_weather (client-tool): the tool runs in this process (side.mjs),
//     as agentloop.mjs runs it for exprd.
//
//	node turn.mjs --tool add --base-url http://127.0.0.1:P/v1 --math-url http://127.0.0.1:Q \
//	  --prompt 'What is 2 + 3?' --a 2 --b 3 --want-text '2 + 3 = 5.' --warmup 10 --turns 50
//	node turn.mjs --tool get_weather --base-url http://127.0.0.1:P/v1 \
//	  --prompt 'Weather in Paris?' --city Paris --want-text '...' --warmup 10 --turns 50
//
// It prints one JSON object on stdout (side.mjs's measure). Any turn that
// does not come out as scripted fails the run (exit 1, the reason on
// stderr).
//
// Fairness: this side runs the loop in-process, where exprd's turn crosses
// gRPC to a separate exprd process; both sides make the same two
// non-streamed model requests (generateText never streams; the harness
// configures exprd's provider likewise unless --stream) per turn, to the
// same server, with keep-alive connections.
import { isDeepStrictEqual, parseArgs } from 'node:util'

import { generateText } from 'xsai'

import { measure, required, version, weather } from './side.mjs'

const { values: opts } = parseArgs({
  options: {
    'tool': { type: 'string', default: 'add' },
    'base-url': { type: 'string' },
    'math-url': { type: 'string' },
    'model': { type: 'string', default: 'scripted-model' },
    'prompt': { type: 'string' },
    'a': { type: 'string', default: '2' },
    'b': { type: 'string', default: '3' },
    'city': { type: 'string' },
    'want-text': { type: 'string' },
    'max-steps': { type: 'string', default: '10' },
    'warmup': { type: 'string', default: '10' },
    'turns': { type: 'string', default: '50' },
  },
})
required('turn.mjs', opts, 'base-url', 'prompt', 'want-text')

let executed = 0

// Each tool with the arguments the scripted model sends and the result
// the tool must give.
const tools = {
  add() {
    required('turn.mjs', opts, 'math-url')
    const a = Number(opts.a)
    const b = Number(opts.b)
    // What exprd's UTCP executor does for math.add: a GET with the
    // arguments in the query string (key order), answering {"result": N}.
    // Its schema is the one the math provider's manual declares, sent as
    // it is (strict off), as exprd sends the manual's.
    return {
      args: { a, b },
      result: { result: a + b },
      tool: {
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
      },
    }
  },
  get_weather() {
    required('turn.mjs', opts, 'city')
    const args = { city: opts.city }
    return {
      args,
      result: weather.run(args),
      tool: {
        type: 'function',
        function: { name: weather.name, description: weather.description, parameters: weather.parameters },
        async execute(args) {
          executed++
          return weather.run(args)
        },
      },
    }
  },
}
if (!Object.hasOwn(tools, opts.tool)) {
  console.error(`turn.mjs: --tool ${opts.tool}: want one of ${Object.keys(tools).join(', ')}`)
  process.exit(2)
}
const { args: wantArgs, result, tool } = tools[opts.tool]()
const wantResult = JSON.stringify(result)

// verify checks one turn's result: two steps, the first calling the tool
// with the scripted arguments and getting its answer, the second the
// scripted text.
function verify(res) {
  const fail = (why) => {
    throw new Error(`turn not as scripted: ${why}: ${JSON.stringify(res)}`)
  }
  if (res.steps.length !== 2)
    fail(`${res.steps.length} steps, want 2`)
  const [first, last] = res.steps
  if (first.toolCalls.length !== 1 || first.toolCalls[0].toolName !== opts.tool)
    fail(`the first step did not call ${opts.tool} once`)
  const tr = first.toolResults[0]
  if (!isDeepStrictEqual(tr.args, wantArgs))
    fail(`${opts.tool} got ${JSON.stringify(tr.args)}`)
  if (tr.result !== wantResult)
    fail(`${opts.tool} answered ${tr.result}, want ${wantResult}`)
  if (last.finishReason !== 'stop' || res.text !== opts['want-text'])
    fail(`final text ${JSON.stringify(res.text)}, want ${JSON.stringify(opts['want-text'])}`)
}

await measure({
  warmup: Number(opts.warmup),
  turns: Number(opts.turns),
  turn: () => generateText({
    baseURL: opts['base-url'],
    model: opts.model,
    messages: [{ role: 'user', content: opts.prompt }],
    tools: [tool],
    maxSteps: Number(opts['max-steps']),
  }),
  verify,
  toolCalls: () => executed,
  extra: { xsai: version('xsai') },
})
