// inflight.mjs runs the xsai side of exprd's "turns in flight" benchmark
// (bench/cmd/turnsinflight): --n generateText turns at once in this one
// process, against the harness's model server, each the turn exprd's
// AgentLoop runs there: the model calls get_weather (side.mjs's weather,
// run here by xsai's loop), then answers with 50 stamped text pieces
// ("<ns>;" each) in a second request.
//
//	node inflight.mjs --base-url http://127.0.0.1:P/v1 --n 1000 [--stream]
//
// It talks with the harness on stdin and stdout as the Go client does:
// "ready" once loaded (the harness reads this process's memory and CPU),
// then, after a line on stdin, starts the turns; "done" once every turn
// has ended (the harness reads them again), then, after a line, prints
// one JSON object (the Go client's fields) and exits. A turn that does not
// come out as scripted is counted in errors, the first one's reason kept.
//
// generateText never streams: the model server answers its requests with
// one body each, at the time its stream would have ended. With --stream
// the turns are streamText's instead, whose requests stream as exprd's
// do: then each text delta's arrival here less the time the model server
// wrote it (both wall clocks of this machine) is its latency, reported as
// the Go client reports exprd's.
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'

import { generateText, streamText } from 'xsai'

import { required, version, weather } from './side.mjs'

const { values: opts } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    'n': { type: 'string', default: '100' },
    'model': { type: 'string', default: 'inflight-model' },
    'stream': { type: 'boolean', default: false },
  },
})
required('inflight.mjs', opts, 'base-url')
const n = Number(opts.n)
const deltas = 50
const wantResult = JSON.stringify(weather.run({ city: 'Paris' }))

let executed = 0
const tool = {
  type: 'function',
  function: { name: weather.name, description: weather.description, parameters: weather.parameters },
  async execute(args) {
    executed++
    return weather.run(args)
  },
}

const request = () => ({
  baseURL: opts['base-url'],
  model: opts.model,
  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  tools: [tool],
  maxSteps: 10,
})

// latencies holds every stamped delta's latency in ns (--stream).
const latencies = []
// nowNS is this machine's wall clock in ns (to the microsecond).
const nowNS = () => Math.round((performance.timeOrigin + performance.now()) * 1e6)

// turn runs one turn and throws when it is not as scripted.
async function turn() {
  let steps, text
  if (opts.stream) {
    const res = streamText({
      ...request(),
      onEvent(ev) {
        if (ev.type !== 'text-delta')
          return
        const now = nowNS()
        for (const stamp of ev.text.split(';').slice(0, -1))
          latencies.push(now - Number(stamp))
      },
    })
    text = ''
    for await (const piece of res.textStream)
      text += piece
    steps = await res.steps
  }
  else {
    const res = await generateText(request())
    steps = res.steps
    text = res.text
  }
  const fail = why => new Error(`turn not as scripted: ${why}`)
  if (steps.length !== 2)
    throw fail(`${steps.length} steps, want 2`)
  const tr = steps[0].toolResults
  if (tr.length !== 1 || tr[0].result !== wantResult)
    throw fail(`the tool's results: ${JSON.stringify(tr)}`)
  const pieces = text.split(';')
  if (pieces.length !== deltas + 1 || pieces.slice(0, deltas).some(p => !/^\d+$/.test(p)))
    throw fail(`the answer ${JSON.stringify(text.slice(0, 80))}... is not ${deltas} stamps`)
}

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()
async function handshake(line) {
  process.stdout.write(`${line}\n`)
  const { done } = await lines.next()
  if (done)
    throw new Error(`the harness went away after ${line}`)
}

await handshake('ready')
const cpu0 = process.cpuUsage()
const outcomes = await Promise.allSettled(Array.from({ length: n }, turn))
const cpu = process.cpuUsage(cpu0)
const failed = outcomes.filter(o => o.status === 'rejected').map(o => String(o.reason?.stack ?? o.reason))
// Every turn ran the tool once.
if (failed.length === 0 && executed !== n)
  failed.push(`the tool ran ${executed} times for ${n} turns`)
await handshake('done')
process.stdout.write(`${JSON.stringify({
  runtime: `node ${process.version}`,
  mode: opts.stream ? 'xsai-stream' : 'xsai',
  xsai: version('xsai'),
  turns: n,
  verified: Math.max(0, n - failed.length),
  errors: failed.length,
  first_error: failed[0],
  deltas: latencies.length,
  latency_ns: quantiles(latencies),
  cpu_ns: (cpu.user + cpu.system) * 1000,
  peak_rss_kib: peakRSSKiB(),
})}\n`)
process.exit(0)

// quantiles are by nearest rank, as the Go client computes them.
function quantiles(d) {
  if (d.length === 0)
    return { n: 0, p50: 0, p90: 0, p99: 0, max: 0, mean: 0 }
  const s = Float64Array.from(d).sort()
  const at = q => s[Math.min(Math.round(q * (s.length - 1)), s.length - 1)]
  const mean = s.reduce((a, b) => a + b, 0) / s.length
  return { n: s.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: s[s.length - 1], mean: Math.round(mean) }
}

function peakRSSKiB() {
  const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) : 0
}
