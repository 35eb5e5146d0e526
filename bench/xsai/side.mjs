// side.mjs is what this directory's client processes share: the
// client-tool workload's get_weather tool, and the loop that runs a
// round's turns, measures them and prints the report bench/cmd/agentxsai
// reads (the same fields its Go worker prints).
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'

// weather is get_weather as both sides of the client-tool workload declare
// and run it: in the calling process, with no I/O, as a tool that lives in
// the backend does.
export const weather = {
  name: 'get_weather',
  description: 'The current weather in a city.',
  parameters: {
    type: 'object',
    required: ['city'],
    properties: { city: { type: 'string' } },
    additionalProperties: false,
  },
  run: ({ city }) => ({ city, temp_c: 18, sky: 'clear' }),
}

// required exits 2 naming the first of names that opts lacks.
export function required(script, opts, ...names) {
  for (const k of names) {
    if (!opts[k]) {
      console.error(`${script}: --${k} is required`)
      process.exit(2)
    }
  }
}

// measure runs warmup turns, then turns measured ones, and prints the
// report on stdout. turn() runs one turn and returns what verify(res)
// checks (it throws when the turn is not as scripted); toolCalls() counts
// the tool's runs, which must grow by one a turn.
//
// With sync, after the warm-up it prints "warm" on a line of its own and
// waits for a line on stdin: the harness reads exprd's CPU time in
// between, so that exprd's figure covers the measured turns only.
//
// The times are each turn's wall time in nanoseconds; cpu_ns is this
// process's user+system CPU over the measured turns.
export async function measure({ warmup, turns, sync, turn, verify, toolCalls, extra }) {
  const one = async () => {
    const before = toolCalls()
    const t0 = process.hrtime.bigint()
    const res = await turn()
    const t1 = process.hrtime.bigint()
    if (toolCalls() !== before + 1)
      throw new Error(`the tool ran ${toolCalls() - before} times in a turn, want 1`)
    verify(res)
    return Number(t1 - t0)
  }
  for (let i = 0; i < warmup; i++)
    await one()
  if (sync)
    await waitForHarness()
  const durations = []
  const cpu0 = process.cpuUsage()
  for (let i = 0; i < turns; i++)
    durations.push(await one())
  const cpu = process.cpuUsage(cpu0)
  const sorted = [...durations].sort((x, y) => x - y)
  process.stdout.write(`${JSON.stringify({
    runtime: `node ${process.version}`,
    ...extra,
    warmup,
    turns,
    verified: durations.length,
    tool_calls: toolCalls(),
    durations_ns: durations,
    median_ns: quantile(sorted, 0.5),
    p10_ns: quantile(sorted, 0.1),
    p90_ns: quantile(sorted, 0.9),
    cpu_ns: (cpu.user + cpu.system) * 1000,
    peak_rss_kib: peakRSSKiB(),
    rss_bytes: process.memoryUsage().rss,
  })}\n`)
}

async function waitForHarness() {
  process.stdout.write('warm\n')
  const lines = createInterface({ input: process.stdin })
  await once(lines, 'line')
  lines.close()
}

// quantile is by nearest rank, as the Go worker computes it.
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

// version is an installed package's version.
export function version(name) {
  return JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version
}
