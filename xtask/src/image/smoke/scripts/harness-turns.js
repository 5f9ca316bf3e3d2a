// Drives one harness, started with its manifest command over pipes, through a real turn, a
// kill and a resume: turn one is answered by the fake model with a code word only it knows;
// the process is killed; a new one resumes the saved native id and sends turn two alone, which
// the fake model answers "history seen <code word>" only if the resumed conversation carried
// turn one. Between the two, /tmp is emptied but for the own files of this check, as a new
// container would find it: only /workspace can carry the session over. Exits non-zero,
// naming the harness and the step, on anything else.
//
// What it saw is the evidence of the smoke test, printed last as one `@harness-evidence` line
// (also when a step failed): every record sent and received over the pipes, in order, and the
// files the harness changed anywhere (the root filesystem, the home, /tmp) since the driver
// started, listed after each process was killed. The smoke test normalizes both
// (xtask/src/image/smoke/evidence.rs); nothing is judged here.
// Written without single quotes: the script inlines it as a `node -e` program.
const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const harness = "@HARNESS@";
const command = @COMMAND@;
const token = "@TOKEN@";
const stepLimitMs = @STEP_LIMIT_MS@;
const ownDir = "@OWN_DIR@";
const turnOne = "turn one " + token + ": answer with the code word.";
const turnTwo = "turn two " + token + ": repeat the code word you answered before.";
// Every record on the pipes, in order: { direction, process, record } (or `text` for a stdout
// line that is not JSON).
const transcript = [];
// Files changed after this one was made are writes of the harness (the config the script
// wrote before the driver started is older).
const since = path.join(ownDir, "since");
fs.writeFileSync(since, "");
let processes = 0;

// One harness process over pipes: JSON records on stdout, one per line.
function start(extraArgs) {
  const argv = command.concat(extraArgs);
  // A process group of its own, so that a kill ends whatever the harness started too.
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"], detached: true });
  const proc = { child, argv, records: [], stderr: "", waiters: [], exited: null, index: ++processes };
  let buffered = "";
  child.stdout.on("data", (chunk) => {
    buffered += chunk;
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!line) continue;
      let record;
      try { record = JSON.parse(line); } catch (err) {
        proc.stderr += "(stdout, not JSON) " + line + "\n";
        transcript.push({ direction: "received", process: proc.index, text: line });
        continue;
      }
      transcript.push({ direction: "received", process: proc.index, record });
      proc.records.push(record);
      proc.waiters = proc.waiters.filter((w) => !w.test(record));
    }
  });
  child.stderr.on("data", (chunk) => (proc.stderr += chunk));
  child.on("exit", (status, signal) => {
    proc.exited = signal || "status " + status;
    for (const w of proc.waiters) w.fail("exited (" + proc.exited + ")");
    proc.waiters = [];
  });
  proc.send = (record) => {
    transcript.push({ direction: "sent", process: proc.index, record });
    child.stdin.write(JSON.stringify(record) + "\n");
  };
  // Resolves with the first record (already seen or still to come) that `match` accepts.
  proc.waitFor = (what, match) => new Promise((resolve, reject) => {
    const fail = (why) => {
      clearTimeout(timer);
      reject(new Error(harness + ": " + why + " while waiting for " + what + "\n" + evidence(proc)));
    };
    const timer = setTimeout(() => fail("no answer within " + stepLimitMs / 1000 + " s"), stepLimitMs);
    const found = proc.records.find(match);
    if (found) { clearTimeout(timer); return resolve(found); }
    if (proc.exited) return fail("exited (" + proc.exited + ")");
    proc.waiters.push({
      fail,
      test: (record) => { if (!match(record)) return false; clearTimeout(timer); resolve(record); return true; },
    });
  });
  proc.kill = () => new Promise((resolve) => {
    if (proc.exited) return resolve();
    child.on("exit", () => resolve());
    process.kill(-child.pid, "SIGKILL");
  });
  return proc;
}

function evidence(proc) {
  const last = proc.records.slice(-8).map((r) => JSON.stringify(r).slice(0, 400)).join("\n");
  return "command: " + proc.argv.join(" ") + "\nlast records:\n" + last + "\nstderr:\n" + proc.stderr.slice(-1500);
}

let nextId = 1;
// A JSON-RPC 2.0 request (Codex omits the "jsonrpc" member, ACP requires it); resolves with
// its result, rejects with its error.
async function call(proc, method, params, jsonrpc) {
  const id = nextId++;
  proc.send(Object.assign(jsonrpc ? { jsonrpc: "2.0" } : {}, { id, method, params }));
  const answer = await proc.waitFor(method + " (id " + id + ")", (r) => r.id === id && !r.method);
  if (answer.error) throw new Error(harness + ": " + method + " failed: " + JSON.stringify(answer.error) + "\n" + evidence(proc));
  return answer.result;
}

