// The Nodeau dashboard page. It reads /api/board (the same views and the same row and
// sentence helpers as the CLI) every few seconds and shows it (a new read only: the same
// read twice is not built again); it writes every text with
// textContent (names and sentences come from users' files); a figure that is missing is
// shown as "unknown", never an error; a moment the board gives as ISO text is shown in the
// reader's own locale and time zone, the ISO text kept in its <time>. It talks to its own
// origin only.
"use strict";

const page = { csrf: null, refreshMs: 2000, timer: null, board: null, shown: false, turns: [] };

function $(selector, root) { return (root || document).querySelector(selector); }

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function shown(value) {
  return value === null || value === undefined || value === "" ? "unknown" : String(value);
}

// An ISO moment with its offset, as Python's isoformat() writes one (microseconds too).
const ISO_MOMENT = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})/g;

// ``text`` appended to ``node``, each ISO moment in it as a <time> in the reader's locale
// and time zone: the board's moments are UTC, with microseconds, which nobody reads.
function withTimes(node, text) {
  let at = 0;
  for (const found of text.matchAll(ISO_MOMENT)) {
    // Date reads milliseconds at most: the digits after them change nothing shown
    const when = new Date(found[0].replace(/(\.\d{3})\d+/, "$1"));
    if (Number.isNaN(when.getTime())) continue;
    node.append(text.slice(at, found.index));
    node.appendChild(el("time", when.toLocaleString(), { datetime: found[0], title: found[0] }));
    at = found.index + found[0].length;
  }
  node.append(text.slice(at));
  return node;
}

function timed(tag, text, attrs) {
  return withTimes(el(tag, null, attrs), String(text));
}

function live(state, text) {
  const badge = $("#live");
  badge.dataset.state = state;
  badge.textContent = text;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin", cache: "no-store" }, options || {}));
  if (response.status === 401) {
    live("token", "needs a fresh address");
    problem("This page's token is no longer valid: run `nodeau dashboard` and open the address it prints.");
    throw new Error("unauthorized");
  }
  return response;
}

function problem(text) {
  const p = $("#problem");
  p.hidden = !text;
  p.textContent = text || "";
}

function note(section, text) {
  const p = $(".note", section);
  if (!p) return;
  p.hidden = !text;
  p.textContent = text || "";
}

// A table of the CLI's headers and rows; a cell the data lacks reads "unknown".
function table(headers, rows, decorate) {
  const t = el("table");
  const head = el("tr");
  for (const h of headers || []) head.appendChild(el("th", h));
  t.appendChild(el("thead")).appendChild(head);
  const body = t.appendChild(el("tbody"));
  (rows || []).forEach((row, i) => {
    const tr = el("tr");
    (headers || []).forEach((h, j) => {
      const value = row ? row[j] : undefined;
      const td = timed("td", shown(value), { "data-column": h });
      if (value === null || value === undefined || value === "") td.className = "unknown";
      tr.appendChild(td);
    });
    if (decorate) decorate(tr, row, i);
    body.appendChild(tr);
  });
  return t;
}

// A table cell that is a number is the index of its text in board.texts: a long text
// repeated in the tables is sent once (apps/dashboard/texts.py).
function expanded(board) {
  const texts = board.texts || [];
  const walk = (value) => {
    if (Array.isArray(value)) { value.forEach(walk); return; }
    if (!value || typeof value !== "object") return;
    for (const [key, inner] of Object.entries(value)) {
      if (key === "rows" && Array.isArray(inner)) {
        inner.forEach((row, i) => { inner[i] = row.map((cell) => (typeof cell === "number" ? texts[cell] : cell)); });
      } else {
        walk(inner);
      }
    }
  };
  walk(board);
  return board;
}

function fill(container, node) {
  container.replaceChildren(node);
}

function lines(list, texts) {
  list.replaceChildren(...(texts || []).map((t) => timed("li", t)));
}

