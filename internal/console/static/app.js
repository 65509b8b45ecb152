// Buzz console. Everything that comes from messages, prompts or the agent is untrusted: it is
// only ever put into the page with textContent (see el()), never as HTML.
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);

// el builds an element; string children become text nodes, so they are never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

async function api(path, opts) {
  opts = opts || {};
  opts.headers = Object.assign({ "X-Buzz-Token": token }, opts.headers || {});
  const r = await fetch(path, opts);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

const S = {
  mode: "",              // "full" (chat + activity) or "activity", from /api/state
  controls: false,       // POST /api/control works: Stop and the model field are shown
  view: "chat",
  current: "",           // selected channel id
  channels: new Map(),   // id → {id, name, members}
  messages: new Map(),   // channel id → Map(event id → message)
  reactions: new Map(),  // target event id → Map(reaction id → reaction)
  typing: new Map(),     // channel id + "/" + thread root ("" for the channel) → expiry (ms)
  loaded: new Set(),     // channels whose history is loaded
  owner: null,
  agent: null,
  replyTo: null,         // message being replied to
  seenSeq: new Set(),
  acts: new Map(),       // channel id → {root, turns: Map(turnId → turn)}
  sessions: new Map(),   // session id → {channel, turn}
  pending: new Map(),    // session id → events that arrived before we knew their channel
  attachments: [],       // files uploaded for the next message (POST /api/upload answers)
};

// ---------- channels & tabs ----------

function channelName(id) {
  const c = S.channels.get(id);
  return c && c.name ? "#" + c.name : "#" + id.slice(0, 8);
}

function renderChannels() {
  const ul = $("channels");
  ul.replaceChildren();
  for (const c of S.channels.values()) {
    const turns = S.acts.has(c.id) ? S.acts.get(c.id).turns.size : 0;
    // The stack's own #general is marked; any other channel names its owners, so a lookalike
    // "#general" made by someone else shows whose it is.
    const owners = (c.owners || []).map((p) => p.name).join(", ");
    const mark = c.home
      ? el("span", { class: "home", title: "this stack's own channel", text: "★" })
      : owners ? el("span", { class: "owners", title: "channel owners", text: "by " + owners }) : null;
    ul.append(el("li", {
      class: c.id === S.current ? "active" : "", "data-channel": c.id,
      onclick: () => selectChannel(c.id),
    }, channelName(c.id), c.type === "forum" ? el("span", { class: "forum", title: "a forum: posts and comments", text: "forum" }) : null, mark, turns ? el("span", { class: "badge", title: "agent turns", text: turns + (turns === 1 ? " turn" : " turns") }) : null));
  }
}

function ensureChannel(id) {
  if (!id || S.channels.has(id)) return;
  S.channels.set(id, { id, name: "", members: [] });
  renderChannels();
  if (!S.current) selectChannel(id);
}

function selectChannel(id) {
  S.current = id;
  S.replyTo = null;
  renderChannels();
  $("channel-title").textContent = channelName(id);
  $("activity-title").textContent = "Agent activity in " + channelName(id);
  $("compose-text").placeholder = "Message " + channelName(id) + " — @name mentions a member";
  renderReplyBar();
  renderActivityChannel();
  if (S.mode === "full") loadHistory(id);
}

function setView(v) {
  S.view = v;
  $("tab-chat").classList.toggle("active", v === "chat");
  $("tab-activity").classList.toggle("active", v === "activity");
  $("chat-view").hidden = v !== "chat";
  $("activity-view").hidden = v !== "activity";
  if (location.hash !== "#" + v) history.replaceState(null, "", "#" + v + "");
}

// ---------- chat ----------

async function loadState() {
  const st = await api("/api/state");
  S.mode = st.mode;
  if (st.mode !== "full") {
    $("tab-chat").hidden = true;
    setView("activity");
    return;
  }
  S.owner = st.owner;
  S.agent = st.agent;
  S.controls = !!st.controls;
  showControls();
  $("who").textContent = "posting as " + st.owner.name + (st.agent ? " · agent: @" + st.agent.name : "");
  // The server's order (home first, then by name and id); channels seen only in activity keep
  // their place after it.
  const seen = S.channels;
  S.channels = new Map(st.channels.map((c) => [c.id, c]));
  for (const [id, c] of seen) if (!S.channels.has(id)) S.channels.set(id, c);
  renderChannels();
  loadMemory();
  loadTurns();
  // Activity may have selected a channel before its name was known: refresh title and history.
  if (S.current) selectChannel(S.current);
  else if (st.channels.length) selectChannel(st.channels[0].id);
}

// The agent's core memory, read with the owner's key: the profile it starts each session with.
const MEMORY_TEXT = {
  absent: "(none yet: the agent is asked to write one with buzz mem set core -)",
  unreadable: "(the relay holds a core record that cannot be read)",
};

async function loadMemory() {
  const m = await api("/api/memory").catch((e) => ({ state: "error", error: e.message }));
  if (m.state === "none") return;
  $("memory").hidden = false;
  const pre = $("memory-core");
  pre.textContent = m.state === "found" ? m.profile
    : MEMORY_TEXT[m.state] || "(could not load: " + (m.error || m.state) + ")";
  pre.classList.toggle("muted", m.state !== "found");
}

// The agent's recent turns from its NIP-AM metrics (encrypted to the owner): tokens and cost.
function fmtTokens(n) { return n == null ? "?" : Number(n).toLocaleString(); }
function fmtCost(c) { return c == null ? "cost ?" : "$" + Number(c).toFixed(c < 0.01 ? 4 : 2); }

async function loadTurns() {
  const rows = await api("/api/turns").catch(() => null);
  if (!rows) return;
  $("turns").hidden = rows.length === 0;
  $("turns-list").replaceChildren(...rows.map((r) => el("li", { class: "turn-row", "data-event": r.eventId },
    el("span", { class: "time", text: new Date(r.timestamp).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) }), " ",
    el("span", { class: "chan", text: r.channelId ? channelName(r.channelId) : "" }), " ",
    el("span", { class: "tokens", title: "input " + fmtTokens(r.inputTokens) + " · output " + fmtTokens(r.outputTokens),
      text: fmtTokens(r.totalTokens) + " tok" }), " ",
    el("span", { class: "cost", text: fmtCost(r.costUsd) }))));
}