// Each harness: `first` runs turn one and returns the native id and the reply, `resume`
// starts on that id, runs turn two and returns the reply.
const harnesses = {
  // codex app-server (protocol from `codex app-server generate-json-schema`, codex-cli 0.171.0):
  // thread/start or thread/resume, then turn/start; the reply is the agentMessage item.
  codex: {
    async first(proc) {
      await codexInitialize(proc);
      const started = await call(proc, "thread/start", { cwd: "/workspace" });
      return { id: started.thread.id, reply: await codexTurn(proc, started.thread.id, turnOne) };
    },
    async resume(proc, id) {
      await codexInitialize(proc);
      const resumed = await call(proc, "thread/resume", { threadId: id, cwd: "/workspace" });
      return { id: resumed.thread.id, reply: await codexTurn(proc, resumed.thread.id, turnTwo) };
    },
  },
  // claude -p --input-format stream-json: the init record names the session; a turn ends with
  // its `result` record. Resumed with `--resume <session id>`.
  "claude-code": {
    args: (id) => ["--resume", id],
    async first(proc) { return claudeTurn(proc, turnOne); },
    async resume(proc) { return claudeTurn(proc, turnTwo); },
  },
  // opencode acp (Agent Client Protocol v1): session/new or session/load, then session/prompt;
  // the reply is the agent_message_chunk updates of that prompt.
  opencode: {
    async first(proc) {
      await acpInitialize(proc);
      const session = await call(proc, "session/new", { cwd: "/workspace", mcpServers: [] }, true);
      return { id: session.sessionId, reply: await acpPrompt(proc, session.sessionId, turnOne) };
    },
    async resume(proc, id) {
      const init = await acpInitialize(proc);
      if (!init.agentCapabilities || !init.agentCapabilities.loadSession) {
        throw new Error("opencode: initialize does not offer loadSession: " + JSON.stringify(init));
      }
      await call(proc, "session/load", { sessionId: id, cwd: "/workspace", mcpServers: [] }, true);
      return { id, reply: await acpPrompt(proc, id, turnTwo) };
    },
  },
  // pi --mode rpc (docs/rpc.md, docs/rpc-commands.md of pi-coding-agent 1.6.0): `prompt`, then
  // events until `agent_settled`; `get_state` names the session. Resumed with `--session <id>`.
  pi: {
    args: (id) => ["--session", id],
    async first(proc) { return piTurn(proc, turnOne); },
    async resume(proc) { return piTurn(proc, turnTwo); },
  },
};

async function codexInitialize(proc) {
  await call(proc, "initialize", { clientInfo: { name: "coding-agent-smoke", title: "Coding agent template smoke test", version: "0.1.0" } });
  proc.send({ method: "initialized" });
}

async function codexTurn(proc, threadId, text) {
  const seen = proc.records.length;
  const turn = await call(proc, "turn/start", { threadId, input: [{ type: "text", text }] });
  const turnId = turn.turn.id;
  const fresh = (r) => proc.records.indexOf(r) >= seen;
  const done = await proc.waitFor("turn/completed", (r) => r.method === "turn/completed" && fresh(r) && r.params.turn.id === turnId);
  if (done.params.turn.status !== "completed") {
    throw new Error("codex: the turn ended " + JSON.stringify(done.params.turn) + "\n" + evidence(proc));
  }
  return proc.records
    .filter((r) => fresh(r) && r.method === "item/completed" && r.params.item.type === "agentMessage")
    .map((r) => r.params.item.text).join("\n");
}

async function claudeTurn(proc, text) {
  const seen = proc.records.length;
  proc.send({ type: "user", message: { role: "user", content: [{ type: "text", text }] } });
  const result = await proc.waitFor("the result of the turn", (r) => r.type === "result" && proc.records.indexOf(r) >= seen);
  if (result.is_error) throw new Error("claude-code: the turn failed: " + JSON.stringify(result) + "\n" + evidence(proc));
  return { id: result.session_id, reply: String(result.result) };
}

async function acpInitialize(proc) {
  return call(proc, "initialize", { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false } }, true);
}

async function acpPrompt(proc, sessionId, text) {
  const seen = proc.records.length;
  const answer = await call(proc, "session/prompt", { sessionId, prompt: [{ type: "text", text }] }, true);
  if (answer.stopReason !== "end_turn") {
    throw new Error("opencode: the prompt stopped with " + JSON.stringify(answer) + "\n" + evidence(proc));
  }
  return proc.records
    .filter((r, i) => i >= seen && r.method === "session/update" && r.params.update.sessionUpdate === "agent_message_chunk")
    .map((r) => r.params.update.content.text || "").join("");
}

