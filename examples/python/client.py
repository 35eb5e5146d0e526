"""A Python client of exprd over grpcio, with stubs generated from ../../proto.

On one ExprTool Session stream it selects the demo's five cheapest products,
answers confirms and runs a function of its own; then one AgentLoop turn
against the demo model, in which the `expr` tool runs here, on the
client's own state; then the same turn, durable, its stream dropped while
the call waits and resumed once. It prints a transcript and checks everything it gets:
any mismatch prints `FAIL [part]: what differed` and exits 1.

    /usr/bin/python3 generate.py                # the stubs, into gen/
    /usr/bin/python3 client.py localhost:50051  # against `exprd --demo`
"""

import argparse
import copy
import json
import os
import queue
import re
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRODUCTS_FILE = HERE.parent.parent / "demo" / "products.json"

# Every wait is bounded: a server that stops answering fails the run.
RECV_TIMEOUT_S = 10
RUN_TIMEOUT_S = 60

# The same expression the README and the demo model use.
SELECT_FIVE = "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"
SELECTED_ROWS = "filter(scopes.root.products.items, scopes.root.selected[.id] ?? false)"
TITLE = "Products (patched from Python)"


class Mismatch(Exception):
    """Something the server sent is not what it should be."""


# stage names the part of the run a failure is in.
stage = "setup"


def section(name):
    global stage
    stage = name


def log(line):
    print(line, flush=True)


def dumps(v):
    """Compact JSON text, as JSON.stringify writes it: what a *_json field
    (a string) carries."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def parse(s):
    return json.loads(s)


def same(a, b):
    """JSON equality that, unlike ==, tells true from 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def check(got, want, what):
    if not same(got, want):
        raise Mismatch(f"{what}: got {dumps(got)}, want {dumps(want)}")


def ok(cond, what):
    if not cond:
        raise Mismatch(what)


def load_stubs(stubs):
    """Imports the generated modules from the directory stubs."""
    sys.path.insert(0, str(stubs))
    try:
        import grpc
        from exprd.v1 import agentloop_pb2, agentloop_pb2_grpc, exprtool_pb2, exprtool_pb2_grpc
    except ImportError as err:
        raise SystemExit(
            f"FAIL [setup]: {err}: generate the stubs into {stubs} first "
            "(/usr/bin/python3 generate.py) and install the packages (install-deps.sh)"
        ) from err
    return grpc, exprtool_pb2, exprtool_pb2_grpc, agentloop_pb2, agentloop_pb2_grpc


class Stream:
    """A bidi call as messages to wait for one at a time, each wait bounded."""

    def __init__(self, method, oneof):
        self.oneof = oneof
        self.requests = queue.Queue()
        self.responses = queue.Queue()
        self.call = method(self._outgoing())
        threading.Thread(target=self._read, daemon=True).start()

    def _outgoing(self):
        while (m := self.requests.get()) is not None:
            yield m

    def _read(self):
        try:
            for m in self.call:
                self.responses.put(("msg", m))
            self.responses.put(("end", None))
        except grpc.RpcError as err:
            self.responses.put(("err", err))

    def _get(self, what):
        try:
            return self.responses.get(timeout=RECV_TIMEOUT_S)
        except queue.Empty:
            raise Mismatch(f"timed out after {RECV_TIMEOUT_S} s waiting for {what}") from None

    def send(self, m):
        self.requests.put(m)

    def next(self, what):
        kind, m = self._get(what)
        if kind == "err":
            raise Mismatch(f"waiting for {what}, the stream failed: {m.code().name} {m.details()}")
        if kind == "end":
            raise Mismatch(f"waiting for {what}, the stream ended")
        return m

    def expect(self, kind):
        """Returns the next message's `kind` member, failing on any other."""
        m = self.next(kind)
        got = m.WhichOneof(self.oneof)
        if got != kind:
            body = str(getattr(m, got)).replace("\n", " ") if got else ""
            raise Mismatch(f"got {got} {{{body}}}, want {kind}")
        return getattr(m, kind)

    def close(self, what):
        """Half-closes and waits for the server to end the stream with OK."""
        self.requests.put(None)
        kind, m = self._get(f"the end of {what}")
        if kind == "err":
            raise Mismatch(f"{what}: the stream ended with {m.code().name} {m.details()}")
        if kind == "msg":
            raise Mismatch(f"{what}: got {m.WhichOneof(self.oneof)} after the last expected message, want the stream's end")

    def cancel(self):
        # Cancelled first: a half-close sent before it would tell the
        # server that no reply can come (a client-run call is then
        # answered as not run), where a cancel leaves a detached turn
        # waiting for its client to resume it.
        self.call.cancel()
        self.requests.put(None)