async function loadHistory(id) {
  try {
    const msgs = await api("/api/messages?channel=" + encodeURIComponent(id));
    const m = S.messages.get(id) || new Map();
    for (const x of msgs) {
      m.set(x.id, x);
      for (const r of x.reactions || []) storeReaction(r);
    }
    S.messages.set(id, m);
    S.loaded.add(id);
    if (id === S.current) renderMessages();
  } catch (e) {
    $("compose-error").textContent = "Could not load messages: " + e.message;
  }
}

function addMessage(m) {
  if (!S.messages.has(m.channel)) S.messages.set(m.channel, new Map());
  S.messages.get(m.channel).set(m.id, m);
  if (m.channel === S.current) renderMessages();
}

// storeReaction remembers a reaction under its target; false if it was already known.
function storeReaction(r) {
  if (!S.reactions.has(r.target)) S.reactions.set(r.target, new Map());
  const rs = S.reactions.get(r.target);
  if (rs.has(r.id)) return false;
  rs.set(r.id, r);
  return true;
}

function addReaction(r) {
  if (storeReaction(r) && r.channel === S.current) renderMessages();
}

// removeReactions drops reactions a kind 5 named, if their author sent it.
function removeReactions(d) {
  const ids = new Set(d.ids || []);
  let changed = false;
  for (const rs of S.reactions.values()) {
    for (const [id, r] of rs) {
      if (ids.has(id) && r.pubkey === d.pubkey) { rs.delete(id); changed = true; }
    }
  }
  if (changed && d.channel === S.current) renderMessages();
}

// TYPING_TTL: the agent sends typing every 3 s while it works; a few missed ones mean it stopped.
const TYPING_TTL = 8000;

function addTyping(t) {
  const key = t.channel + "/" + (t.root || "");
  const fresh = !S.typing.has(key);
  S.typing.set(key, Date.now() + TYPING_TTL);
  setTimeout(() => {
    if ((S.typing.get(key) || 0) <= Date.now()) {
      S.typing.delete(key);
      if (t.channel === S.current) renderMessages();
    }
  }, TYPING_TTL + 50);
  if (fresh && t.channel === S.current) renderMessages();
}

function typingEl(channel, root) {
  if (!S.typing.has(channel + "/" + (root || ""))) return null;
  const who = (S.agent && S.agent.name) || "agent";
  return el("div", { class: "typing", "data-root": root || "", text: who + " is working…" });
}

