// A Node client of exprd over @grpc/grpc-js, loading ../../proto at run
// time. On one ExprTool Session stream it selects the demo's five cheapest
// products, answers confirms and runs a function of its own; then one
// AgentLoop turn against the demo model, then drops a durable turn's
// stream and resumes it once, prints a transcript, and checks
// everything it receives with node:assert: any mismatch exits 1.
//
//   node client.mjs localhost:50051
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const here = dirname(fileURLToPath(import.meta.url));
const protoDir = join(here, '..', '..', 'proto');
const productsFile = join(here, '..', '..', 'demo', 'products.json');

// Every wait is bounded: a server that stops answering fails the run.
const RECV_TIMEOUT_MS = 10_000;
const RUN_TIMEOUT_MS = 60_000;

// keepCase: fields as the protos spell them (state_json, call_id). oneofs:
// each message says which member of its oneof is set (m.msg, m.event).
// enums: String: enum fields are read, and may be written, by their names
// (ROLE_USER, HOOK_PREPARE_STEP). google/rpc/status.proto (Rejected's
// status) is vendored under proto/; google/protobuf/any.proto comes from
// protobufjs's bundled well-known types.
const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(['exprd/v1/exprtool.proto', 'exprd/v1/agentloop.proto'], {
    includeDirs: [protoDir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
);
const { ExprTool, AgentLoop } = pkg.exprd.v1;

// The same expression the README and the demo model use.
const SELECT_FIVE = 'fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))';
const SELECTED_ROWS = 'filter(scopes.root.products.items, scopes.root.selected[.id] ?? false)';

// Every *_json field is a string holding JSON text.
const json = (v) => JSON.stringify(v);
const parse = (s) => JSON.parse(s);
const log = (line) => console.log(line);

// stage names the part of the run a failure is in.
let stage = 'setup';
const section = (name) => {
  stage = name;
};

// Stream turns a bidi call into awaitable messages, one at a time.
class Stream {
  constructor(call, oneof) {
    this.call = call;
    this.oneof = oneof;
    this.items = [];
    this.waiting = null;
    call.on('data', (m) => this.push({ m }));
    call.on('error', (err) => this.push({ err }));
    call.on('end', () => this.push({ end: true }));
  }

  push(item) {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w(item);
    } else {
      this.items.push(item);
    }
  }

  async next(what) {
    const item = this.items.length > 0 ? this.items.shift() : await new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = null;
        reject(new Error(`timed out after ${RECV_TIMEOUT_MS} ms waiting for ${what}`));
      }, RECV_TIMEOUT_MS);
      this.waiting = (it) => {
        clearTimeout(timer);
        resolve(it);
      };
    });
    if (item.err) {
      throw new Error(`waiting for ${what}, the stream failed: ${grpc.status[item.err.code]} ${item.err.details}`);
    }
    if (item.end) {
      throw new Error(`waiting for ${what}, the stream ended`);
    }
    return item.m;
  }

  // expect returns the next message's `kind` member, failing on any other.
  async expect(kind) {
    const m = await this.next(kind);
    assert.equal(m[this.oneof], kind, `got ${m[this.oneof]} ${JSON.stringify(m[m[this.oneof]])}, want ${kind}`);
    return m[kind];
  }

  send(m) {
    this.call.write(m);
  }

  // close half-closes and waits for the server to end the stream with OK.
  async close(what) {
    this.call.end();
    const item = this.items.length > 0 ? this.items.shift() : await new Promise((resolve) => { this.waiting = resolve; });
    if (item.err) {
      throw new Error(`${what}: the stream ended with ${grpc.status[item.err.code]} ${item.err.details}`);
    }
    assert.ok(item.end, `${what}: got ${JSON.stringify(item.m)} after the last expected message, want the stream's end`);
  }
}

// --- what the answers must be, computed from the products file ---------

const products = JSON.parse(readFileSync(productsFile, 'utf8'));
const byPrice = [...products.products.items].sort((a, b) => a.price - b.price);
assert.ok(byPrice[4].price < byPrice[5].price, 'products.json: a tie at the fifth price makes "the five cheapest" ambiguous');
const cheapest = byPrice.slice(0, 5).map((p) => p.id).sort();
const cheapestSet = Object.fromEntries(cheapest.map((id) => [id, true]));