function renderAlerts(board) {
  const list = $("#alerts .alerts");
  const alerts = board.alerts || [];
  if (!alerts.length) {
    list.replaceChildren(el("li", "Nothing needs you now.", { "data-severity": "none" }));
    return;
  }
  list.replaceChildren(...alerts.map((a) => {
    const li = el("li", null, { "data-severity": shown(a.severity), "data-kind": shown(a.kind) });
    li.appendChild(el("strong", shown(a.subject) + ": "));
    withTimes(li, shown(a.sentence));
    return li;
  }));
}

function renderHardware(board, notes) {
  const section = $("#hardware");
  note(section, notes.hardware);
  const hw = board.hardware;
  const box = $(".machines", section);
  if (!hw) { box.replaceChildren(); $(".policy", section).textContent = ""; return; }
  $(".policy", section).textContent = "fleet policy: " + shown(hw.fleet_policy) + " (new placements only)";
  box.replaceChildren(...(hw.machines || []).map((m) => {
    const card = el("div", null, { class: "machine", "data-machine": shown(m.machine) });
    card.appendChild(el("h3", shown(m.machine)));
    const facts = el("dl");
    for (const [k, v] of m.facts || []) { facts.appendChild(el("dt", k)); facts.appendChild(timed("dd", shown(v))); }
    card.appendChild(facts);
    if (m.sentence) card.appendChild(timed("p", m.sentence, { class: "health" }));
    const gpus = m.gpus || {};
    if (!(gpus.rows || []).length) { card.appendChild(el("p", "no GPUs reported", { class: "note" })); return card; }
    const memory = gpus.memory || [];
    const t = table(gpus.headers, gpus.rows, (tr, row, i) => { tr.appendChild(memoryCell(memory[i])); });
    $("thead tr", t).appendChild(el("th", "MEMORY"));
    card.appendChild(t);
    if (m.reading) card.appendChild(el("p", m.reading, { class: "reading muted" }));
    return card;
  }));
}

function percent(part, whole) {
  return Math.min(100, Math.max(0, (100 * part) / whole)).toFixed(2) + "%";
}

// A card's memory: a bar of what Nodeau's ledger reserves there against its total, and on
// it what the card itself reports in use, only where it reports something (a simulated
// card reports nothing: no figure is drawn for it, and the machine's line says why).
function memoryCell(mem) {
  const td = el("td", null, { "data-column": "MEMORY", class: "memory" });
  if (!mem) return td;
  const known = typeof mem.total_bytes === "number" && mem.total_bytes > 0;
  const read = typeof mem.used_bytes === "number";
  if (known) {
    const bar = el("div", null, { class: "bar", role: "img" });
    const reserved = bar.appendChild(el("span", null, { class: "reserved" }));
    reserved.style.width = percent(mem.reserved_bytes, mem.total_bytes); // CSSOM: the CSP allows it
    if (read) bar.appendChild(el("span", null, { class: "used" })).style.width = percent(mem.used_bytes, mem.total_bytes);
    bar.setAttribute("aria-label", "reserved " + mem.reserved + " of " + mem.total + (read ? ", in use " + mem.used : ""));
    td.appendChild(bar);
  }
  td.appendChild(el("div", "reserved " + mem.reserved + " of " + shown(mem.total) + " (Nodeau's ledger)", { "data-figure": "reserved" }));
  td.appendChild(read
    ? el("div", "in use " + mem.used + " (the card's own reading)", { "data-figure": "used" })
    : el("div", "in use: no reading", { "data-figure": "used", class: "unknown" }));
  return td;
}