// reactionsEl groups a message's reactions by emoji: "👍 2", naming who reacted on hover.
function reactionsEl(id) {
  const rs = S.reactions.get(id);
  if (!rs || !rs.size) return null;
  const groups = new Map(); // emoji → names
  for (const r of rs.values()) {
    const e = r.emoji === "+" || r.emoji === "" ? "👍" : r.emoji === "-" ? "👎" : r.emoji;
    if (!groups.has(e)) groups.set(e, []);
    if (!groups.get(e).includes(r.name)) groups.get(e).push(r.name);
  }
  return el("div", { class: "reactions" }, ...[...groups].map(([e, names]) =>
    el("span", { class: "reaction", title: names.join(", "), "data-emoji": e, text: e + " " + names.length })));
}

// bodyNodes renders message text with @mentions of known names highlighted — as text nodes.
function bodyNodes(text) {
  const names = [];
  const c = S.channels.get(S.current);
  for (const p of (c && c.members) || []) if (p.name) names.push(p.name);
  // A NIP-27 mention of a member (nostr:npub1…, as the agent writes them) reads as @name.
  text = text.replace(/nostr:(npub1[02-9ac-hj-np-z]+)/g, (whole, npub) => {
    const p = ((c && c.members) || []).find((x) => x.npub === npub);
    return p && p.name ? "@" + p.name : whole;
  });
  if (!names.length) return [text];
  names.sort((a, b) => b.length - a.length);
  const esc = names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const re = new RegExp("@(" + esc.join("|") + ")(?![\\w.-])", "gi");
  const out = [];
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    out.push(text.slice(last, m.index));
    out.push(el("span", { class: "mention", text: m[0] }));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

// System rows (kind 40099) the page shows, by type; the server passes only rows signed by the
// relay or by the agent they name as target. Unknown types are dropped, as Buzz Desktop does.
const SYSTEM_ROWS = {
  agent_turn_cancelled: (a, t) => t + " stopped its turn (cancelled by " + a + ")",
  agent_turn_cancel_noop: (a, t) => t + " had no turn to cancel",
  agent_session_rotated_in_flight: (a, t) => t + " stopped its turn and starts a fresh session",
  agent_session_rotated: (a, t) => t + " starts a fresh session next time",
  agent_session_rotate_noop: (a, t) => t + " had no session to rotate",
  agent_shutdown: (a, t) => t + " is shutting down (asked by " + a + ")",
  status: (a, t) => t + " reported its status",
  budget: (a, t) => t + " answered !budget (today's spend cap)",
  budget_warning: (a, t) => t + " has spent 80% of today's cap",
  channel_created: (a) => a + " created the channel",
  channel_updated: (a) => a + " updated the channel",
  channel_archived: (a) => a + " archived the channel",
  channel_unarchived: (a) => a + " unarchived the channel",
  channel_deleted: (a) => a + " deleted the channel",
  member_joined: (a, t) => (a === t ? t + " joined" : a + " added " + t),
  member_left: (a, t) => t + " left",
  member_removed: (a, t) => a + " removed " + t,
  role_changed: (a, t) => a + " changed " + t + "'s role",
  message_deleted: (a) => a + " deleted a message",
  visibility_changed: (a) => a + " changed who can see the channel",
};

function personName(pk) {
  if (!pk) return "someone";
  if (S.agent && S.agent.pubkey === pk) return "@" + S.agent.name;
  if (S.owner && S.owner.pubkey === pk) return S.owner.name;
  const c = S.channels.get(S.current);
  const p = c && (c.members || []).find((x) => x.pubkey === pk);
  return p && p.name ? p.name : pk.slice(0, 8) + "…";
}

function systemRowEl(m) {
  const say = SYSTEM_ROWS[m.system.type];
  if (!say) return null;
  const time = new Date(m.createdAt * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return el("div", { class: "sysrow", "data-id": m.id, "data-type": m.system.type },
    el("span", { class: "time", text: time }), " ",
    el("span", { text: say(personName(m.system.actor), personName(m.system.target)) }));
}

function messageEl(m) {
  if (m.system) return systemRowEl(m);
  const time = new Date(m.createdAt * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return el("div", { class: "msg" + (m.isAgent ? " agent" : ""), "data-id": m.id, "data-pubkey": m.pubkey },
    el("div", { class: "meta" },
      el("span", { class: "name", text: m.name }),
      m.isAgent ? el("span", { class: "tag", text: "agent" }) : null,
      m.isOwner ? el("span", { class: "tag", text: "you" }) : null,
      m.kind === 45001 ? el("span", { class: "tag post", text: "post" }) : null,
      el("span", { class: "time", text: time }),
      el("button", { type: "button", class: "reply-btn", text: "Reply in thread", onclick: () => startReply(m) })),
    m.diff ? diffEl(m) : el("div", { class: "body" }, ...bodyNodes(m.content)),
    attachmentsEl(m),
    m.permission ? permissionEl(m) : null,
    reactionsEl(m.id));
}

// diffEl shows a code diff (kind 40008) as one: a header naming the file, commit and repo, then
// the diff's lines, each coloured by its first character (added, removed, hunk header).
function diffEl(m) {
  const d = m.diff;
  const title = [d.file || "diff", "@ " + (d.commit || "").slice(0, 12), d.pr ? "PR #" + d.pr : ""].filter(Boolean).join(" ");
  const pre = el("pre", { class: "diff" });
  for (const line of m.content.replace(/\n$/, "").split("\n")) {
    let cls = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    pre.append(el("span", { class: "diff-" + cls, text: line || " " })); // each span is a block: one line
  }
  return el("div", { class: "body diff-msg" },
    el("div", { class: "diff-head" },
      el("span", { class: "diff-title", text: title }),
      /^https?:\/\//.test(d.repo) ? el("a", { href: d.repo, target: "_blank", rel: "noopener noreferrer", text: d.repo }) : null),
    d.description ? el("div", { class: "diff-desc", text: d.description }) : null,
    pre);
}

// attachmentsEl shows a message's files: images on the stack's relay inline (the server gives
// them a src under /api/blob/, fetched with the owner's key), anything else as a link.
function attachmentsEl(m) {
  const list = (m.attachments || []).filter((a) => /^https?:\/\//.test(a.url));
  if (!list.length) return null;
  return el("div", { class: "attachments" }, ...list.map((a) => {
    const label = a.alt || a.url.split("/").pop();
    if (a.src && a.src.startsWith("/api/blob/")) {
      return el("img", { class: "attachment-img", src: a.src + "?token=" + encodeURIComponent(token), alt: label, title: label, loading: "lazy" });
    }
    return el("a", { class: "attachment-link", href: a.url, target: "_blank", rel: "noopener noreferrer", text: "📎 " + label + (a.type ? " (" + a.type + ")" : "") });
  }));
}

// permissionEl turns the options of the agent's permission question (its option tags, as the
// server reads them; never its text, which a tool title can fill with "2. Reject" lines) into
// buttons; a click answers with the option's number in the question's thread, mentioning the
// agent (its subscription wants the mention).
function permissionEl(m) {
  const opts = (m.permissionOptions || []).map((name, i) => ({ n: String(i + 1), name }));
  const box = el("div", { class: "perm-options" });
  const answer = async (o) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    try {
      addMessage(await api("/api/messages", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ channel: m.channel, content: o.n, replyTo: m.id, mention: [m.pubkey] }),
      }));
      box.dataset.answered = o.n;
    } catch (e) {
      for (const b of box.querySelectorAll("button")) b.disabled = false;
      $("compose-error").textContent = e.message;
    }
  };
  for (const o of opts) {
    box.append(el("button", { type: "button", class: "perm-option", "data-option": o.n, text: o.n + ". " + o.name, onclick: () => answer(o) }));
  }
  return box;
}

function renderMessages() {
  const box = $("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const all = [...(S.messages.get(S.current) || new Map()).values()];
  all.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  const byId = new Map(all.map((m) => [m.id, m]));
  const replies = new Map();
  const tops = [];
  for (const m of all) {
    if (m.root && byId.has(m.root)) {
      if (!replies.has(m.root)) replies.set(m.root, []);
      replies.get(m.root).push(m);
      if (m.broadcast) tops.push({ ...m, alsoInThread: true }); // sent to the channel too
    } else tops.push(m);
  }
  const nodes = tops.filter((m) => !m.system || SYSTEM_ROWS[m.system.type]).map((m) => {
    const node = messageEl(m);
    if (m.alsoInThread) {
      node.classList.add("broadcast");
      node.querySelector(".meta").append(el("span", { class: "tag", text: "also in thread" }));
      return node;
    }
    const rs = replies.get(m.id);
    const working = typingEl(S.current, m.id);
    if (rs || working) node.append(el("div", { class: "thread", "data-root": m.id }, ...(rs || []).map(messageEl).filter(Boolean), working));
    return node;
  });
  const working = typingEl(S.current, "");
  if (working) nodes.push(working);
  if (!all.some((m) => !m.system) && !working) nodes.push(el("div", { class: "empty", text: "No messages yet. Say hello — mention the agent with @" + ((S.agent && S.agent.name) || "name") + "." }));
  box.replaceChildren(...nodes);
  if (atBottom || S.justSent) box.scrollTop = box.scrollHeight;
  S.justSent = false;
}

function startReply(m) {
  S.replyTo = { id: m.root || m.id, name: m.name };
  renderReplyBar();
  $("compose-text").focus();
}

function renderReplyBar() {
  $("reply-bar").hidden = !S.replyTo;
  $("reply-to-name").textContent = S.replyTo ? S.replyTo.name : "";
}

// attach uploads the chosen files at once; each becomes a chip the next message carries.
async function attach(files) {
  $("compose-error").textContent = "";
  for (const f of files) {
    try {
      const a = await api("/api/upload", { method: "POST", headers: { "Content-Type": f.type || "application/octet-stream" }, body: f });
      a.alt = f.name;
      S.attachments.push(a);
    } catch (e) {
      $("compose-error").textContent = "Could not attach " + f.name + ": " + e.message;
    }
  }
  renderAttachments();
}

function renderAttachments() {
  const box = $("attach-list");
  box.hidden = !S.attachments.length;
  box.replaceChildren(...S.attachments.map((a, i) => el("span", { class: "attach-chip", "data-sha256": a.sha256 },
    "📎 " + a.alt,
    el("button", { type: "button", title: "Remove", text: "✕", onclick: () => { S.attachments.splice(i, 1); renderAttachments(); } }))));
}

async function send(ev) {
  ev.preventDefault();
  const text = $("compose-text").value;
  if ((!text.trim() && !S.attachments.length) || !S.current) return;
  $("send").disabled = true;
  $("compose-error").textContent = "";
  try {
    const m = await api("/api/messages", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ channel: S.current, content: text, replyTo: S.replyTo ? S.replyTo.id : "", attachments: S.attachments }),
    });
    $("compose-text").value = "";
    S.attachments = [];
    renderAttachments();
    S.justSent = true;
    addMessage(m);
  } catch (e) {
    $("compose-error").textContent = e.message;
  } finally {
    $("send").disabled = false;
  }
}