# --- what the answers must be, computed from the products file -------------

products = json.loads(PRODUCTS_FILE.read_text())
by_price = sorted(products["products"]["items"], key=lambda p: p["price"])
if not by_price[4]["price"] < by_price[5]["price"]:
    raise SystemExit('products.json: a tie at the fifth price makes "the five cheapest" ambiguous')
cheapest = sorted(p["id"] for p in by_price[:5])
cheapest_set = {i: True for i in cheapest}


def csv_field(v):
    s = "" if v is None else v if isinstance(v, str) else dumps(v)
    if re.search(r'[",\r\n]', s) or re.match(r"[ \t]", s):
        return '"' + s.replace('"', '""') + '"'
    return s


def to_csv(rows):
    """exprctl's downloadCsv: a header of the sorted union of the rows' keys,
    strings as they are, null and missing as empty, anything else as its
    JSON; RFC 4180 quoting."""
    header = sorted({k for r in rows for k in r})
    records = [header, *([r.get(k) for k in header] for r in rows)]
    return "".join(",".join(csv_field(v) for v in rec) + "\n" for rec in records)


def status_name(code):
    return {c.value[0]: c.name for c in grpc.StatusCode}.get(code, str(code))


# --- (a) ExprTool: one Session stream ---------------------------------------


def expr_tool(channel):
    log("== ExprTool.Session")
    s = Stream(exprtool_grpc.ExprToolStub(channel).Session, "msg")
    try:
        session(s)
        s.close("ExprTool.Session")
    finally:
        s.cancel()
    log("← stream closed: OK")


