// agentloop.mjs runs the exprd side of the client-tool workload of
// exprd's "AgentLoop vs xsai" benchmark (bench/cmd/agentxsai) from Node,
// as a Node backend would: one @grpc/grpc-js channel to exprd, and turns
// one after another, each an AgentLoop.Run stream. Start declares
// get_weather as a client-run tool (EXECUTOR_CLIENT); when exprd asks for
// it (tool_call_requested with run_on_client) this process runs it
// (side.mjs's weather, as turn.mjs runs it for xsai) and answers with
// tool_output; the turn ends when exprd ends the stream after done.
// With --answer-only, Start names every informational event in
// omit_events, as a backend that needs only the answer rather than
// the play-by-play would: exprd then sends the tool request and done.
//
//	node agentloop.mjs --addr 127.0.0.1:P --proto-dir ../../proto \
//	  --prompt 'Weather in Paris?' --city Paris --want-text '...' --warmup 10 --turns 50 [--sync] [--answer-only]
//
// bench/cmd/agentxsai also runs it against its gRPC floor, a stub
// AgentLoop server that does no work; the report's events (the last
// turn's, in order) show that both sent the same turn.
//
// The protos are loaded at run time with @grpc/proto-loader, with the
// options examples/node/client.mjs uses. It prints one JSON object on
// stdout (side.mjs's measure; --sync: the harness reads exprd's CPU time
// after the warm-up). Any turn that does not come out as scripted fails
// the run (exit 1, the reason on stderr).
import { isDeepStrictEqual, parseArgs } from 'node:util'

import grpc from '@grpc/grpc-js'
import protoLoader from '@grpc/proto-loader'

import { measure, required, version, weather } from './side.mjs'

const { values: opts } = parseArgs({
  options: {
    'addr': { type: 'string' },
    'proto-dir': { type: 'string' },
    'prompt': { type: 'string' },
    'city': { type: 'string' },
    'want-text': { type: 'string' },
    'max-steps': { type: 'string', default: '10' },
    'warmup': { type: 'string', default: '10' },
    'turns': { type: 'string', default: '50' },
    'sync': { type: 'boolean', default: false },
    'answer-only': { type: 'boolean', default: false },
  },
})
required('agentloop.mjs', opts, 'addr', 'proto-dir', 'prompt', 'city', 'want-text')

const { AgentLoop } = grpc.loadPackageDefinition(
  protoLoader.loadSync(['exprd/v1/agentloop.proto'], {
    includeDirs: [opts['proto-dir']],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
).exprd.v1
const client = new AgentLoop(opts.addr, grpc.credentials.createInsecure())

const start = {
  start: {
    messages: [{ role: 'ROLE_USER', content: opts.prompt }],
    tools: [{
      name: weather.name,
      description: weather.description,
      parameters_json: JSON.stringify(weather.parameters),
      executor: 'EXECUTOR_CLIENT',
    }],
    stop: { max_steps: Number(opts['max-steps']) },
    omit_events: opts['answer-only']
      ? ['AGENT_EVENT_STEP_STARTED', 'AGENT_EVENT_TEXT_DELTA', 'AGENT_EVENT_TOOL_CALL_ANNOUNCED', 'AGENT_EVENT_STATE_WRITE', 'AGENT_EVENT_TOOL_RESULT', 'AGENT_EVENT_STEP_FINISHED']
      : [],
  },
}

let executed = 0
// extra goes into the report; events is the last turn's events, in order.
const extra = { grpc_js: version('@grpc/grpc-js'), events: [] }

// turn runs one turn and resolves with what its stream carried once the
// server has ended it.
function turn() {
  return new Promise((resolve, reject) => {
    const seen = { announced: [], requested: [], results: [], rejected: [], other: [], events: [], done: null }
    const call = client.Run()
    call.on('data', (m) => {
      const ev = m[m.event]
      seen.events.push(m.event === 'tool_call_requested' && ev.run_on_client ? 'tool_call_requested(run_on_client)' : m.event)
      switch (m.event) {
        case 'tool_call_requested':
          if (!ev.run_on_client) {
            seen.announced.push(ev.call)
            break
          }
          seen.requested.push(ev.call)
          if (ev.call.name !== weather.name) {
            call.write({ tool_output: { call_id: ev.call.id, is_error: true } })
            break
          }
          executed++
          call.write({ tool_output: { call_id: ev.call.id, output_json: JSON.stringify(weather.run(JSON.parse(ev.call.arguments_json))) } })
          break
        case 'tool_result':
          seen.results.push(ev)
          break
        case 'rejected':
          seen.rejected.push(ev)
          break
        case 'done':
          seen.done = ev
          break
        default:
          seen.other.push(m.event)
      }
    })
    call.on('error', reject)
    call.on('end', () => resolve(seen))
    call.write(start)
  })
}

const wantArgs = { city: opts.city }
const wantResult = weather.run(wantArgs)

// verify checks one turn: get_weather announced, then asked of this
// client once with the scripted arguments, its result passed on as it
// was sent, and the scripted answer after two steps. With --answer-only:
// asked once, nothing but the request and done sent (the harness checks
// that the result reached the model).
function verify(seen) {
  const fail = (why) => {
    throw new Error(`turn not as scripted: ${why}: ${JSON.stringify(seen)}`)
  }
  if (seen.done === null)
    fail('the stream ended without done')
  if (seen.rejected.length > 0)
    fail('a message of this client was rejected')
  if (seen.requested.length !== 1)
    fail('want one call requested of the client')
  const call = seen.requested[0]
  if (call.name !== weather.name || !isDeepStrictEqual(JSON.parse(call.arguments_json), wantArgs))
    fail(`called ${call.name} with ${call.arguments_json}`)
  if (opts['answer-only']) {
    if (seen.announced.length + seen.results.length + seen.other.length > 0)
      fail('want no event but the request and done')
  }
  else {
    if (seen.announced.length !== 1 || seen.announced[0].id !== call.id)
      fail('want the call announced before it is requested')
    const r = seen.results
    if (r.length !== 1 || r[0].call_id !== call.id || r[0].is_error || !isDeepStrictEqual(JSON.parse(r[0].output_json), wantResult))
      fail(`want the result ${JSON.stringify(wantResult)}`)
  }
  extra.events = seen.events
  const d = seen.done
  if (d.steps.length !== 2 || d.text !== opts['want-text'] || d.stop_reason !== 'STOP_REASON_COMPLETED')
    fail(`done after ${d.steps.length} steps (${d.stop_reason}) with ${JSON.stringify(d.text)}, want 2 steps and ${JSON.stringify(opts['want-text'])}`)
}

await measure({
  warmup: Number(opts.warmup),
  turns: Number(opts.turns),
  sync: opts.sync,
  turn,
  verify,
  toolCalls: () => executed,
  extra,
})
client.close()