async function piTurn(proc, text) {
  const seen = proc.records.length;
  proc.send({ id: "prompt-" + seen, type: "prompt", message: text });
  const fresh = (r) => proc.records.indexOf(r) >= seen;
  const settled = await proc.waitFor("agent_settled", (r) => r.type === "agent_settled" && fresh(r));
  if (settled.aborted) throw new Error("pi: the run was aborted\n" + evidence(proc));
  const replies = proc.records.filter((r) => fresh(r) && r.type === "message_end" && r.message.role === "assistant");
  const last = replies[replies.length - 1];
  if (!last || last.message.stopReason === "error") {
    throw new Error("pi: no assistant message ended the turn\n" + evidence(proc));
  }
  const reply = last.message.content.filter((c) => c.type === "text").map((c) => c.text).join("");
  proc.send({ id: "state-" + seen, type: "get_state" });
  const state = await proc.waitFor("get_state", (r) => r.id === "state-" + seen && r.type === "response");
  return { id: state.data.sessionId, reply };
}

// The files (anything but directories) changed since the driver started: on the root
// filesystem (`-xdev` keeps out /proc, /sys, /dev and the home and /tmp mounts), then in the
// home and in /tmp but for the own directory of this check.
function changedFiles() {
  const find = (args) => {
    let out;
    try { out = execFileSync("find", args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }); } catch (err) { out = String(err.stdout || ""); }
    return out.split("\0").filter(Boolean);
  };
  const home = process.env.HOME;
  return find(["/", "-xdev", "!", "-type", "d", "-cnewer", since, "-print0"])
    .concat(find([home, "/tmp", "-xdev", "-path", ownDir, "-prune", "-o", "!", "-type", "d", "-cnewer", since, "-print0"]));
}
const written = new Set();
function noteWritten() { for (const file of changedFiles()) written.add(file); }

// The native session id, once turn one named it.
let sessionId = null;
// The files below the home that name the session, in their name or their content: where the
// harness keeps what a resume needs.
function filesNaming(id) {
  const home = process.env.HOME + "/";
  return Array.from(written).sort().filter((file) => {
    if (!file.startsWith(home)) return false;
    if (path.basename(file).includes(id)) return true;
    try {
      const stat = fs.statSync(file);
      return stat.isFile() && stat.size <= 64 * 1024 * 1024 && fs.readFileSync(file).includes(id);
    } catch (err) { return false; }
  });
}

function printEvidence() {
  noteWritten();
  const session = sessionId ? { id: sessionId, files: filesNaming(sessionId) } : null;
  console.log("@harness-evidence " + JSON.stringify({ transcript, written: Array.from(written).sort(), session }));
}

async function main() {
  const driver = harnesses[harness];
  if (!driver) {
    throw new Error(harness + ": harness-turns.js has no driver for this harness; add its native protocol there");
  }
  const first = start([]);
  const one = await driver.first(first);
  const code = (/code word ([0-9a-f]{12})/.exec(one.reply) || [])[1];
  if (!one.id || !code) {
    throw new Error(harness + ": turn one gave no native id or no code word: " + JSON.stringify(one) + "\n" + evidence(first));
  }
  sessionId = one.id;
  console.log(harness + ": turn one answered \"" + one.reply.trim() + "\" in session " + one.id);
  await first.kill();
  console.log(harness + ": killed the first process (" + first.exited + ")");
  // Before /tmp is emptied: what the first process left there counts too.
  noteWritten();
  const cleared = fs.readdirSync("/tmp").filter((entry) => path.join("/tmp", entry) !== ownDir);
  for (const entry of cleared) fs.rmSync(path.join("/tmp", entry), { recursive: true, force: true });
  console.log(harness + ": emptied /tmp of " + (cleared.length ? cleared.join(", ") : "nothing"));

  const second = start(driver.args ? driver.args(one.id) : []);
  const two = await driver.resume(second, one.id);
  if (!two.reply.includes("history seen " + code)) {
    throw new Error(harness + ": the resumed turn did not carry turn one (the fake model answered \"" + two.reply.trim() + "\"; expected \"history seen " + code + "\")\n" + evidence(second));
  }
  if (two.id !== one.id) {
    throw new Error(harness + ": resumed as session " + two.id + ", not " + one.id);
  }
  console.log(harness + ": resumed session " + two.id + ", turn two answered \"" + two.reply.trim() + "\"");
  await second.kill();
}

main().then(
  () => { printEvidence(); process.exit(0); },
  (err) => { console.error(err.message); printEvidence(); process.exit(1); },
);