function renderWorkloads(board, notes) {
  const section = $("#workloads");
  note(section, notes.workloads);
  const w = board.workloads;
  fill($(":scope > .table", section), w ? table(w.headers, w.rows, (tr, row) => { tr.dataset.name = row[0]; }) : el("span"));
  const traffic = $("#traffic");
  note(traffic, notes.traffic);
  const served = board.traffic;
  fill($(".table", traffic), served ? table(served.headers, served.rows, (tr, row) => { tr.dataset.name = row[0]; }) : el("span"));
  const b = board.batches;
  const box = $("#batches");
  note(box, notes.batches);
  if (!b) { fill($(".table", box), el("span")); return; }
  const stoppable = new Set(b.stoppable || []);
  const t = table(b.headers, b.rows, (tr, row) => {
    tr.dataset.name = row[0];
    const td = el("td");
    if (stoppable.has(row[0])) {
      const button = el("button", "Stop", { type: "button", "data-stop": row[0] });
      button.addEventListener("click", () => stopBatch(row[0], button));
      td.appendChild(button);
    }
    tr.appendChild(td);
  });
  $("thead tr", t).appendChild(el("th", ""));
  fill($(".table", box), t);
}

async function stopBatch(name, button) {
  if (!window.confirm("Stop batch job " + name + "? Results already written stay.")) return;
  button.disabled = true;
  const said = $("#batches .said");
  try {
    const response = await api("/api/batches/" + encodeURIComponent(name) + "/stop", {
      method: "POST", headers: { "X-Nodeau-CSRF": page.csrf },
    });
    const body = await response.json();
    said.hidden = false;
    said.textContent = response.ok ? body.sentence : body.error.message;
  } catch (e) {
    said.hidden = false;
    said.textContent = "the stop was not sent: " + e.message;
  }
  refresh();
}

function renderModels(board, notes) {
  const section = $("#models");
  note(section, notes.models);
  fill($(":scope > .table", section), board.models ? table(board.models.headers, board.models.rows) : el("span"));
  const qualification = $("#qualification");
  note(qualification, notes.qualification);
  const q = board.qualification;
  fill($(".table", qualification), q ? table(q.headers, q.rows, (tr, row, i) => {
    tr.dataset.artifact = row[1];
    // each state's evidence, as `nodeau model info` prints it after the state
    Array.from(tr.children).forEach((td, j) => {
      const why = q.evidence[i][j];
      td.dataset.state = j >= 3 ? row[j] : "";
      if (why) td.title = why;
    });
  }) : el("span"));
  const copies = $("#copies");
  note(copies, notes.copies);
  const c = board.copies;
  fill($(".table", copies), c ? table(c.headers, c.rows) : el("span"));
  lines($(".lines", copies), c ? c.lines : []);
}

function renderRecovery(board, notes) {
  const section = $("#recovery");
  note(section, notes.recovery);
  const r = board.recovery;
  fill($(".table", section), r ? table(r.headers, r.rows) : el("span"));
  // after the table: what happens to each one held or recovering, notes
  lines($(".lines", section), r ? r.lines : []);
}

function renderPlan(board, notes) {
  const section = $("#plan");
  note(section, notes.plan);
  lines($(".lines", section), board.plan ? board.plan.lines : []);
}

function renderTargets(board) {
  const select = $("#pg-target");
  const names = (board.workloads && board.workloads.targets) || [];
  const have = Array.from(select.options).map((o) => o.value).filter(Boolean);
  if (names.join("\n") === have.join("\n")) return;
  const chosen = select.value;
  select.replaceChildren(el("option", "choose a serving service", { value: "" }), ...names.map((n) => el("option", n, { value: n })));
  if (names.includes(chosen)) select.value = chosen;
}

function nextFrame() {
  return new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
}

async function render(board) {
  live("live", "live, read " + new Date(board.read_at).toLocaleTimeString());
  $("#live").title = "read at " + board.read_at;
  if (page.board && page.board.read_at === board.read_at) return; // the same read again
  page.board = expanded(board);
  $("#plane").textContent = shown(board.plane);
  const notes = board.notes || {};
  renderAlerts(board);
  renderHardware(board, notes);
  if (!page.shown) {
    // The first board: what the first screen shows (alerts, hardware) is painted before
    // the long tables below it are built (500 workloads on a large fleet), and marked
    // once painted: bench/dashboard.py's first meaningful paint.
    page.shown = true;
    await nextFrame();
    performance.mark("nodeau-board-shown");
  }
  renderWorkloads(board, notes);
  renderModels(board, notes);
  renderRecovery(board, notes);
  renderPlan(board, notes);
  renderTargets(board);
}