// ---------- activity ----------

const ROUTES = {
  system_prompt: "spec systemPrompt",
  claude_meta: "_meta.systemPrompt.append",
  goose_method: "goose system-prompt method",
  user_message: "first user message",
};
const SECTION_ORDER = ["Workspace", "Base", "System", "Team Instructions", "Agent Memory — core", "Channel Canvas"];

function channelActs(ch) {
  if (!S.acts.has(ch)) {
    S.acts.set(ch, { root: el("div", { class: "turns", "data-channel": ch }), turns: new Map() });
    ensureChannel(ch);
  }
  return S.acts.get(ch);
}

function renderActivityChannel() {
  const box = $("activity");
  if (!S.current || !S.acts.has(S.current)) {
    box.replaceChildren(el("div", { class: "empty", text: "No agent activity in this channel yet. Mention the agent to start a turn." }));
    return;
  }
  box.replaceChildren(S.acts.get(S.current).root);
}

function fmtTime(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function getTurn(ch, turnId, time) {
  const a = channelActs(ch);
  const id = turnId;
  let t = a.turns.get(id);
  if (!t) {
    const status = el("span", { class: "turn-status running", text: "running…" });
    const body = el("div", { class: "turn-body" });
    // Stop is there while the turn runs; it asks the agent's harness to cancel the channel's turn.
    const stop = el("button", { type: "button", class: "stop", title: "Cancel this turn", text: "Stop", hidden: !S.controls });
    const node = el("article", { class: "turn", "data-turn": id },
      el("header", {}, el("b", { text: "Turn " + (a.turns.size + 1) }), el("span", { text: fmtTime(time) }), status, stop),
      body);
    t = { id, node, body, status, stop, tools: new Map(), lastMsg: null, history: null };
    stop.addEventListener("click", () => stopTurn(ch, t));
    a.turns.set(id, t);
    a.root.append(node);
    renderChannels();
    if (ch === S.current) renderActivityChannel();
  }
  return t;
}

function put(t, node) {
  t.body.append(node);
  t.lastMsg = null;
  scrollActivity();
}

function scrollActivity() {
  const box = $("activity");
  if (box.scrollHeight - box.scrollTop - box.clientHeight < 200) box.scrollTop = box.scrollHeight;
}

function short(id) { return id ? String(id).slice(0, 12) : "?"; }

function systemPromptCard(d) {
  const secs = (d.sections || []).slice();
  const rank = (l) => { const i = SECTION_ORDER.indexOf(l); return i < 0 ? SECTION_ORDER.length : i; };
  secs.sort((a, b) => rank(a.label) - rank(b.label)); // stable: unknown labels keep their order
  const bytes = new TextEncoder().encode(d.text || "").length;
  return el("details", { class: "card sysprompt", "data-route": d.route },
    el("summary", {}, "System prompt ",
      el("span", { class: "sub", text: "via " + (ROUTES[d.route] || d.route) + " · " + secs.length + " sections · " + bytes + " bytes" })),
    el("div", { class: "sections" }, ...secs.map((s) =>
      el("details", { class: "section", "data-label": s.label },
        el("summary", { text: "[" + s.label + "]" }),
        el("pre", { text: s.body })))));
}

function contextCard(d) {
  const pair = (k, v) => el("div", { class: "pair" }, el("dt", { text: k }), el("dd", { text: String(v) }));
  return el("div", { class: "card ctx" }, el("b", { text: "Prompt context" }),
    el("dl", {},
      pair("route", ROUTES[d.route] || d.route),
      pair("bytes", d.promptBytes),
      pair("standing included", d.standingContextIncluded ? "yes" : "no"),
      pair("event delta", d.eventDeltaCount),
      d.contextIncomplete ? pair("context incomplete", d.contextIncomplete) : null));
}

function blockText(b) {
  if (typeof b === "string") return b;
  if (b && typeof b.text === "string") return b.text;
  return JSON.stringify(b);
}

function promptCard(d) {
  const text = (d.blocks || []).map(blockText).join("\n\n");
  return el("details", { class: "card prompt" },
    el("summary", {}, "Prompt ", el("span", { class: "sub", text: (d.blocks || []).length + " blocks · " + new TextEncoder().encode(text).length + " bytes" })),
    el("pre", { text }));
}

function usageText(u) {
  if (!u || typeof u !== "object") return "";
  const parts = [];
  for (const [k, v] of Object.entries(u)) if (typeof v === "number") parts.push(k + " " + v);
  return parts.join(", ");
}

function agentUpdate(t, d) {
  switch (d.kind) {
    case "agent_message_chunk":
    case "agent_thought_chunk": {
      const cls = d.kind === "agent_thought_chunk" ? "card agent-msg thought" : "card agent-msg";
      if (!t.lastMsg || t.lastMsg.className !== cls) {
        const n = el("div", { class: cls });
        put(t, n);
        t.lastMsg = n;
      }
      t.lastMsg.append(document.createTextNode(d.text || ""));
      scrollActivity();
      return;
    }
    case "tool_call":
    case "tool_call_update": {
      let row = t.tools.get(d.toolCallId);
      if (!row) {
        row = { title: el("span", { class: "title" }), st: el("span", { class: "st" }) };
        row.node = el("div", { class: "tool", "data-tool": d.toolCallId }, "🔧", row.title, row.st);
        t.tools.set(d.toolCallId, row);
        put(t, row.node);
      }
      if (d.title) row.title.textContent = d.title;
      if (d.status) { row.st.textContent = d.status; row.st.className = "st " + d.status; }
      return;
    }
  }
}

function historyUpdate(t, d) {
  if (!t.history) {
    t.historyCount = el("span", { class: "sub" });
    t.historyList = el("div", {});
    t.history = el("details", { class: "card history" },
      el("summary", {}, "History replayed by session/load ", t.historyCount), t.historyList);
    put(t, t.history);
    t.historyN = 0;
  }
  t.historyN++;
  t.historyCount.textContent = "(" + t.historyN + " updates — earlier turns, not new activity)";
  const last = t.historyList.lastChild;
  if (last && last.dataset.kind === d.kind && d.text && /_chunk$/.test(d.kind)) {
    last.lastChild.textContent += d.text;
    return;
  }
  t.historyList.append(el("div", { class: "h-item", "data-kind": d.kind },
    el("span", { class: "h-kind", text: d.kind }), el("span", { text: d.text || d.title || "" })));
}

function agentProc(text) {
  const box = $("agent-proc");
  box.append(el("div", { text }));
  while (box.childNodes.length > 6) box.firstChild.remove();
}

// Three ways an activity event finds its place: the agent-process strip, the turn of the
// session it belongs to (session updates carry only a session id), or the turn it names.
const procLine = (show) => (e) => show(e.data || {});
const bySession = (show) => function route(e) {
  const s = S.sessions.get(e.sessionId);
  if (!s) { // the turn that opened this session has not been seen yet
    if (!S.pending.has(e.sessionId)) S.pending.set(e.sessionId, []);
    S.pending.get(e.sessionId).push(() => route(e));
    return;
  }
  show(getTurn(s.channel, s.turn, e.time), e.data || {});
};
const byTurn = (show) => (e) => {
  if (e.channelId && e.turnId) show(getTurn(e.channelId, e.turnId, e.time), e.data || {});
};

// ACTIVITY handles every activity type internal/observer declares, one key per line; null means
// deliberately not shown. TestAppHandlesExactlyTheObserverTypes keeps the two lists equal.
const ACTIVITY = {
  acp_line: null,       // raw protocol lines: the activity log's job, never streamed to the page
  event_received: null, // one per relay event: too fine-grained for this view
  gap: procLine((d) => agentProc("missed " + d.missed + " activity events")),
  heartbeat_skipped: procLine((d) => agentProc("heartbeat skipped: nothing new since " + fmtTime(d.since))),
  agent_spawned: procLine((d) => agentProc("agent started" + (d.pid ? " (pid " + d.pid + ")" : ""))),
  agent_exited: procLine((d) => agentProc("agent exited" + (d.reason ? ": " + d.reason : ""))),
  agent_update: bySession(agentUpdate),
  history: bySession(historyUpdate),
  turn_started: byTurn((t, d) => {
    if (d.attempt > 1) put(t, el("div", { class: "session-line", text: "retry attempt " + d.attempt }));
  }),
  session_resolved: byTurn((t, d) => {
    put(t, el("div", { class: "session-line" }, d.isNewSession ? "New session " : "Session ", el("b", { text: short(d.sessionId) })));
  }),
  session_resumed: byTurn((t, d) => {
    put(t, el("div", { class: "session-line" }, "Resumed session ", el("b", { text: short(d.sessionId) }),
      d.method ? " via " + d.method : ""));
  }),
  session_resume_failed: byTurn((t, d) => {
    put(t, el("div", { class: "session-line notice", text: "Could not resume session " + short(d.sessionId) + ": " + (d.reason || "") + (d.retry ? " (will retry)" : "") }));
  }),
  system_prompt: byTurn((t, d) => put(t, systemPromptCard(d))),
  prompt_context_delivery: byTurn((t, d) => put(t, contextCard(d))),
  prompt: byTurn((t, d) => put(t, promptCard(d))),
  turn_ended: byTurn((t, d) => {
    const failed = !!d.error;
    const parts = [failed ? "Failed: " + d.error : "Stop reason: " + (d.stopReason || "?")];
    if (d.durationMs !== undefined) parts.push((d.durationMs / 1000).toFixed(1) + " s");
    const u = usageText(d.usage);
    if (u) parts.push("usage: " + u);
    put(t, el("div", { class: "card end" + (failed ? " failed" : ""), "data-stop": d.stopReason || "", text: parts.join(" · ") }));
    t.status.textContent = failed ? "failed" : (d.stopReason || "done");
    t.status.className = "turn-status " + (failed ? "failed" : "done");
    turnOver(t);
  }),
  dead_letter: byTurn((t, d) => {
    put(t, el("div", { class: "notice", text: "Gave up on this batch: " + (d.reason || "") }));
    t.status.textContent = "dead letter";
    t.status.className = "turn-status failed";
    turnOver(t);
  }),
  silent_turn: byTurn((t, d) => {
    const did = d.action === "fallback" ? "posted the agent's text for it" : "posted a notice";
    put(t, el("div", { class: "notice", text: "No answer reached the thread (" + (d.reason || "?") + "); the harness " + did }));
    t.status.textContent = "silent";
    t.status.className = "turn-status failed";
  }),
  fallback_published: byTurn((t, d) => {
    put(t, el("div", { class: "session-line", text: "Fallback reply posted (" + (d.bytes || 0) + " bytes)" }));
    t.status.textContent = "fallback";
  }),
};

// ---------- controls (NIP-AO control frames, sent by the server as the owner) ----------

function control(req) {
  return api("/api/control", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(req) });
}