// toCSV is exprctl's downloadCsv: a header of the sorted union of the
// rows' keys, strings as they are, null and missing as empty, anything
// else as its JSON; RFC 4180 quoting.
function toCSV(rows) {
  const header = [...new Set(rows.flatMap((r) => Object.keys(r)))].sort();
  const field = (v) => {
    const s = v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    return /[",\r\n]/.test(s) || /^[ \t]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  return [header, ...rows.map((r) => header.map((k) => r[k]))].map((rec) => rec.map(field).join(',') + '\n').join('');
}

// --- (a) ExprTool: one Session stream ------------------------------------

async function exprTool(addr) {
  log('== ExprTool.Session');
  const client = new ExprTool(addr, grpc.credentials.createInsecure());
  const s = new Stream(client.Session(), 'msg');
  try {
    await session(s);
    await s.close('ExprTool.Session');
    log('← stream closed: OK');
  } finally {
    client.close();
  }
}

async function session(s) {
  section('ExprTool: open');
  // Open: read on; the demo's server-run notify, and downloadCsv run here.
  s.send({
    open: {
      settings: {
        read: true,
        functions: [
          { name: 'notify', runner: 'RUNNER_SERVER' },
          {
            name: 'downloadCsv',
            description: 'Downloads rows as a CSV file for the user. The columns are the sorted union of the rows\' keys.',
            input_schema_json: json({ type: 'object', required: ['rows'], additionalProperties: false, properties: { rows: { type: 'array', items: { type: 'object' } } } }),
            output_schema_json: json({ type: 'object', required: ['rows', 'csv'], properties: { rows: { type: 'integer' }, csv: { type: 'string' } } }),
            runner: 'RUNNER_CLIENT',
          },
        ],
      },
    },
  });
  log('→ open read=true functions=notify(server),downloadCsv(client)');
  const opened = await s.expect('opened');
  assert.ok(opened.session_id, 'Opened has no session_id');
  log(`← opened session=${opened.session_id} timeout_ms=${opened.budgets.timeout_ms} max_steps=${opened.budgets.max_steps}`);

  // The snapshot, then a merge patch on top of it.
  s.send({ state: { state_json: readFileSync(productsFile, 'utf8') } });
  log(`→ state demo/products.json (${products.products.items.length} products)`);
  const title = 'Products (patched from Node)';
  s.send({ state_patch: { patch_json: json({ products: { title }, currency: 'EUR' }) } });
  log(`→ state_patch {"products":{"title":"${title}"},"currency":"EUR"}`);

  section('ExprTool: select the five cheapest');
  const select = {
    steps: [{ set: 'scopes.root.selected', expr: SELECT_FIVE }],
    read: '{selected: sort(keys(scopes.root.selected)), title: scopes.root.products.title, currency: scopes.root.currency}',
  };
  s.send({ call: { call_id: 'select', input_json: json(select) } });
  log(`→ call select ${JSON.stringify(select)}`);
  const w = await s.expect('step_write');
  log(`← write call=${w.call_id} step=${w.step} path=${w.path} value=${w.value_json}`);
  assert.deepEqual({ call: w.call_id, step: w.step, path: w.path }, { call: 'select', step: 0, path: 'scopes.root.selected' });
  assert.deepEqual(parse(w.value_json), cheapestSet, 'the write is not the five cheapest products of products.json');
  let a = await answer(s, 'select');
  assert.deepEqual(a, { value: { selected: cheapest, title, currency: 'EUR' } }, 'the answer is not the five cheapest ids with the patched title');
  log(`✓ the five cheapest: ${cheapest.join(', ')}; the patch applied`);

  section('ExprTool: bad messages');
  // A patch that is no object is Rejected and changes nothing; a call
  // naming an unknown function is an error for the model to fix.
  s.send({ state_patch: { patch_json: json(['not', 'an', 'object']) } });
  log('→ state_patch ["not","an","object"]');
  const rej = rejection(await s.expect('rejected'));
  assert.deepEqual({ kind: rej.kind, code: rej.status.code }, { kind: 'state_patch', code: grpc.status.INVALID_ARGUMENT });
  assert.match(rej.status.message, /a patch of the state must be a JSON object, got an array/);

  const bad = { steps: [{ set: 'scopes.root.selected', expr: 'deleteEverything()' }] };
  s.send({ call: { call_id: 'bad', input_json: json(bad) } });
  log(`→ call bad ${JSON.stringify(bad)}`);
  a = await answer(s, 'bad', 'unknown-reference');
  assert.equal(a.error.reason, 'unknown-reference');
  assert.match(a.error.message, /deleteEverything/, 'the error does not name the unknown function');

  const check = { read: '{selected: len(scopes.root.selected), title: scopes.root.products.title}' };
  s.send({ call: { call_id: 'check', input_json: json(check) } });
  log(`→ call check ${JSON.stringify(check)}`);
  a = await answer(s, 'check');
  assert.deepEqual(a, { value: { selected: 5, title } }, 'the session changed after the bad messages');
  log('✓ still usable: the rejected patch and the failed call changed nothing');

  section('ExprTool: confirm');
  // A step with confirm asks first: accepted, then declined.
  for (const accepted of [true, false]) {
    const id = accepted ? 'notify-yes' : 'notify-no';
    const confirm = {
      steps: [{
        confirm: 'Tell the user that five products are selected?',
        set: 'scopes.root.notified',
        expr: 'notify({message: "Selected " + string(len(scopes.root.selected)) + " products"})',
      }],
    };
    s.send({ call: { call_id: id, input_json: json(confirm) } });
    log(`→ call ${id} ${JSON.stringify(confirm)}`);
    const cr = await s.expect('confirm_request');
    log(`← confirm call=${cr.call_id} step=${cr.step} text=${JSON.stringify(cr.text)}`);
    assert.deepEqual({ call: cr.call_id, step: cr.step, text: cr.text }, { call: id, step: 0, text: confirm.steps[0].confirm });
    s.send({ confirm_reply: { call_id: id, step: 0, accepted } });
    log(`→ confirm_reply accepted=${accepted}`);
    if (accepted) {
      const nw = await s.expect('step_write');
      log(`← write call=${nw.call_id} step=${nw.step} path=${nw.path} value=${nw.value_json}`);
      assert.deepEqual({ call: nw.call_id, path: nw.path, value: parse(nw.value_json) }, { call: id, path: 'scopes.root.notified', value: { shown: true } });
      assert.deepEqual(await answer(s, id), {});
    } else {
      assert.deepEqual(await answer(s, id), { declined: true });
    }
  }
  log('✓ confirm: accepted ran the step, declined did not');

  section('ExprTool: downloadCsv');
  // A step that runs the client-run downloadCsv, answered from here.
  const download = {
    steps: [{ set: 'scopes.root.export', expr: `downloadCsv({rows: ${SELECTED_ROWS}})` }],
    read: 'scopes.root.export',
  };
  s.send({ call: { call_id: 'download', input_json: json(download) } });
  log(`→ call download ${JSON.stringify(download)}`);
  const fc = await s.expect('function_call');
  const args = parse(fc.args_json);
  log(`← function_call call=${fc.call_id} id=${fc.function_call_id} name=${fc.name} rows=${args.rows?.length} timeout_ms=${fc.timeout_ms}`);
  assert.deepEqual({ call: fc.call_id, name: fc.name }, { call: 'download', name: 'downloadCsv' });
  const wantRows = products.products.items.filter((p) => cheapestSet[p.id]);
  assert.deepEqual(args, { rows: wantRows }, 'downloadCsv was not given the five selected products');
  const csv = toCSV(args.rows);
  const result = { rows: args.rows.length, csv };
  s.send({ function_result: { call_id: fc.call_id, function_call_id: fc.function_call_id, result_json: json(result) } });
  log(`→ function_result rows=${result.rows} csv:\n${csv.trimEnd().replace(/^/gm, '    ')}`);
  const ew = await s.expect('step_write');
  log(`← write call=${ew.call_id} step=${ew.step} path=${ew.path} (${ew.value_json.length} characters)`);
  assert.deepEqual({ call: ew.call_id, path: ew.path, value: parse(ew.value_json) }, { call: 'download', path: 'scopes.root.export', value: result });
  a = await answer(s, 'download');
  assert.deepEqual(a, { value: result }, 'the answer does not carry the CSV');
  log('✓ the answer carries the CSV built here');
}

// rejection prints a Rejected and returns it. Its status is a
// google.rpc.Status: the code a unary call would have ended with, the
// message, and details (google.protobuf.Any, here named by type only),
// among them always a google.rpc.ErrorInfo.
function rejection(rej) {
  const { code, message, details } = rej.status;
  const types = details.map((d) => d.type_url.replace(/.*\//, ''));
  log(`← rejected kind=${rej.kind}${rej.call_id ? ` call=${rej.call_id}` : ''} code=${code} (${grpc.status[code]}) message=${JSON.stringify(message)} details=${types.join(',')}`);
  assert.ok(types.includes('google.rpc.ErrorInfo'), `the rejection's details are [${types}], want a google.rpc.ErrorInfo among them`);
  return rej;
}

// answer waits for call id's Answer, prints it and returns its JSON.
async function answer(s, id, reason = '') {
  const a = await s.expect('answer');
  log(`← answer call=${a.call_id} ${a.answer_json}${a.reason ? ` reason=${a.reason}` : ''}`);
  assert.equal(a.call_id, id);
  assert.equal(a.reason, reason, `answer reason: got ${JSON.stringify(a.reason)}, want ${JSON.stringify(reason)}`);
  assert.equal(a.cancelled, false);
  return parse(a.answer_json);
}

// --- (b) AgentLoop: one turn with the demo model -------------------------

async function agentLoop(addr) {
  log('== AgentLoop.Run');
  const client = new AgentLoop(addr, grpc.credentials.createInsecure());
  const s = new Stream(client.Run(), 'event');
  try {
    await turn(s);
    await s.close('AgentLoop.Run');
    log('← stream closed: OK');
  } finally {
    client.close();
  }
}

async function turn(s) {
  section('AgentLoop: turn');
  const prompt = 'Select the five cheapest products.';
  s.send({
    start: {
      provider: 'demo',
      messages: [{ role: 'ROLE_USER', content: prompt }],
      tools: [{ name: 'expr', executor: 'EXECUTOR_EXPR' }],
      expr_settings: { read: false },
      // Asked before each step's model call; the step waits for the reply.
      hooks: ['HOOK_PREPARE_STEP'],
      // The turn's state, in place before the model is first called.
      state_json: readFileSync(productsFile, 'utf8'),
    },
  });
  log(`→ start provider=demo tools=expr(EXECUTOR_EXPR) hooks=HOOK_PREPARE_STEP user=${JSON.stringify(prompt)} state=demo/products.json`);

  const seen = { steps: [], hooks: [], rejected: [], calls: [], writes: [], results: [], finished: [] };
  const text = new Map(); // step → streamed text
  let pending = ''; // text not printed yet: printed whole when the next event comes
  for (;;) {
    const m = await s.next('an AgentLoop event');
    const ev = m[m.event];
    if (m.event !== 'text_delta' && pending !== '') {
      log(`← text ${JSON.stringify(pending)}`);
      pending = '';
    }
    switch (m.event) {
      case 'step_started':
        seen.steps.push(ev.step);
        log(`← step ${ev.step}`);
        break;
      case 'text_delta':
        text.set(ev.step, (text.get(ev.step) ?? '') + ev.text);
        pending += ev.text;
        break;
      case 'hook_request':
        seen.hooks.push(ev);
        log(`← hook ${ev.hook} id=${ev.hook_id} step=${ev.step}`);
        await prepareStep(s, ev, seen);
        break;
      case 'tool_call_requested':
        seen.calls.push(ev);
        log(`← call ${ev.call.name} id=${ev.call.id} ${ev.call.arguments_json}`);
        assert.equal(ev.run_on_client, false, 'the expr tool should run in the server');
        break;
      case 'state_write':
        seen.writes.push(ev);
        log(`← write call=${ev.call_id} step=${ev.step} expr_step=${ev.expr_step} path=${ev.path} value=${ev.value_json}`);
        break;
      case 'tool_result':
        seen.results.push(ev);
        log(`← result ${ev.name} id=${ev.call_id} ${ev.output_json}${ev.is_error ? ' (error)' : ''}`);
        break;
      case 'step_finished':
        seen.finished.push(ev);
        log(`← step ${ev.step} finished: ${ev.finish_reason}, ${ev.usage?.total_tokens} tokens`);
        break;
      case 'done':
        log(`← done: ${ev.stop_reason} after ${ev.steps.length} steps, ${ev.usage?.total_tokens} tokens: ${JSON.stringify(ev.text)}`);
        checkTurn(seen, text, ev);
        return;
      default:
        assert.fail(`unexpected AgentLoop event ${m.event}: ${JSON.stringify(ev)}`);
    }
  }
}

// prepareStep answers a prepare_step hook. In step 0 it first sends a tool
// output nobody waits for: the turn answers it with Rejected (NOT_FOUND)
// and goes on. The step waits for the hook's reply, so the Rejected comes
// before anything else. The reply makes step 0's tool choice required.
async function prepareStep(s, ev, seen) {
  assert.equal(ev.hook, 'HOOK_PREPARE_STEP');
  if (ev.step === 0) {
    s.send({ tool_output: { call_id: 'nobody', output_json: '{}' } });
    log('→ tool_output call=nobody {}');
    const rej = rejection(await s.expect('rejected'));
    seen.rejected.push(rej);
    assert.deepEqual({ kind: rej.kind, call: rej.call_id, code: rej.status.code },
      { kind: 'tool_output', call: 'nobody', code: grpc.status.NOT_FOUND });
  }
  const reply = { hook_id: ev.hook_id };
  if (ev.step === 0) {
    reply.tool_choice = { mode: 'MODE_REQUIRED' };
  }
  s.send({ hook_reply: reply });
  log(`→ hook_reply id=${ev.hook_id}${reply.tool_choice ? ` tool_choice=${reply.tool_choice.mode}` : ''}`);
}

function checkTurn(seen, text, done) {
  assert.deepEqual(seen.steps, [0, 1], 'want two steps: the tool call, then the answer');
  assert.deepEqual(seen.hooks.map((h) => h.step), [0, 1], 'want a prepare_step hook before each step');
  assert.equal(seen.rejected.length, 1, 'want the stray tool output rejected once');
  assert.equal(seen.calls.length, 1, 'want one tool call');
  const call = seen.calls[0];
  assert.equal(call.call.name, 'expr');
  assert.deepEqual(parse(call.call.arguments_json), { steps: [{ set: 'scopes.root.selected', expr: SELECT_FIVE }] });
  assert.equal(seen.writes.length, 1, 'want one state write');
  const w = seen.writes[0];
  assert.deepEqual({ call: w.call_id, step: w.step, expr_step: w.expr_step, path: w.path },
    { call: call.call.id, step: 0, expr_step: 0, path: 'scopes.root.selected' });
  assert.deepEqual(parse(w.value_json), cheapestSet, 'the write is not the five cheapest products');
  assert.equal(seen.results.length, 1, 'want one tool result');
  const r = seen.results[0];
  assert.deepEqual({ name: r.name, call_id: r.call_id, is_error: r.is_error, output: parse(r.output_json) },
    { name: 'expr', call_id: call.call.id, is_error: false, output: {} });
  assert.deepEqual(seen.finished.map((f) => f.finish_reason), ['tool-calls', 'stop']);
  assert.equal(text.get(0), "I'll select the five cheapest products.");
  const final = 'Done: the five cheapest products are now selected in the list.';
  assert.equal(text.get(1), final);
  assert.equal(done.text, final);
  assert.equal(done.stop_reason, 'STOP_REASON_COMPLETED');
  assert.equal(done.steps.length, 2);
  log(`✓ the turn ran expr once, selected ${cheapest.join(', ')}, and answered`);
}

// --- (c) AgentLoop: a durable turn, its stream dropped and resumed once ------

// resumeOnce starts a detached turn, reads its first events, drops the
// stream (cancels the call, as a client whose connection went away), then
// resumes the turn by its id after the last seq it saw, on a new stream,
// and reads it to done: every event once, seq 1, 2, ... in order.
async function resumeOnce(addr) {
  log('== AgentLoop.Run, dropped and resumed');
  section('AgentLoop: resume');
  const client = new AgentLoop(addr, grpc.credentials.createInsecure());
  try {
    const prompt = 'Select the five cheapest products.';
    const first = new Stream(client.Run(), 'event');
    first.send({
      start: {
        provider: 'demo',
        messages: [{ role: 'ROLE_USER', content: prompt }],
        tools: [{ name: 'expr', executor: 'EXECUTOR_EXPR' }],
        state_json: readFileSync(productsFile, 'utf8'),
        // The turn goes on when its stream goes away, so that it can be
        // resumed.
        detach: true,
      },
    });
    log(`→ start provider=demo tools=expr(EXECUTOR_EXPR) detach=true user=${JSON.stringify(prompt)}`);
    const events = [];
    const show = (m) => log(`← seq=${m.seq} ${m.event}${m.turn_id ? ` turn=${m.turn_id}` : ''}`);
    while (events.length < 3) {
      const m = await first.next('an event before the drop');
      show(m);
      events.push(m);
    }
    const turnId = events[0].turn_id;
    assert.match(turnId, /^[0-9a-f]{32}$/, 'the first event names the turn');
    const last = events[events.length - 1].seq;
    first.call.cancel();
    log(`✗ stream dropped after seq ${last}`);

    const second = new Stream(client.Run(), 'event');
    second.send({ resume: { turn_id: turnId, after_seq: last } });
    log(`→ resume turn=${turnId} after_seq=${last}`);
    for (let i = 0; ; i++) {
      const m = await second.next('an event of the resumed turn');
      show(m);
      if (i === 0) {
        assert.equal(m.turn_id, turnId, "the resumed stream's first event names the turn");
      }
      assert.equal(m.pending, false, 'the turn asks the client nothing');
      events.push(m);
      if (m.event === 'done') {
        break;
      }
    }
    await second.close('the resumed AgentLoop.Run');
    log('← resumed stream closed: OK');

    assert.deepEqual(events.map((m) => Number(m.seq)), events.map((_, i) => i + 1), 'want seq 1, 2, ... once each, in order');
    const of = (kind) => events.filter((m) => m.event === kind).map((m) => m[kind]);
    assert.deepEqual(of('step_started').map((e) => e.step), [0, 1]);
    assert.equal(of('tool_call_requested').length, 1, 'want one tool call');
    assert.deepEqual(of('state_write').map((w) => parse(w.value_json)), [cheapestSet]);
    assert.equal(of('tool_result').length, 1, 'want one tool result');
    const done = of('done')[0];
    assert.equal(done.text, 'Done: the five cheapest products are now selected in the list.');
    assert.equal(done.stop_reason, 'STOP_REASON_COMPLETED');
    log(`✓ resumed after seq ${last}: every event once, seq 1..${events.length} in order, and done`);
  } finally {
    client.close();
  }
}

// --- main -------------------------------------------------------------------

async function main() {
  const addr = process.argv[2];
  if (!addr) {
    console.error('usage: node client.mjs HOST:PORT');
    process.exit(2);
  }
  const deadline = setTimeout(() => {
    console.error(`FAIL [${stage}]: the run took longer than ${RUN_TIMEOUT_MS} ms`);
    process.exit(1);
  }, RUN_TIMEOUT_MS);
  try {
    await exprTool(addr);
    await agentLoop(addr);
    await resumeOnce(addr);
  } catch (err) {
    console.error(`FAIL [${stage}]: ${err.message}`);
    process.exit(1);
  }
  clearTimeout(deadline);
  log('PASS: ExprTool session and AgentLoop turn as expected, the turn resumed once');
}

await main();