def session(s):
    section("ExprTool: open")
    # Open: read on; the demo's server-run notify, and downloadCsv run here.
    s.send(
        et.SessionRequest(
            open=et.Open(
                settings=et.Settings(
                    read=True,
                    functions=[
                        et.Function(name="notify", runner=et.Function.RUNNER_SERVER),
                        et.Function(
                            name="downloadCsv",
                            description="Downloads rows as a CSV file for the user. The columns are the sorted union of the rows' keys.",
                            input_schema_json=dumps(
                                {
                                    "type": "object",
                                    "required": ["rows"],
                                    "additionalProperties": False,
                                    "properties": {"rows": {"type": "array", "items": {"type": "object"}}},
                                }
                            ),
                            output_schema_json=dumps(
                                {
                                    "type": "object",
                                    "required": ["rows", "csv"],
                                    "properties": {"rows": {"type": "integer"}, "csv": {"type": "string"}},
                                }
                            ),
                            runner=et.Function.RUNNER_CLIENT,
                        ),
                    ],
                )
            )
        )
    )
    log("→ open read=true functions=notify(server),downloadCsv(client)")
    opened = s.expect("opened")
    ok(opened.session_id, "Opened has no session_id")
    log(f"← opened session={opened.session_id} timeout_ms={opened.budgets.timeout_ms} max_steps={opened.budgets.max_steps}")

    # The snapshot, then a merge patch on top of it.
    s.send(et.SessionRequest(state=et.State(state_json=PRODUCTS_FILE.read_text(encoding="utf-8"))))
    log(f"→ state demo/products.json ({len(products['products']['items'])} products)")
    patch = {"products": {"title": TITLE}, "currency": "EUR"}
    s.send(et.SessionRequest(state_patch=et.StatePatch(patch_json=dumps(patch))))
    log(f"→ state_patch {dumps(patch)}")

    section("ExprTool: select the five cheapest")
    select = {
        "steps": [{"set": "scopes.root.selected", "expr": SELECT_FIVE}],
        "read": "{selected: sort(keys(scopes.root.selected)), title: scopes.root.products.title, currency: scopes.root.currency}",
    }
    s.send(et.SessionRequest(call=et.Call(call_id="select", input_json=dumps(select))))
    log(f"→ call select {dumps(select)}")
    w = s.expect("step_write")
    log(f"← write call={w.call_id} step={w.step} path={w.path} value={w.value_json}")
    check({"call": w.call_id, "step": w.step, "path": w.path}, {"call": "select", "step": 0, "path": "scopes.root.selected"}, "the write")
    check(parse(w.value_json), cheapest_set, "the write is not the five cheapest products of products.json")
    a = answer(s, "select")
    check(a, {"value": {"selected": cheapest, "title": TITLE, "currency": "EUR"}}, "the answer (the five cheapest ids, the patched title)")
    log(f"✓ the five cheapest: {', '.join(cheapest)}; the patch applied")

    section("ExprTool: bad messages")
    # A patch that is no object is Rejected and changes nothing; a call
    # naming an unknown function is an error for the model to fix.
    s.send(et.SessionRequest(state_patch=et.StatePatch(patch_json=dumps(["not", "an", "object"]))))
    log('→ state_patch ["not","an","object"]')
    rej = rejection(s.expect("rejected"))
    check(
        {"kind": rej.kind, "code": rej.status.code},
        {"kind": "state_patch", "code": grpc.StatusCode.INVALID_ARGUMENT.value[0]},
        "the rejection",
    )
    ok(
        "a patch of the state must be a JSON object, got an array" in rej.status.message,
        f"the rejection's message does not say why: {dumps(rej.status.message)}",
    )

    bad = {"steps": [{"set": "scopes.root.selected", "expr": "deleteEverything()"}]}
    s.send(et.SessionRequest(call=et.Call(call_id="bad", input_json=dumps(bad))))
    log(f"→ call bad {dumps(bad)}")
    a = answer(s, "bad", "unknown-reference")
    check(a.get("error", {}).get("reason"), "unknown-reference", "the error's reason")
    ok("deleteEverything" in a["error"].get("message", ""), f"the error does not name the unknown function: {dumps(a)}")

    probe = {"read": "{selected: len(scopes.root.selected), title: scopes.root.products.title}"}
    s.send(et.SessionRequest(call=et.Call(call_id="check", input_json=dumps(probe))))
    log(f"→ call check {dumps(probe)}")
    check(answer(s, "check"), {"value": {"selected": 5, "title": TITLE}}, "the session after the bad messages")
    log("✓ still usable: the rejected patch and the failed call changed nothing")

    section("ExprTool: confirm")
    # A step with confirm asks first: accepted, then declined.
    for accepted in (True, False):
        call_id = "notify-yes" if accepted else "notify-no"
        confirm = {
            "steps": [
                {
                    "confirm": "Tell the user that five products are selected?",
                    "set": "scopes.root.notified",
                    "expr": 'notify({message: "Selected " + string(len(scopes.root.selected)) + " products"})',
                }
            ]
        }
        s.send(et.SessionRequest(call=et.Call(call_id=call_id, input_json=dumps(confirm))))
        log(f"→ call {call_id} {dumps(confirm)}")
        cr = s.expect("confirm_request")
        log(f"← confirm call={cr.call_id} step={cr.step} text={dumps(cr.text)}")
        check(
            {"call": cr.call_id, "step": cr.step, "text": cr.text},
            {"call": call_id, "step": 0, "text": confirm["steps"][0]["confirm"]},
            "the confirm request",
        )
        s.send(et.SessionRequest(confirm_reply=et.ConfirmReply(call_id=call_id, step=0, accepted=accepted)))
        log(f"→ confirm_reply accepted={str(accepted).lower()}")
        if accepted:
            nw = s.expect("step_write")
            log(f"← write call={nw.call_id} step={nw.step} path={nw.path} value={nw.value_json}")
            check(
                {"call": nw.call_id, "path": nw.path, "value": parse(nw.value_json)},
                {"call": call_id, "path": "scopes.root.notified", "value": {"shown": True}},
                "the accepted step's write",
            )
            check(answer(s, call_id), {}, "the accepted call's answer")
        else:
            check(answer(s, call_id), {"declined": True}, "the declined call's answer")
    log("✓ confirm: accepted ran the step, declined did not")

    section("ExprTool: downloadCsv")
    # A step that runs the client-run downloadCsv, answered from here.
    download = {
        "steps": [{"set": "scopes.root.export", "expr": f"downloadCsv({{rows: {SELECTED_ROWS}}})"}],
        "read": "scopes.root.export",
    }
    s.send(et.SessionRequest(call=et.Call(call_id="download", input_json=dumps(download))))
    log(f"→ call download {dumps(download)}")
    fc = s.expect("function_call")
    args = parse(fc.args_json)
    rows = args.get("rows") if isinstance(args, dict) else None
    log(
        f"← function_call call={fc.call_id} id={fc.function_call_id} name={fc.name} "
        f"rows={len(rows) if isinstance(rows, list) else rows} timeout_ms={fc.timeout_ms}"
    )
    check({"call": fc.call_id, "name": fc.name}, {"call": "download", "name": "downloadCsv"}, "the function call")
    want_rows = [p for p in products["products"]["items"] if p["id"] in cheapest_set]
    check(args, {"rows": want_rows}, "downloadCsv's arguments (the five selected products)")
    csv = to_csv(rows)
    result = {"rows": len(rows), "csv": csv}
    s.send(
        et.SessionRequest(
            function_result=et.FunctionResult(call_id=fc.call_id, function_call_id=fc.function_call_id, result_json=dumps(result))
        )
    )
    indented = "\n".join("    " + line for line in csv.rstrip("\n").split("\n"))
    log(f"→ function_result rows={result['rows']} csv:\n{indented}")
    ew = s.expect("step_write")
    log(f"← write call={ew.call_id} step={ew.step} path={ew.path} ({len(ew.value_json)} characters)")
    check(
        {"call": ew.call_id, "path": ew.path, "value": parse(ew.value_json)},
        {"call": "download", "path": "scopes.root.export", "value": result},
        "the export's write",
    )
    check(answer(s, "download"), {"value": result}, "the answer (the CSV built here)")
    log("✓ the answer carries the CSV built here")