// A poll takes the board the server keeps (read again behind it); ``fresh`` waits for a new
// read (the request's Cache-Control: no-cache, which the "no-store" mode sends).
async function refresh(fresh) {
  clearTimeout(page.timer);
  try {
    const response = await api("/api/board", { cache: fresh ? "no-store" : "default" });
    if (!response.ok) throw new Error("the board answered " + response.status);
    await render(await response.json());
    problem("");
  } catch (e) {
    if (e.message === "unauthorized") return; // nothing more to poll for
    live("failed", "not updating");
    problem("The dashboard could not be read: " + e.message);
  }
  if (!document.hidden) page.timer = setTimeout(refresh, page.refreshMs);
}

// -- Playground

function pgShow(task) {
  for (const t of ["chat", "embed", "rerank"]) $("#pg-" + t).hidden = t !== task;
}

function pgAnswered(said) {
  const dl = $("#pg-answered");
  dl.replaceChildren();
  for (const [k, v] of Object.entries(said.answered_by || {})) { dl.appendChild(el("dt", k)); dl.appendChild(el("dd", shown(v), { "data-field": k })); }
  dl.hidden = false;
  $("#pg-curl").textContent = said.snippets.curl;
  $("#pg-python").textContent = said.snippets.python;
  $("#pg-code").hidden = false;
}

function pgError(text) {
  const p = $("#pg-error");
  p.hidden = !text;
  p.textContent = text || "";
}

async function pgPost(task, body) {
  const name = $("#pg-target").value;
  pgError("");
  $("#pg-answer").textContent = "";
  return api("/api/playground/" + encodeURIComponent(name) + "/" + task, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Nodeau-CSRF": page.csrf },
    body: JSON.stringify(body),
  });
}

// The conversation is the page's: each message is sent with the system prompt and every
// turn before it (the server keeps none), and a turn is kept once its answer has come.
function pgTurn(role, content) {
  const li = el("li", null, { class: "turn", "data-role": role });
  li.appendChild(el("span", role === "user" ? "you" : "model", { class: "who" }));
  li.appendChild(el("div", content, { class: "content" }));
  return li;
}

function pgTurns() {
  $("#pg-turns").replaceChildren(...page.turns.map((t) => pgTurn(t.role, t.content)));
  $("#pg-chat-reset").disabled = !page.turns.length;
}

function pgStartOver() {
  page.turns = [];
  pgTurns();
  pgError("");
}

function pgMessages(text) {
  const system = $("#pg-chat-system").value;
  return [
    ...(system.trim() ? [{ role: "system", content: system }] : []),
    ...page.turns,
    { role: "user", content: text },
  ];
}

async function pgChat(event) {
  event.preventDefault();
  const form = $("#pg-chat");
  if (form.dataset.busy === "yes") return; // one message at a time: each carries the turns before it
  form.dataset.busy = "yes";
  $("#pg-turns").dataset.done = "no";
  $("#pg-chat button[type=submit]").disabled = true;
  try {
    await pgConverse($("#pg-chat-text").value);
  } finally {
    form.dataset.busy = "no";
    $("#pg-chat button[type=submit]").disabled = false;
    $("#pg-turns").dataset.done = "yes";
  }
}