// resultText says what the agent's harness answered (its control_result).
function resultText(r) {
  return r.message || (r.status || "?") + (r.error ? ": " + r.error : "");
}

function turnOver(t) {
  if (t.stop) t.stop.remove();
  t.stop = null;
}

async function stopTurn(ch, t) {
  if (!t.stop) return;
  t.stop.disabled = true;
  const line = (text) => put(t, el("div", { class: "session-line control-line", text }));
  try {
    const r = await control({ type: "cancel_turn", channelId: ch });
    line("Stop: " + resultText(r));
  } catch (e) {
    line("Stop failed: " + e.message);
    if (t.stop) t.stop.disabled = false;
  }
}

function showControls() {
  $("controls").hidden = !S.controls;
  for (const a of S.acts.values()) for (const t of a.turns.values()) if (t.stop) t.stop.hidden = !S.controls;
}

async function switchModel(ev) {
  ev.preventDefault();
  const model = $("model-id").value.trim();
  if (!model || !S.current) return;
  $("control-status").textContent = "switching…";
  try {
    const r = await control({ type: "switch_model", channelId: S.current, model });
    $("control-status").textContent = resultText(r);
  } catch (e) {
    $("control-status").textContent = "Could not switch: " + e.message;
  }
}

function onActivity(e) {
  if (e.type !== "gap") {
    if (S.seenSeq.has(e.seq)) return;
    S.seenSeq.add(e.seq);
  }
  if (e.channelId && e.sessionId && e.turnId) {
    S.sessions.set(e.sessionId, { channel: e.channelId, turn: e.turnId });
    const queued = S.pending.get(e.sessionId);
    if (queued) { S.pending.delete(e.sessionId); queued.forEach((retry) => retry()); }
  }
  const show = ACTIVITY[e.type];
  if (show) show(e); // null: not shown here; undefined: a type newer than this page
}

