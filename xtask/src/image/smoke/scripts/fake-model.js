// A fake model on loopback for the harness turn checks: it answers the three wire protocols the
// harnesses speak, streaming, and it judges the conversation it is sent.
//
// - turn one (a request whose text holds "turn one @TOKEN@") is answered "code word <CODE>",
//   CODE being drawn here at start and known to nobody else;
// - turn two ("turn two @TOKEN@") is answered "history seen <CODE>" only when the same request
//   also carries turn one and the code word answered to it, that is when the resumed harness
//   sent the saved conversation back; otherwise "history missing", which the driver rejects;
// - any other request (a title, a quota probe) gets a short neutral answer.
//
// Every request is logged, one JSON line, to @LOG@; the port is printed on stdout.
// Written without single quotes: the script inlines it as a `node -e` program.
const http = require("http");
const crypto = require("crypto");
const fs = require("fs");

const token = "@TOKEN@";
const code = crypto.randomBytes(6).toString("hex");
const log = (entry) => fs.appendFileSync("@LOG@", JSON.stringify(entry) + "\n");

function answerFor(text) {
  if (text.includes("turn two " + token)) {
    const carried = text.includes("turn one " + token) && text.includes("code word " + code);
    return { turn: 2, carried, reply: carried ? "history seen " + code : "history missing" };
  }
  if (text.includes("turn one " + token)) return { turn: 1, reply: "code word " + code };
  return { turn: 0, reply: "ok" };
}

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const [name, data] of events) {
    if (name) res.write("event: " + name + "\n");
    res.write("data: " + (typeof data === "string" ? data : JSON.stringify(data)) + "\n\n");
  }
  res.end();
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const usage = { input_tokens: 10, output_tokens: 5, total_tokens: 15 };

// OpenAI Responses API streaming events (platform.openai.com "Streaming API responses"), the
// wire Codex uses with `wire_api = "responses"`: Codex 0.171.0 ends the turn at
// `response.completed` and takes the message from the `response.output_item.done` item.
function responses(res, body, reply) {
  const id = "resp_" + crypto.randomBytes(8).toString("hex");
  const itemId = "msg_" + crypto.randomBytes(8).toString("hex");
  const item = {
    type: "message", id: itemId, role: "assistant", status: "completed",
    content: [{ type: "output_text", text: reply, annotations: [] }],
  };
  const response = { id, object: "response", created_at: Math.floor(Date.now() / 1000),
    model: body.model, status: "completed", output: [item],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } };
  sse(res, [
    ["response.created", { type: "response.created", response: { ...response, status: "in_progress", output: [] } }],
    ["response.output_item.added", { type: "response.output_item.added", output_index: 0,
      item: { ...item, status: "in_progress", content: [] } }],
    ["response.output_text.delta", { type: "response.output_text.delta", item_id: itemId,
      output_index: 0, content_index: 0, delta: reply }],
    ["response.output_item.done", { type: "response.output_item.done", output_index: 0, item }],
    ["response.completed", { type: "response.completed", response }],
  ]);
}

// Anthropic Messages API streaming events (docs.anthropic.com "Streaming Messages": message_start,
// content_block_start/delta/stop, message_delta with the stop reason, message_stop).
function messages(res, body, reply) {
  const message = { id: "msg_" + crypto.randomBytes(8).toString("hex"), type: "message",
    role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 1 } };
  if (!body.stream) {
    return json(res, 200, { ...message, content: [{ type: "text", text: reply }],
      stop_reason: "end_turn", usage: { input_tokens: 10, output_tokens: 5 } });
  }
  sse(res, [
    ["message_start", { type: "message_start", message }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: reply } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 5 } }],
    ["message_stop", { type: "message_stop" }],
  ]);
}

// OpenAI Chat Completions streaming chunks (`chat.completion.chunk`, then `[DONE]`).
function chatCompletions(res, body, reply) {
  const base = { id: "chatcmpl-" + crypto.randomBytes(8).toString("hex"), object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000), model: body.model };
  if (!body.stream) {
    return json(res, 200, { ...base, object: "chat.completion", choices: [{ index: 0,
      message: { role: "assistant", content: reply }, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
  }
  sse(res, [
    [null, { ...base, choices: [{ index: 0, delta: { role: "assistant", content: reply }, finish_reason: null }] }],
    [null, { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }],
    [null, "[DONE]"],
  ]);
}

const server = http.createServer((req, res) => {
  let raw = "";
  req.on("data", (chunk) => (raw += chunk));
  req.on("end", () => {
    const path = req.url.split("?")[0];
    let body = {};
    try { body = raw ? JSON.parse(raw) : {}; } catch (err) { body = {}; }
    const answer = answerFor(raw);
    log({ method: req.method, path, turn: answer.turn, carried: answer.carried, reply: answer.reply });
    if (req.method === "GET" && path.endsWith("/models")) {
      return json(res, 200, { object: "list", data: [{ id: "fake-model", object: "model" }] });
    }
    if (path.endsWith("/messages/count_tokens")) return json(res, 200, { input_tokens: 10 });
    if (path.endsWith("/responses")) return responses(res, body, answer.reply);
    if (path.endsWith("/messages")) return messages(res, body, answer.reply);
    if (path.endsWith("/chat/completions")) return chatCompletions(res, body, answer.reply);
    json(res, 404, { error: { message: "the fake model does not serve " + path } });
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
