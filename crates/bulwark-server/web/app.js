// The Bulwark web chat: plain JavaScript, no dependencies, no build step.
//
// Rules this file keeps:
// - Everything that comes from the server or a model reaches the page as
//   text (textContent, or text nodes), never as HTML: an answer holding
//   `<img onerror=...>` or `<script>` is shown, not run.
// - The token lives in one variable of this closure: never in storage,
//   a cookie or a URL. Reloading the page forgets it.
// - No inline script or style anywhere (the CSP allows neither).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const ui = {
    status: $("status"), signout: $("signout"), login: $("login"),
    loginForm: $("login-form"), token: $("token"), loginError: $("login-error"),
    app: $("app"), agents: $("agents"), sessions: $("sessions"),
    refresh: $("refresh-sessions"), title: $("chat-title"), log: $("log"),
    composer: $("composer"), message: $("message"), send: $("send"),
    interrupt: $("interrupt"),
  };

  let token = null; // memory only
  // The open conversation: its agent, session id (once known), the id of
  // the last stream frame shown, whether it is subscribed now, whether a
  // turn is running, and a message waiting for the subscription.
  let chat = null;
  let ws = null;
  let reply = null; // the assistant bubble text streams into
  const calls = new Map(); // call_id -> tool block
  let retries = 0;
  let retryTimer = null;

  /** An element with a class and text content (never markup). */
  function node(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function setStatus(text) {
    ui.status.textContent = text;
  }

  function add(el) {
    ui.log.append(el);
    ui.log.scrollTop = ui.log.scrollHeight;
    return el;
  }

  function bubble(role, text) {
    return add(node("div", "msg " + (role === "user" ? "user" : "assistant"), text));
  }

  function note(text) {
    return add(node("p", "note", text));
  }

  function showError(code, message) {
    const box = node("div", "error-frame");
    box.setAttribute("role", "alert");
    box.append(node("strong", null, "Error "), node("code", "code", code), node("span", null, ": " + message));
    return add(box);
  }

  function clip(text, max) {
    const s = typeof text === "string" ? text : JSON.stringify(text);
    return s && s.length > max ? s.slice(0, max) + "…" : s || "";
  }

  // ---- REST ----------------------------------------------------------

  async function api(path) {
    // The token goes in the header, never the URL. "same-origin" (not
    // "omit") so the server's Clear-Site-Data applies to these answers too.
    const res = await fetch(path, {
      headers: { Authorization: "Bearer " + token },
      credentials: "same-origin",
      cache: "no-store",
    });
    let body = null;
    try {
      body = await res.json();
    } catch {
      body = null;
    }
    if (!res.ok) {
      const msg = body && body.error && typeof body.error.message === "string"
        ? body.error.message : "HTTP " + res.status;
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  function pick(title, detail, onClick) {
    const b = node("button", "pick");
    b.type = "button";
    b.append(node("strong", null, title), node("span", "desc", detail));
    b.addEventListener("click", onClick);
    const li = node("li");
    li.append(b);
    return li;
  }

  function showAgents(agents) {
    ui.agents.replaceChildren();
    if (!agents.length) ui.agents.append(node("li", "empty", "No agent is available to you."));
    for (const a of agents) {
      const li = pick(a.name, a.description || "", () => open(a.name, null));
      li.firstChild.dataset.agent = a.name;
      ui.agents.append(li);
    }
  }

  async function loadSessions() {
    if (!token) return;
    try {
      const list = await api("/api/v1/sessions?limit=50");
      ui.sessions.replaceChildren();
      if (!list.sessions.length) ui.sessions.append(node("li", "empty", "No sessions yet."));
      for (const s of list.sessions) {
        const when = new Date(s.updated_ms).toLocaleString();
        const detail = when + " · " + s.message_count + " messages" + (s.live ? " · live" : "");
        const li = pick(s.agent, detail, () => open(s.agent, s.id));
        li.firstChild.dataset.session = s.id;
        li.firstChild.title = "Resume session " + s.id;
        ui.sessions.append(li);
      }
    } catch (e) {
      setStatus("Could not list sessions: " + e.message);
    }
  }

  // ---- sign in and out ----------------------------------------------

  ui.loginForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const value = ui.token.value.trim();
    ui.token.value = "";
    ui.loginError.textContent = "";
    if (!value) {
      ui.loginError.textContent = "Enter your access token.";
      ui.token.focus();
      return;
    }
    token = value;
    setStatus("Signing in…");
    try {
      showAgents((await api("/api/v1/agents")).agents);
    } catch (e) {
      token = null;
      ui.loginError.textContent = "Sign-in failed: " + e.message;
      setStatus("Signed out");
      ui.token.focus();
      return;
    }
    ui.login.hidden = true;
    ui.app.hidden = false;
    ui.signout.hidden = false;
    setStatus("Signed in");
    loadSessions();
    const first = ui.agents.querySelector("button");
    if (first) first.focus();
  });

  function signOut(why) {
    closeSocket();
    token = null;
    chat = null;
    ui.agents.replaceChildren();
    ui.sessions.replaceChildren();
    ui.log.replaceChildren();
    ui.title.textContent = "Choose an agent to start";
    setComposer();
    ui.app.hidden = true;
    ui.signout.hidden = true;
    ui.login.hidden = false;
    ui.loginError.textContent = why || "";
    setStatus("Signed out");
    ui.token.focus();
  }

  ui.signout.addEventListener("click", () => signOut(""));
  ui.refresh.addEventListener("click", loadSessions);

  // ---- a conversation --------------------------------------------------

  function setComposer() {
    const on = chat !== null;
    ui.message.disabled = !on;
    ui.send.disabled = !on;
    ui.interrupt.disabled = !(on && chat.busy);
  }

  function setBusy(busy) {
    if (chat) chat.busy = busy;
    setComposer();
  }

  async function open(agent, session) {
    closeSocket();
    const mine = { agent, session, last: null, live: false, busy: false, queued: null, streamed: false };
    chat = mine;
    reply = null;
    calls.clear();
    ui.log.replaceChildren();
    ui.title.textContent = agent + (session ? " — session " + session : " — new conversation");
    setComposer();
    if (session) await loadHistory(session);
    if (chat !== mine) return; // another conversation was chosen meanwhile
    connect();
    ui.message.focus();
  }

  async function loadHistory(id) {
    try {
      const data = await api("/api/v1/sessions/" + encodeURIComponent(id) + "/messages?limit=1000");
      for (const m of data.messages) showStored(m);
      if (data.messages.length) note("— earlier messages above —");
    } catch (e) {
      showError("history", e.message);
    }
    reply = null;
  }

  /** One stored message: {role, content: {role, blocks: [...]}}. */
  function showStored(m) {
    const blocks = m.content && Array.isArray(m.content.blocks) ? m.content.blocks : [];
    for (const b of blocks) {
      if (b.type === "text") bubble(m.role, b.text);
      else if (b.type === "tool_use") toolBlock(b.id, b.name, clip(b.input, 200));
      else if (b.type === "tool_result") {
        const block = calls.get(b.tool_use_id) || toolBlock(b.tool_use_id, "tool", "");
        settle(block, b.is_error ? "error" : "done", clip(b.content, 200));
      }
    }
  }

  function toolBlock(id, tool, summary) {
    reply = null;
    const block = node("div", "tool");
    block.dataset.decision = "pending";
    const head = node("div", "tool-head");
    head.append(node("span", "tool-name", tool), node("span", "decision", "requested"));
    block.append(head, node("div", "tool-summary", summary), node("div", "tool-result"));
    calls.set(id, block);
    return add(block);
  }

  function settle(block, decision, summary) {
    block.dataset.decision = decision;
    block.querySelector(".decision").textContent = decision;
    block.querySelector(".tool-result").textContent = summary;
  }

  function approval(f) {
    reply = null;
    const box = node("div", "approval");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Approval needed for " + f.tool);
    const head = node("p");
    head.append(node("strong", null, "Approval needed: "), node("span", "tool-name", f.tool + " · " + f.operation));
    const yes = node("button", "approve", "Approve");
    const no = node("button", "deny", "Deny");
    const answer = node("p", "answer");
    for (const [button, approve] of [[yes, true], [no, false]]) {
      button.type = "button";
      button.addEventListener("click", () => {
        if (!sendFrame({ type: "tool_approval", request_id: f.request_id, approve })) return;
        yes.disabled = no.disabled = true;
        box.dataset.answer = approve ? "approved" : "denied";
        answer.textContent = approve ? "You approved this call." : "You denied this call.";
      });
    }
    const actions = node("div", "actions");
    actions.append(yes, no);
    box.append(head, node("p", "tool-summary", f.summary), node("p", "why", f.why), actions, answer);
    add(box);
    yes.focus();
  }

  function turnEnded(f) {
    if (!chat.streamed && f.text) bubble("assistant", f.text);
    if (f.end !== "completed") note("Turn ended: " + String(f.end).replace("_", " ") + ".");
    for (const b of ui.log.querySelectorAll(".approval button:enabled")) b.disabled = true;
    reply = null;
    chat.streamed = false;
    setBusy(false);
    loadSessions();
  }

  function onError(f) {
    showError(f.code, f.message);
    if (f.code === "unauthorized") {
      signOut("Your token is no longer valid; sign in again.");
      return;
    }
    if (f.code === "subscription_ended") {
      chat.live = false;
      subscribe();
      return;
    }
    if (f.code === "moved" || f.fatal) {
      chat.live = false;
      setBusy(false);
      setStatus(f.code === "moved" ? "Opened elsewhere; send a message to take it back"
        : "Conversation ended; send a message to resume it");
    }
  }

  function onFrame(f) {
    if (typeof f.id === "number" && f.type !== "subscribed") {
      if (chat.last !== null && f.id <= chat.last) return; // shown already
      chat.last = f.id;
    }
    switch (f.type) {
      case "subscribed":
        if (chat.last === null || f.missed) chat.last = f.id;
        chat.session = f.session_id;
        chat.live = true;
        retries = 0;
        ui.title.textContent = f.agent + " — session " + f.session_id;
        setStatus("Connected");
        if (f.missed) {
          // Frames were lost: the stored history is the truth.
          ui.log.replaceChildren();
          calls.clear();
          loadHistory(f.session_id);
        }
        if (chat.queued !== null) {
          const text = chat.queued;
          chat.queued = null;
          if (sendFrame({ type: "message", text })) setBusy(true);
        }
        loadSessions();
        break;
      case "text_delta":
        if (!reply) reply = bubble("assistant", "");
        reply.textContent += f.text;
        chat.streamed = true;
        ui.log.scrollTop = ui.log.scrollHeight;
        break;
      case "tool_call":
        toolBlock(f.call_id, f.tool, f.summary);
        break;
      case "tool_result":
        settle(calls.get(f.call_id) || toolBlock(f.call_id, "tool", ""), f.decision, f.summary);
        break;
      case "approval_request":
        approval(f);
        break;
      case "turn_ended":
        turnEnded(f);
        break;
      case "error":
        onError(f);
        break;
      default:
        break; // pong, or a frame type this page does not know
    }
  }

  // ---- the WebSocket -----------------------------------------------------

  function connect() {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/ws";
    let sock;
    try {
      // The token travels as a subprotocol: browsers cannot set headers here.
      sock = new WebSocket(url, ["bulwark.v1", "bearer." + token]);
    } catch (e) {
      showError("connect", e.message);
      return;
    }
    ws = sock;
    setStatus("Connecting…");
    sock.addEventListener("open", () => subscribe());
    sock.addEventListener("message", (ev) => {
      if (sock !== ws || !chat) return;
      let frame;
      try {
        frame = JSON.parse(ev.data);
      } catch {
        return;
      }
      onFrame(frame);
    });
    sock.addEventListener("close", (ev) => {
      if (sock !== ws) return; // closed on purpose
      ws = null;
      if (chat) chat.live = false;
      // Closed for idleness or by policy (a revoked token, too many bad
      // frames): reconnecting at once would only repeat it. Anything else
      // is a dropped connection.
      if (ev.code === 1008 || ev.reason === "idle") {
        setStatus("Disconnected; send a message to reconnect");
      } else {
        reconnectLater();
      }
    });
  }

  /** Reconnects with growing pauses; the subscribe carries last_message_id. */
  function reconnectLater() {
    const delay = Math.min(500 * 2 ** retries, 15000);
    retries += 1;
    setStatus("Connection lost; reconnecting…");
    clearTimeout(retryTimer);
    retryTimer = setTimeout(async () => {
      if (!chat || !token || ws) return;
      try {
        await api("/api/v1/agents"); // is the token still good?
      } catch (e) {
        if (e.status === 401) {
          signOut("Your token is no longer valid; sign in again.");
          return;
        }
      }
      if (chat && token && !ws) connect();
    }, delay);
  }

  function closeSocket() {
    clearTimeout(retryTimer);
    if (ws) {
      const s = ws;
      ws = null;
      s.close(1000);
    }
  }

  function subscribe() {
    if (!chat) return;
    const f = { type: "subscribe", agent: chat.agent };
    if (chat.session) f.session = chat.session;
    if (chat.last !== null) f.last_message_id = chat.last;
    sendFrame(f);
  }

  function sendFrame(frame) {
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      showError("not_connected", "not connected to the server; try again in a moment");
      if (!ws && chat) reconnectLater();
      return false;
    }
    ws.send(JSON.stringify(frame));
    return true;
  }

  ui.composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = ui.message.value;
    if (!chat || !text.trim()) return;
    ui.message.value = "";
    bubble("user", text);
    reply = null;
    chat.streamed = false;
    if (chat.live && ws && ws.readyState === WebSocket.OPEN) {
      if (sendFrame({ type: "message", text })) setBusy(true);
      return;
    }
    // Not subscribed (dropped, moved, or the conversation ended): send it
    // once the subscription is back.
    chat.queued = text;
    if (ws && ws.readyState === WebSocket.OPEN) subscribe();
    else if (!ws) connect();
  });

  ui.message.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      ui.composer.requestSubmit();
    }
  });

  ui.interrupt.addEventListener("click", () => sendFrame({ type: "interrupt" }));

  // A long turn sends nothing from this side; a ping keeps the server
  // from closing the connection as idle.
  setInterval(() => {
    if (chat && chat.busy && ws && ws.readyState === WebSocket.OPEN) ws.send('{"type":"ping"}');
  }, 60000);
})();