// ---------- live stream ----------

function connect() {
  const es = new EventSource("/api/stream?token=" + encodeURIComponent(token));
  es.addEventListener("activity", (m) => onActivity(JSON.parse(m.data)));
  es.addEventListener("message", (m) => {
    const msg = JSON.parse(m.data);
    ensureChannel(msg.channel);
    addMessage(msg);
    // The agent's metric follows its reply by a moment: reload the turns once things settle.
    if (msg.isAgent) { clearTimeout(S.turnsTimer); S.turnsTimer = setTimeout(loadTurns, 1500); }
  });
  es.addEventListener("reaction", (m) => addReaction(JSON.parse(m.data)));
  es.addEventListener("unreact", (m) => removeReactions(JSON.parse(m.data)));
  es.addEventListener("typing", (m) => addTyping(JSON.parse(m.data)));
  // ready comes after the activity history, and the stream is subscribed before we load
  // messages, so nothing published in between is missed.
  es.addEventListener("ready", () => {
    $("status").textContent = "live";
    $("status").classList.add("live");
    loadState().catch((e) => { $("compose-error").textContent = "Could not load channels: " + e.message; });
  });
  es.onerror = () => {
    $("status").textContent = "reconnecting…";
    $("status").classList.remove("live");
  };
}

$("tab-chat").addEventListener("click", () => setView("chat"));
$("memory-reload").addEventListener("click", loadMemory);
$("turns-reload").addEventListener("click", loadTurns);
$("tab-activity").addEventListener("click", () => setView("activity"));
$("composer").addEventListener("submit", send);
$("controls").addEventListener("submit", switchModel);
$("attach").addEventListener("click", () => $("attach-file").click());
$("attach-file").addEventListener("change", async (e) => {
  const files = [...e.target.files];
  e.target.value = "";
  await attach(files);
});
$("reply-cancel").addEventListener("click", () => { S.replyTo = null; renderReplyBar(); });
$("compose-text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
});
setView(location.hash === "#activity" ? "activity" : "chat");
renderActivityChannel();
connect();