def rejection(rej):
    """Prints a Rejected and returns it. Its status is a google.rpc.Status:
    the code a unary call would have ended with, the message, and details
    (google.protobuf.Any, named here by type only), among them always a
    google.rpc.ErrorInfo."""
    st = rej.status
    types = [d.type_url.rsplit("/", 1)[-1] for d in st.details]
    log(
        f"← rejected kind={rej.kind}"
        + (f" call={rej.call_id}" if rej.call_id else "")
        + f" code={st.code} ({status_name(st.code)}) message={dumps(st.message)} details={','.join(types)}"
    )
    ok("google.rpc.ErrorInfo" in types, f"the rejection's details are {types}, want a google.rpc.ErrorInfo among them")
    return rej


def answer(s, call_id, reason=""):
    """Waits for call_id's Answer, prints it and returns its JSON."""
    a = s.expect("answer")
    log(f"← answer call={a.call_id} {a.answer_json}" + (f" reason={a.reason}" if a.reason else ""))
    check(
        {"call": a.call_id, "reason": a.reason, "cancelled": a.cancelled},
        {"call": call_id, "reason": reason, "cancelled": False},
        "the answer",
    )
    return parse(a.answer_json)


# --- (b) AgentLoop: one turn with the demo model, the tool run here ---------


class ClientState:
    """The UI's state, kept here: the client-run expr tool runs the model's
    calls on it with the stateless ExprTool.Call and applies the writes."""

    def __init__(self, tool, settings, state):
        self.tool = tool
        self.settings = settings
        self.state = state

    def run(self, arguments_json):
        resp = self.tool.Call(
            et.CallRequest(settings=self.settings, state_json=dumps(self.state), input_json=arguments_json),
            timeout=RECV_TIMEOUT_S,
        )
        for w in resp.writes:
            self.set(w.path, parse(w.value_json))
        return resp

    def set(self, path, value):
        keys = path.split(".")
        ok(keys[:2] == ["scopes", "root"] and len(keys) > 2, f"a write to {path}, want one under scopes.root")
        node = self.state
        for k in keys[2:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value


def agent_loop(channel):
    log("== AgentLoop.Run")
    section("AgentLoop: describe expr")
    tool = exprtool_grpc.ExprToolStub(channel)
    settings = et.Settings(read=False)
    d = tool.Describe(et.DescribeRequest(settings=settings), timeout=RECV_TIMEOUT_S)
    check(d.name, "expr", "ExprTool.Describe's tool name")
    ok(d.description and d.input_schema_json, "ExprTool.Describe gave no description or input schema")
    log(f"← describe name={d.name} description={len(d.description)} chars input_schema={len(d.input_schema_json)} chars")
    state = ClientState(tool, settings, copy.deepcopy(products))

    s = Stream(agentloop_grpc.AgentLoopStub(channel).Run, "event")
    try:
        turn(s, d, state)
        s.close("AgentLoop.Run")
    finally:
        s.cancel()
    log("← stream closed: OK")


def turn(s, d, state):
    section("AgentLoop: turn")
    prompt = "Select the five cheapest products."
    # The demo model calls a tool named expr: declared here as client-run,
    # with the expr tool's own description and input schema.
    s.send(
        al.AgentLoopRunRequest(
            start=al.AgentStart(
                provider="demo",
                messages=[al.AgentMessage(role=al.AgentMessage.ROLE_USER, content=prompt)],
                tools=[
                    al.AgentTool(
                        name="expr",
                        description=d.description,
                        parameters_json=d.input_schema_json,
                        executor=al.AgentTool.EXECUTOR_CLIENT,
                    )
                ],
            )
        )
    )
    log(f"→ start provider=demo tools=expr(EXECUTOR_CLIENT) user={dumps(prompt)}")

    seen = {"steps": [], "calls": [], "runs": [], "writes": [], "results": [], "finished": []}
    text = {}  # step → streamed text
    pending = ""  # text not printed yet: printed whole when the next event comes
    while True:
        m = s.next("an AgentLoop event")
        kind = m.WhichOneof("event")
        ev = getattr(m, kind) if kind else None
        if kind != "text_delta" and pending:
            log(f"← text {dumps(pending)}")
            pending = ""
        if kind == "step_started":
            seen["steps"].append(ev.step)
            log(f"← step {ev.step}")
        elif kind == "text_delta":
            text[ev.step] = text.get(ev.step, "") + ev.text
            pending += ev.text
        elif kind == "tool_call_requested" and not ev.run_on_client:
            seen["calls"].append(ev)
            log(f"← call {ev.call.name} id={ev.call.id} {ev.call.arguments_json}")
        elif kind == "tool_call_requested":
            seen["runs"].append(ev)
            log(f"← run_on_client {ev.call.name} id={ev.call.id} step={ev.step}")
            run_tool(s, ev, state)
        elif kind == "state_write":
            seen["writes"].append(ev)
            log(f"← write path={ev.path} value={ev.value_json}")
        elif kind == "tool_result":
            seen["results"].append(ev)
            log(f"← result {ev.name} id={ev.call_id} {ev.output_json}" + (" (error)" if ev.is_error else ""))
        elif kind == "step_finished":
            seen["finished"].append(ev)
            log(f"← step {ev.step} finished: {ev.finish_reason}, {ev.usage.total_tokens} tokens")
        elif kind == "done":
            log(f"← done: {al.AgentDone.StopReason.Name(ev.stop_reason)} after {len(ev.steps)} steps, {ev.usage.total_tokens} tokens: {dumps(ev.text)}")
            check_turn(seen, text, ev, state)
            return
        else:
            raise Mismatch(f"unexpected AgentLoop event {kind}: {str(ev).strip()}")


def run_tool(s, ev, state):
    """Runs a client-run expr call on the client's state and sends its output."""
    check(ev.call.name, "expr", "the client-run tool's name")
    check(parse(ev.call.arguments_json), {"steps": [{"set": "scopes.root.selected", "expr": SELECT_FIVE}]}, "the expr call's arguments")
    resp = state.run(ev.call.arguments_json)
    writes = [{"path": w.path, "value": parse(w.value_json)} for w in resp.writes]
    log(f"  ExprTool.Call on the client's state: answer={resp.answer_json} writes={dumps(writes)}")
    check(writes, [{"path": "scopes.root.selected", "value": cheapest_set}], "ExprTool.Call's writes (the five cheapest)")
    check({"answer": parse(resp.answer_json), "reason": resp.reason}, {"answer": {}, "reason": ""}, "ExprTool.Call's answer")
    # An output for a call nobody waits for is Rejected (NOT_FOUND) and the
    # turn goes on. The turn waits for this call's output, so the Rejected
    # is the next event.
    stray = f"{ev.call.id}-unknown"
    s.send(al.AgentLoopRunRequest(tool_output=al.ToolOutput(call_id=stray, output_json=resp.answer_json)))
    log(f"→ tool_output id={stray} {resp.answer_json}")
    rej = rejection(s.expect("rejected"))
    check(
        {"kind": rej.kind, "call_id": rej.call_id, "code": rej.status.code},
        {"kind": "tool_output", "call_id": stray, "code": grpc.StatusCode.NOT_FOUND.value[0]},
        "the stray tool output's rejection",
    )
    s.send(al.AgentLoopRunRequest(tool_output=al.ToolOutput(call_id=ev.call.id, output_json=resp.answer_json, is_error=bool(resp.reason))))
    log(f"→ tool_output id={ev.call.id} {resp.answer_json}")


def check_turn(seen, text, done, state):
    check(seen["steps"], [0, 1], "the steps (the tool call, then the answer)")
    check(len(seen["calls"]), 1, "tool calls announced")
    call = seen["calls"][0]
    check({"name": call.call.name, "step": call.step}, {"name": "expr", "step": 0}, "the announced call")
    check(
        [{"id": r.call.id, "step": r.step} for r in seen["runs"]],
        [{"id": call.call.id, "step": 0}],
        "the calls run on the client",
    )
    check(len(seen["writes"]), 0, "state writes in the server (the tool ran here)")
    check(state.state.get("selected"), cheapest_set, "the client's state after the turn")
    check(len(seen["results"]), 1, "tool results")
    r = seen["results"][0]
    check(
        {"name": r.name, "call_id": r.call_id, "is_error": r.is_error, "output": parse(r.output_json)},
        {"name": "expr", "call_id": call.call.id, "is_error": False, "output": {}},
        "the tool result",
    )
    check([f.finish_reason for f in seen["finished"]], ["tool-calls", "stop"], "the steps' finish reasons")
    check(text.get(0), "I'll select the five cheapest products.", "step 0's text")
    final = "Done: the five cheapest products are now selected in the list."
    check(text.get(1), final, "step 1's text")
    check(
        {"text": done.text, "stop_reason": done.stop_reason, "steps": len(done.steps)},
        {"text": final, "stop_reason": al.AgentDone.STOP_REASON_COMPLETED, "steps": 2},
        "the done event",
    )
    log(f"✓ the turn ran expr on the client once, selected {', '.join(cheapest)}, and answered")


# --- (c) AgentLoop: a durable turn, its stream dropped and resumed once ------


def resume_once(channel):
    """Starts the same turn detached, drops its stream (cancels the call, as
    a client whose connection went away) when the turn asks for the
    client-run call, then resumes it by its id after the last seq it saw on
    a new stream: the request comes again, marked pending, is answered
    there, and the turn goes on to done. The two streams together bring
    every event once, seq 1, 2, ... in order."""
    log("== AgentLoop.Run, dropped and resumed")
    section("AgentLoop: resume")
    tool = exprtool_grpc.ExprToolStub(channel)
    settings = et.Settings(read=False)
    d = tool.Describe(et.DescribeRequest(settings=settings), timeout=RECV_TIMEOUT_S)
    state = ClientState(tool, settings, copy.deepcopy(products))
    stub = agentloop_grpc.AgentLoopStub(channel)
    prompt = "Select the five cheapest products."

    def show(m):
        kind = m.WhichOneof("event")
        extra = f" turn={m.turn_id}" if m.turn_id else ""
        if kind == "tool_call_requested" and m.tool_call_requested.run_on_client:
            extra += " run_on_client"
        log(f"← seq={m.seq} {kind}{extra}{' pending' if m.pending else ''}")

    first = Stream(stub.Run, "event")
    first.send(
        al.AgentLoopRunRequest(
            start=al.AgentStart(
                provider="demo",
                messages=[al.AgentMessage(role=al.AgentMessage.ROLE_USER, content=prompt)],
                tools=[al.AgentTool(name="expr", description=d.description, parameters_json=d.input_schema_json, executor=al.AgentTool.EXECUTOR_CLIENT)],
                # The turn goes on when its stream goes away, so that it
                # can be resumed.
                detach=True,
            )
        )
    )
    log(f"→ start provider=demo tools=expr(EXECUTOR_CLIENT) detach=true user={dumps(prompt)}")
    events = []
    while True:
        m = first.next("an event before the drop")
        show(m)
        events.append(m)
        if m.WhichOneof("event") == "tool_call_requested" and m.tool_call_requested.run_on_client:
            break
    turn_id, request = events[0].turn_id, events[-1]
    ok(re.fullmatch(r"[0-9a-f]{32}", turn_id), f"the first event names the turn: {turn_id!r}")
    first.cancel()
    log(f"✗ stream dropped after seq {request.seq}, the client-run call unanswered")

    second = Stream(stub.Run, "event")
    try:
        second.send(al.AgentLoopRunRequest(resume=al.AgentResume(turn_id=turn_id, after_seq=request.seq)))
        log(f"→ resume turn={turn_id} after_seq={request.seq}")
        pending = []
        first_message = True
        while True:
            m = second.next("an event of the resumed turn")
            show(m)
            if first_message:
                check(m.turn_id, turn_id, "the turn the resumed stream's first message names")
                first_message = False
            if m.pending:
                # Sent again: the request the first stream left unanswered,
                # as it was, under its seq. Answered here.
                pending.append(m)
                check(
                    {"seq": m.seq, "call": m.tool_call_requested.call.id, "run_on_client": m.tool_call_requested.run_on_client},
                    {"seq": request.seq, "call": request.tool_call_requested.call.id, "run_on_client": True},
                    "the request sent again",
                )
                resp = state.run(m.tool_call_requested.call.arguments_json)
                second.send(al.AgentLoopRunRequest(tool_output=al.ToolOutput(call_id=m.tool_call_requested.call.id, output_json=resp.answer_json)))
                log(f"→ tool_output id={m.tool_call_requested.call.id} {resp.answer_json}")
                continue
            events.append(m)
            if m.WhichOneof("event") == "done":
                break
        second.close("the resumed AgentLoop.Run")
    finally:
        second.cancel()
    log("← resumed stream closed: OK")

    check(len(pending), 1, "requests sent again (pending)")
    check([m.seq for m in events], list(range(1, len(events) + 1)), "the events' seqs (each once, in order)")
    kinds = [m.WhichOneof("event") for m in events]
    check(kinds.count("step_started"), 2, "steps")
    check(kinds.count("tool_result"), 1, "tool results")
    result = next(m.tool_result for m in events if m.WhichOneof("event") == "tool_result")
    check({"call_id": result.call_id, "output": parse(result.output_json)}, {"call_id": request.tool_call_requested.call.id, "output": {}}, "the tool result")
    check(state.state.get("selected"), cheapest_set, "the client's state after the turn")
    done = events[-1].done
    check(done.text, "Done: the five cheapest products are now selected in the list.", "the done event's text")
    log(f"✓ resumed after seq {request.seq}: the call answered once, every event once, seq 1..{len(events)} in order, and done")


# --- main --------------------------------------------------------------------


def watchdog():
    print(f"FAIL [{stage}]: the run took longer than {RUN_TIMEOUT_S} s", file=sys.stderr, flush=True)
    os._exit(1)


def main():
    # The modules are globals, imported once --stubs says where they are.
    global grpc, et, exprtool_grpc, al, agentloop_grpc
    parser = argparse.ArgumentParser(description="Plays an ExprTool session and an AgentLoop turn against exprd --demo.")
    parser.add_argument("addr", metavar="HOST:PORT")
    parser.add_argument("--stubs", default=str(HERE / "gen"), help="the directory generate.py wrote the stubs into (default: gen/ here)")
    opts = parser.parse_args()
    grpc, et, exprtool_grpc, al, agentloop_grpc = load_stubs(Path(opts.stubs))

    deadline = threading.Timer(RUN_TIMEOUT_S, watchdog)
    deadline.daemon = True
    deadline.start()
    try:
        with grpc.insecure_channel(opts.addr) as channel:
            expr_tool(channel)
            agent_loop(channel)
            resume_once(channel)
    except Mismatch as err:
        print(f"FAIL [{stage}]: {err}", file=sys.stderr, flush=True)
        return 1
    except grpc.RpcError as err:
        print(f"FAIL [{stage}]: {err.code().name} {err.details()}", file=sys.stderr, flush=True)
        return 1
    finally:
        deadline.cancel()
    log("PASS: ExprTool session and AgentLoop turn as expected, the turn resumed once")
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main())