async function pgConverse(text) {
  const tokens = parseInt($("#pg-chat-tokens").value, 10);
  const temperature = parseFloat($("#pg-chat-temperature").value);
  const asked = { messages: pgMessages(text), max_tokens: tokens, temperature };
  const response = await pgPost("chat", asked);
  const type = response.headers.get("content-type") || "";
  if (!type.startsWith("text/event-stream")) {
    const body = await response.json();
    if (body.snippets) pgAnswered(body);
    pgError(body.error ? body.error.message : "the endpoint answered " + body.status + ": " + JSON.stringify(body.response));
    return;
  }
  // the new turn is shown as it streams, and kept only once it answered without an error
  const list = $("#pg-turns");
  list.appendChild(pgTurn("user", text));
  const turn = list.appendChild(pgTurn("assistant", ""));
  const answer = $(".content", turn);
  let failed = false;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      const text = data.join("\n");
      if (!text) continue;
      if (kind === "nodeau") { pgAnswered(JSON.parse(text)); continue; }
      if (text === "[DONE]") continue;
      const chunk = JSON.parse(text);
      if (chunk.error) { failed = true; pgError(chunk.error.message || JSON.stringify(chunk.error)); continue; }
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && delta.content) answer.textContent += delta.content;
    }
  }
  if (!failed) {
    page.turns.push({ role: "user", content: text }, { role: "assistant", content: answer.textContent });
    $("#pg-chat-text").value = "";
  }
  pgTurns();
}

async function pgJson(task, body, show) {
  const response = await pgPost(task, body);
  const said = await response.json();
  if (said.snippets) pgAnswered(said);
  if (!response.ok) { pgError(said.error ? said.error.message : "the endpoint answered " + said.status + ": " + JSON.stringify(said.response)); return; }
  $("#pg-answer").textContent = show(said.response);
}

function nonEmptyLines(text) { return text.split("\n").map((s) => s.trim()).filter(Boolean); }

function pgEmbed(event) {
  event.preventDefault();
  pgJson("embed", { input: nonEmptyLines($("#pg-embed-text").value) }, (r) =>
    (r.data || []).map((d) => "#" + d.index + ": " + d.embedding.length + " dimensions [" +
      d.embedding.slice(0, 6).map((x) => x.toFixed(4)).join(", ") + ", ...]").join("\n"));
}

function pgRerank(event) {
  event.preventDefault();
  const documents = nonEmptyLines($("#pg-rerank-docs").value);
  pgJson("rerank", { query: $("#pg-rerank-query").value, documents }, (r) =>
    (r.results || []).slice().sort((a, b) => b.relevance_score - a.relevance_score)
      .map((x) => x.relevance_score.toFixed(4) + "  " + documents[x.index]).join("\n"));
}

async function pgChoose() {
  const name = $("#pg-target").value;
  pgStartOver(); // a conversation is with one service
  pgShow(null);
  $("#pg-task").textContent = "";
  if (!name) return;
  const response = await api("/api/playground/" + encodeURIComponent(name));
  const body = await response.json();
  if (!response.ok) { pgError(body.error.message); return; }
  pgError("");
  $("#pg-task").textContent = name + " serves " + body.task + " (" + shown(body.answered_by.model) + " on " + shown(body.answered_by.machine) + ")";
  pgShow(body.task);
}

async function start() {
  $("#pg-target").addEventListener("change", pgChoose);
  $("#pg-chat").addEventListener("submit", pgChat);
  $("#pg-chat-reset").addEventListener("click", pgStartOver);
  $("#pg-chat-temperature").addEventListener("input", (e) => { $("#pg-chat-temperature-shown").textContent = e.target.value; });
  $("#pg-embed").addEventListener("submit", pgEmbed);
  $("#pg-rerank").addEventListener("submit", pgRerank);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  // the board is asked for beside the session (the first paint waits for one, not both)
  const first = refresh();
  try {
    const response = await api("/api/session");
    const session = await response.json();
    page.csrf = session.csrf;
    page.refreshMs = Math.max(500, session.refresh_s * 1000);
  } catch (e) {
    return;
  }
  await first;
}

document.addEventListener("DOMContentLoaded", start);
