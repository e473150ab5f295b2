// voxpipe browser client: WebRTC (POST /rtc/offer) with a WebSocket (/ws)
// fallback, both speaking the events of docs/protocol.md. No build step.

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

// The trace marks the waterfall shows, in causal order.
const WATERFALL = ["speech_end", "asr_final", "llm_first_token", "tts_first_audio", "first_audio_out", "playback_start"];
const HISTORY_TURNS = 30;
const FRAME_MS = 20;
// Audible, as pipeline/audio defines it (AudibleDBFS, AudibleWindowMs): a
// 5 ms window whose RMS is at least -50 dBFS.
const AUDIBLE_RMS = Math.pow(10, -50 / 20);
const AUDIBLE_WINDOW_S = 0.005;
// ?jbt=default leaves the WebRTC receiver's jitter buffer target to the
// browser (to measure what the minimum saves).
const minJitterBuffer = params.get("jbt") !== "default";

// State exposed for debugging and the browser test.
const state = window.voxpipe = {
  status: "idle", transport: "", transcripts: {}, answers: {}, traces: [],
  audioPlayedMs: 0, errors: [],
  answerAt: {},      // turn → performance.now() of its first answer event
  heardAfterMs: {},  // turn → ms from that event to audible playback
  jitterBufferMs: null,
  jitterBufferTarget: null, // what the receiver's jitterBufferTarget was set to (ms), null if unsupported
  deviceSessions: [],  // recent xiaozhi sessions (GET /traces), for the overlay's picker
  source: "",          // the session the overlay shows: "" = this page's
  sourceTraces: [],    // that session's traces, oldest first
};

// firstAudible returns the index of the first sample of the first audible
// window of samples (floats in -1..1, windows from the start), or -1.
function firstAudible(samples, rate) {
  const w = Math.max(1, Math.round(rate * AUDIBLE_WINDOW_S));
  for (let start = 0; start < samples.length; start += w) {
    const end = Math.min(start + w, samples.length);
    let sum = 0;
    for (let i = start; i < end; i++) sum += samples[i] * samples[i];
    if (sum >= AUDIBLE_RMS * AUDIBLE_RMS * (end - start)) return start;
  }
  return -1;
}

let session = null;           // the live transport (RtcTransport or WsTransport)
let wantConnected = false;    // the user asked to be connected: reconnect on loss
let retryDelay = 1000;
let retryTimer = 0;
let forceWS = params.get("transport") === "ws";
let talking = false;
let alwaysOn = params.get("always") === "1" || localStorage.getItem("voxpipe.alwaysOn") === "1";

// ---------- UI helpers ----------

function setStatus(s, text) {
  state.status = s;
  const el = $("status");
  el.dataset.state = s;
  el.textContent = text || s;
}

function notice(text, kind = "error") {
  const el = $("notice");
  if (!text) { el.hidden = true; return; }
  el.className = "notice" + (kind === "info" ? " info" : "");
  el.textContent = text;
  el.hidden = false;
}

const bubbles = {}; // `${turn}:${who}` → element
function bubble(turn, who) {
  const key = `${turn}:${who}`;
  let el = bubbles[key];
  if (!el) {
    el = document.createElement("div");
    el.className = `msg ${who}`;
    el.dataset.turn = turn;
    bubbles[key] = el;
    // Keep a turn's user line before its answer even if the answer starts first.
    const answer = bubbles[`${turn}:bot`];
    if (who === "user" && answer) $("chat").insertBefore(el, answer);
    else $("chat").appendChild(el);
  }
  const chat = $("chat");
  chat.scrollTop = chat.scrollHeight;
  return el;
}

function updateTalkButton() {
  const b = $("talk");
  b.disabled = !session || !session.ready;
  b.classList.toggle("active", talking || alwaysOn);
  b.textContent = alwaysOn ? "Listening (always on)" : talking ? "Listening…" : "Hold to talk";
  $("connect").textContent = wantConnected ? "Disconnect" : "Connect";
  if (session) session.setMicEnabled(alwaysOn || talking);
}

// ---------- events (shared by both transports) ----------

let playingTurn = 0;        // turn whose answer audio is playing
let playStartedAt = 0;      // performance.now() when it began playing

function onEvent(ev) {
  switch (ev.type) {
    case "ready":
      setStatus("live", "live");
      notice("");
      retryDelay = 1000;
      session.ready = true;
      state.transport = session.name;
      $("transport").textContent = session.name;
      updateTalkButton();
      break;
    case "transcript": {
      const el = bubble(ev.turn, "user");
      el.textContent = ev.text || "…";
      el.classList.toggle("partial", !ev.final);
      state.transcripts[ev.turn] = { text: ev.text || "", final: !!ev.final };
      break;
    }
    case "answer": {
      const el = bubble(ev.turn, "bot");
      if (ev.text) el.textContent += ev.text;
      // The answer's audio follows its text: from now on sound is this turn's.
      if (!(ev.turn in state.answers)) {
        state.answerAt[ev.turn] = performance.now();
        session.expectAudio(ev.turn);
      }
      state.answers[ev.turn] = (state.answers[ev.turn] || "") + (ev.text || "");
      break;
    }
    case "audio": // once per session: the format, which each transport knows already
      break;
    case "interrupted": {
      bubble(ev.turn, "bot").classList.add("cut");
      const played = playingTurn === ev.turn ? Math.round(performance.now() - playStartedAt) : 0;
      session.stopPlayback();
      session.send({ type: "interrupt", turn: ev.turn, played_ms: played });
      break;
    }
    case "trace":
      state.traces.push(ev);
      if (ev.interrupted) bubble(ev.turn, "bot").classList.add("cut");
      if (state.source) break; // the overlay shows a device's session
      session.sampleStats?.().then(renderChart);
      renderTrace(ev);
      break;
    case "error":
      state.errors.push(ev);
      if (ev.code === "busy") notice("The server is busy (LLM queue full); that turn was skipped. Try again.");
      else notice(`Server error (${ev.code}): ${ev.message}`);
      break;
  }
}

// The answer's first audible sound reaches the speaker: report it.
function playbackStarted(turn) {
  if (!turn || turn === playingTurn) return;
  playingTurn = turn;
  playStartedAt = performance.now();
  if (state.answerAt[turn]) state.heardAfterMs[turn] = Math.round(playStartedAt - state.answerAt[turn]);
  session?.send({ type: "playback_start", turn });
}

// ---------- WebRTC ----------

class RtcTransport {
  constructor() { this.name = "webrtc"; this.ready = false; this.closed = false; }

  async open(stream) {
    const pc = this.pc = new RTCPeerConnection({ iceServers: await iceServers() });
    this.mic = stream.getAudioTracks()[0];
    pc.addTrack(this.mic, stream);
    const dc = this.dc = pc.createDataChannel("events");
    const opened = new Promise((res) => { dc.onopen = res; }); // may open before setRemoteDescription resolves
    dc.onmessage = (m) => onEvent(JSON.parse(m.data));
    dc.onclose = () => this.lost("data channel closed");
    pc.ontrack = (e) => {
      // Play as soon as the audio arrives: the server paces it (a short
      // lead) and loopback or LAN jitter is small.
      if (minJitterBuffer && "jitterBufferTarget" in e.receiver) {
        try { e.receiver.jitterBufferTarget = 0; state.jitterBufferTarget = e.receiver.jitterBufferTarget; } catch { /* unsupported value */ }
      }
      this.play(e.streams[0] || new MediaStream([e.track]));
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed") this.lost("connection failed");
      if (pc.connectionState === "disconnected") setStatus("reconnecting", "network unstable…");
      if (pc.connectionState === "connected" && this.ready) setStatus("live", "live");
    };
    await pc.setLocalDescription(await pc.createOffer());
    await iceGathered(pc, 3000);
    const resp = await fetch("/rtc/offer", {
      method: "POST", headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ type: pc.localDescription.type, sdp: pc.localDescription.sdp, device: deviceId() }),
    });
    if (resp.status === 503) throw new BusyError(await errorText(resp));
    if (!resp.ok) throw new Error(`offer refused: HTTP ${resp.status} ${await errorText(resp)}`);
    await pc.setRemoteDescription(await resp.json());
    // No open data channel within 10 s: ICE could not connect.
    await Promise.race([
      opened,
      new Promise((_, rej) => setTimeout(() => rej(new Error("WebRTC did not connect within 10 s")), 10000)),
    ]);
  }

  play(stream) {
    const player = $("player");
    player.srcObject = stream;
    player.play().catch(() => notice("Tap anywhere to enable sound.", "info"));
    // The stream never stops (silence between answers): watch its level
    // to know when the answer becomes audible.
    const ctx = audioContext();
    const src = ctx.createMediaStreamSource(stream);
    const an = this.analyser = ctx.createAnalyser();
    an.fftSize = 512; // 10.7 ms at 48 kHz: polled every 10 ms, nothing is missed
    src.connect(an);
    this.levels = new Float32Array(an.fftSize);
    this.rate = ctx.sampleRate;
  }

  expectAudio(turn) {
    this.awaitTurn = turn;
    clearInterval(this.levelTimer);
    this.levelTimer = setInterval(() => {
      if (!this.analyser) return;
      this.analyser.getFloatTimeDomainData(this.levels);
      if (firstAudible(this.levels, this.rate) >= 0) {
        clearInterval(this.levelTimer);
        state.audioPlayedMs += 1;
        playbackStarted(this.awaitTurn);
      }
    }, 10);
  }

  // The receiver's mean jitter buffer delay, for the overlay.
  async sampleStats() {
    try {
      const stats = await this.pc.getStats();
      stats.forEach((r) => {
        if (r.type === "inbound-rtp" && r.kind === "audio" && r.jitterBufferEmittedCount) {
          state.jitterBufferMs = Math.round((r.jitterBufferDelay / r.jitterBufferEmittedCount) * 1000);
          state.rtcInbound = { jitterMs: Math.round((r.jitter || 0) * 1000),
            targetMs: Math.round(((r.jitterBufferTargetDelay || 0) / r.jitterBufferEmittedCount) * 1000),
            concealed: r.concealedSamples, inserted: r.insertedSamplesForDeceleration, removed: r.removedSamplesForAcceleration,
            received: r.packetsReceived, lost: r.packetsLost };
        }
      });
    } catch { /* closed meanwhile */ }
  }

  stopPlayback() { clearInterval(this.levelTimer); } // the server stops sending; the jitter buffer is short

  setMicEnabled(on) { if (this.mic) this.mic.enabled = on; }

  send(obj) { if (this.dc?.readyState === "open") this.dc.send(JSON.stringify(obj)); }

  lost(why) { if (!this.closed) { this.close(); connectionLost(why); } }

  close() {
    this.closed = true;
    clearInterval(this.levelTimer);
    try { this.send({ type: "stop" }); } catch { /* closing anyway */ }
    this.pc?.close();
    $("player").srcObject = null;
  }
}

// A session token (POST /auth/token, docs/security.md) the embedding page
// passed as ?token=, for a server with API keys.
const pageToken = new URLSearchParams(location.search).get("token");
// deviceId is a random id this browser keeps (localStorage), sent as the
// session's device: the server then remembers the speaker's pitch range from
// one session to the next, and reads the intonation of a first turn too.
function deviceId() {
  try {
    let id = localStorage.getItem("voxpipe-device");
    if (!id) {
      const rnd = crypto.getRandomValues(new Uint8Array(12));
      id = "web-" + Array.from(rnd, (b) => b.toString(16).padStart(2, "0")).join("");
      localStorage.setItem("voxpipe-device", id);
    }
    return id;
  } catch {
    return ""; // storage off (private mode): a device of its own each session
  }
}

function authHeaders(h = {}) { return pageToken ? { ...h, Authorization: `Bearer ${pageToken}` } : h; }

// The server's STUN/TURN servers (none: host candidates only).
async function iceServers() {
  try {
    const resp = await fetch("/rtc/config", { headers: authHeaders() });
    if (resp.ok) return (await resp.json()).ice_servers || [];
  } catch { /* an older server: go without */ }
  return [];
}

function iceGathered(pc, timeoutMs) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((res) => {
    const t = setTimeout(res, timeoutMs); // go with what we have
    pc.addEventListener("icegatheringstatechange", () => {
      if (pc.iceGatheringState === "complete") { clearTimeout(t); res(); }
    });
  });
}

// ---------- WebSocket fallback (pcm16 at the AudioContext's rate) ----------

const CAPTURE_WORKLET = `
registerProcessor("capture", class extends AudioWorkletProcessor {
  process(inputs) { const ch = inputs[0][0]; if (ch) this.port.postMessage(ch.slice(0)); return true; }
});`;

class WsTransport {
  constructor() { this.name = "websocket"; this.ready = false; this.closed = false; this.micOn = false; this.sources = []; }

  async open(stream) {
    const ctx = this.ctx = audioContext();
    this.rate = [8000, 16000, 22050, 24000, 32000, 44100, 48000].includes(ctx.sampleRate) ? ctx.sampleRate : 48000;
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws` +
      (pageToken ? `?token=${encodeURIComponent(pageToken)}` : "");
    const ws = this.ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    await new Promise((res, rej) => {
      ws.onopen = res;
      ws.onerror = () => rej(new BusyError("WebSocket refused (the server may be full)"));
    });
    ws.onmessage = (m) => {
      if (typeof m.data === "string") onEvent(JSON.parse(m.data));
      else this.play(new Int16Array(m.data));
    };
    ws.onclose = () => { if (!this.closed) { this.closed = true; this.teardown(); connectionLost("WebSocket closed"); } };
    this.send({ type: "start", sample_rate: this.rate, output_sample_rate: this.rate, encoding: "pcm16",
      client: { name: "voxpipe-web", version: "1" }, device: deviceId() });

    const url2 = URL.createObjectURL(new Blob([CAPTURE_WORKLET], { type: "text/javascript" }));
    await ctx.audioWorklet.addModule(url2);
    this.src = ctx.createMediaStreamSource(stream);
    this.node = new AudioWorkletNode(ctx, "capture");
    const frame = new Int16Array(Math.round(ctx.sampleRate / 50));
    let fill = 0;
    this.node.port.onmessage = (e) => {
      for (const v of e.data) {
        frame[fill++] = this.micOn ? Math.max(-32768, Math.min(32767, v * 32768)) : 0;
        if (fill === frame.length) {
          fill = 0;
          if (this.ready && ws.readyState === WebSocket.OPEN) ws.send(frame.buffer.slice(0));
        }
      }
    };
    this.src.connect(this.node);
    this.nextAt = 0;
  }

  expectAudio(turn) { this.audioTurn = turn; }

  play(pcm) {
    const ctx = this.ctx;
    const buf = ctx.createBuffer(1, pcm.length, this.rate);
    const ch = buf.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const node = ctx.createBufferSource();
    node.buffer = buf;
    node.connect(ctx.destination);
    const now = ctx.currentTime;
    if (this.nextAt < now + 0.04) this.nextAt = now + 0.06; // small jitter buffer
    node.start(this.nextAt);
    const turn = this.audioTurn;
    if (turn && turn !== playingTurn && turn !== this.scheduledTurn) {
      // Report when the first audible sample plays.
      const at = firstAudible(ch, this.rate);
      if (at >= 0) {
        this.scheduledTurn = turn;
        setTimeout(() => playbackStarted(turn), (this.nextAt + at / this.rate - now) * 1000);
      }
    }
    this.nextAt += buf.duration;
    state.audioPlayedMs += FRAME_MS;
    this.sources.push(node);
    node.onended = () => { this.sources = this.sources.filter((s) => s !== node); };
  }

  stopPlayback() {
    for (const s of this.sources) { try { s.stop(); } catch { /* already ended */ } }
    this.sources = [];
    this.nextAt = 0;
  }

  setMicEnabled(on) { this.micOn = on; }

  send(obj) { if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj)); }

  teardown() {
    this.stopPlayback();
    this.src?.disconnect();
    this.node?.disconnect();
  }

  close() {
    this.closed = true;
    this.send({ type: "stop" });
    this.teardown();
    this.ws?.close();
  }
}

class BusyError extends Error {}

async function errorText(resp) {
  try { const ev = await resp.json(); return ev.message || ""; } catch { return ""; }
}

let sharedCtx = null;
function audioContext() {
  if (!sharedCtx) sharedCtx = new AudioContext({ latencyHint: "interactive" });
  if (sharedCtx.state === "suspended") sharedCtx.resume();
  return sharedCtx;
}

// ---------- connecting, fallback, reconnect ----------

let micStream = null;

async function getMic() {
  if (micStream && micStream.getAudioTracks().some((t) => t.readyState === "live")) return micStream;
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new MicError("This page needs microphone access, which the browser only allows over HTTPS or on localhost.");
  }
  try {
    micStream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
    return micStream;
  } catch (err) {
    if (err.name === "NotAllowedError" || err.name === "SecurityError") {
      throw new MicError("Microphone access was denied. Allow the microphone for this site (the icon in the address bar) and press Connect.");
    }
    if (err.name === "NotFoundError") throw new MicError("No microphone found. Plug one in and press Connect.");
    throw new MicError(`Could not open the microphone: ${err.message}`);
  }
}
class MicError extends Error {}

async function connect() {
  clearTimeout(retryTimer);
  wantConnected = true;
  updateTalkButton();
  setStatus("connecting", "connecting…");
  let stream;
  try {
    stream = await getMic();
  } catch (err) {
    wantConnected = false;
    setStatus("error", "no microphone");
    notice(err.message);
    updateTalkButton();
    return;
  }
  audioContext(); // created inside the click, so sound may play
  const useRTC = !forceWS && "RTCPeerConnection" in window;
  let t = useRTC ? new RtcTransport() : new WsTransport();
  session = t;
  try {
    await t.open(stream);
  } catch (err) {
    t.closed = true;
    t.close();
    if (err instanceof BusyError) return busy(err.message);
    if (t instanceof RtcTransport) {
      // WebRTC blocked (UDP filtered, old browser): the WebSocket carries the same session.
      console.warn("webrtc failed, falling back to websocket:", err);
      notice(`WebRTC unavailable (${err.message}); using the WebSocket instead.`, "info");
      forceWS = true;
      t = new WsTransport();
      session = t;
      try { await t.open(stream); } catch (err2) {
        t.closed = true; t.close();
        if (err2 instanceof BusyError) return busy(err2.message);
        return connectionLost(err2.message);
      }
    } else {
      return connectionLost(err.message);
    }
  }
  state.transport = t.name;
  $("transport").textContent = t.name;
  updateTalkButton();
}

function busy(msg) {
  session = null;
  setStatus("error", "server busy");
  notice(`The server is busy${msg ? ` (${msg})` : ""}. Retrying in ${Math.round(retryDelay / 1000)} s…`);
  scheduleRetry();
}

function connectionLost(why) {
  session = null;
  updateTalkButton();
  if (!wantConnected) return;
  setStatus("reconnecting", "reconnecting…");
  notice(`Connection lost (${why}). Reconnecting in ${Math.round(retryDelay / 1000)} s…`, "info");
  scheduleRetry();
}

function scheduleRetry() {
  clearTimeout(retryTimer);
  retryTimer = setTimeout(() => { if (wantConnected) connect(); }, retryDelay);
  retryDelay = Math.min(retryDelay * 2, 15000);
}

function disconnect() {
  wantConnected = false;
  clearTimeout(retryTimer);
  session?.close();
  session = null;
  setStatus("idle", "idle");
  updateTalkButton();
}

// ---------- latency overlay ----------

// heardMs is what the person heard: the page's playback_start (its first
// audible sample played, as the server received the report) since
// speech_end; without a report, the server's own heard figure.
function heardMs(ev) {
  const ps = ev.marks?.playback_start;
  if (ps != null) return ps;
  return ev.heard_ms ?? ev.voice_to_voice_ms;
}

function serverMs(ev) { return ev.heard_ms ?? ev.voice_to_voice_ms; }

function renderTrace(ev) {
  const m = ev.marks || {};
  const v2v = $("v2v");
  const heard = heardMs(ev);
  v2v.textContent = heard != null ? Math.round(heard) : "–";
  v2v.classList.toggle("barge", !!ev.interrupted);
  const server = serverMs(ev);
  $("v2vServer").textContent = server != null ? `· server ${Math.round(server)} ms` : "";
  $("v2vServer").title = "first_audible_out - speech_end: when the server sent the first audible frame";
  $("v2vTurn").textContent = `· turn ${ev.turn}${ev.interrupted ? " · barge-in" : ""}` + cacheLabel(ev) +
    (ev.transport ? ` · ${ev.transport} ${ev.device || ev.session?.slice(0, 8) || ""}` : "");
  $("v2vTurn").classList.toggle("cache-hit", ev.cache === "hit");
  const wf = $("waterfall");
  wf.replaceChildren();
  const calls = toolCalls(ev);
  const span = Math.max(1, ...WATERFALL.map((k) => m[k] ?? 0), ...calls.map((c) => c.at_ms + c.duration_ms));
  let prev = 0;
  for (const k of WATERFALL) {
    // The model's tool calls ran between its first token and the answer's
    // audio (or after the words spoken before them): their rows go here.
    if (k === "tts_first_audio") for (const c of calls) wf.append(...toolRow(c, span));
    const label = document.createElement("span");
    label.textContent = k;
    const lane = document.createElement("div");
    lane.className = "lane";
    const ms = document.createElement("span");
    ms.className = "ms";
    if (m[k] != null) {
      const bar = document.createElement("div");
      bar.className = "bar" + (k === "playback_start" ? " client" : "");
      const from = Math.min(prev, m[k]);
      bar.style.left = `${(Math.max(0, from) / span) * 100}%`;
      bar.style.width = `${(Math.max(0, m[k] - Math.max(0, from)) / span) * 100}%`;
      bar.title = `+${Math.round(m[k] - prev)} ms`;
      lane.appendChild(bar);
      ms.textContent = `${Math.round(m[k])}`;
      prev = m[k];
    } else {
      ms.textContent = "–";
    }
    wf.append(label, lane, ms);
  }
  renderPrefill(ev);
  renderChart();
}

// cacheLabel says what the answer cache did for the turn (trace.cache:
// hit, miss, or off with the reason a question bypassed it); nothing for a
// turn without a question (a timer's notice) or a server without a cache
// field.
function cacheLabel(ev) {
  if (!ev.cache) return "";
  return ev.cache === "off" && ev.cache_bypass ? ` · cache off (${ev.cache_bypass})` : ` · cache ${ev.cache}`;
}

// toolCalls returns the turn's tool calls (trace.tools); a trace with only
// the tool_call mark (when the first call started) gets one row of unknown
// length for it.
function toolCalls(ev) {
  if (ev.tools?.length) return ev.tools;
  const at = ev.marks?.tool_call;
  return at != null ? [{ name: "tool_call", at_ms: at, duration_ms: 0, outcome: "" }] : [];
}

// toolRow is a waterfall row for one tool call: its bar spans the call's
// run, red when it did not end "ok".
function toolRow(c, span) {
  const label = document.createElement("span");
  label.className = "tool";
  label.textContent = c.outcome && c.outcome !== "ok" ? `${c.name} (${c.outcome})` : c.name;
  label.title = `tool call ${c.name}` + (c.outcome ? `: ${c.outcome}` : "");
  const lane = document.createElement("div");
  lane.className = "lane";
  const bar = document.createElement("div");
  bar.className = "bar tool" + (c.outcome && c.outcome !== "ok" ? " failed" : "");
  bar.style.left = `${(Math.max(0, c.at_ms) / span) * 100}%`;
  bar.style.width = `${(Math.max(0, c.duration_ms) / span) * 100}%`;
  bar.title = `${c.name} from ${Math.round(c.at_ms)} ms, ran ${Math.round(c.duration_ms)} ms` + (c.outcome ? ` (${c.outcome})` : "");
  lane.appendChild(bar);
  const ms = document.createElement("span");
  ms.className = "ms";
  const d = c.duration_ms;
  ms.textContent = c.outcome ? `+${d >= 10 ? Math.round(d) : d.toFixed(d >= 1 ? 1 : 2)}` : `${Math.round(c.at_ms)}`;
  ms.title = c.outcome ? "the call's run time, ms" : "when the first call started, ms since speech_end";
  return [label, lane, ms];
}

// The LLM's prompt for the turn: how much of it came from the KV cache
// (earlier turns plus early start) and how much early start prefilled
// while the person was speaking.
function renderPrefill(ev) {
  const el = $("prefill");
  el.hidden = !ev.prompt_tokens;
  if (!ev.prompt_tokens) return;
  const cached = ev.cached_tokens || 0, early = ev.early_tokens || 0;
  const at = ev.marks?.llm_prefill_early;
  el.textContent = `prefill saved ${cached} of ${ev.prompt_tokens} tokens` +
    (early ? ` · ${early} prefilled early${at != null ? ` (from ${Math.round(at)} ms)` : ""}` : " · no early start");
  el.title = "cached_tokens of prompt_tokens: reused from the KV cache; early_tokens: prefilled from the stable partial transcript";
}

function percentile(sorted, p) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function renderChart() {
  const turns = (state.source ? state.sourceTraces : state.traces).filter((t) => heardMs(t) != null).slice(-HISTORY_TURNS);
  const canvas = $("chart");
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 300, h = 120;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  if (!turns.length) return;
  const vals = turns.map(heardMs);
  const sorted = [...vals].sort((a, b) => a - b);
  const p50 = percentile(sorted, 50), p95 = percentile(sorted, 95);
  const top = Math.max(p95, ...vals) * 1.15;
  const bw = w / HISTORY_TURNS;
  turns.forEach((t, i) => {
    const bh = (heardMs(t) / top) * (h - 14);
    g.fillStyle = t.interrupted ? "#f5a524" : "#4f8cff";
    g.fillRect(i * bw + 1, h - bh, Math.max(1, bw - 2), bh);
    if (t.interrupted) { g.fillStyle = "#f5a524"; g.fillRect(i * bw + 1, h - bh - 5, Math.max(1, bw - 2), 2); }
  });
  for (const [v, color, name] of [[p50, "#3ecf8e", "p50"], [p95, "#ff5d5d", "p95"]]) {
    const y = h - (v / top) * (h - 14);
    g.strokeStyle = color; g.setLineDash([4, 3]);
    g.beginPath(); g.moveTo(0, y); g.lineTo(w, y); g.stroke();
    g.fillStyle = color; g.font = "10px system-ui";
    g.fillText(`${name} ${Math.round(v)}`, name === "p50" ? 4 : w - 58, y - 2);
  }
  const barge = turns.filter((t) => t.interrupted).length;
  const last = turns[turns.length - 1];
  const server = serverMs(last);
  $("stats").textContent = `heard, last ${turns.length} turns · p50 ${Math.round(p50)} ms · p95 ${Math.round(p95)} ms` +
    (barge ? ` · ${barge} barge-in` : "") +
    (server != null ? ` · server ${Math.round(server)} ms last turn` : "") +
    (state.jitterBufferMs != null ? ` · jitter buffer ${state.jitterBufferMs} ms` : "");
}

function setOverlay(on) {
  document.body.classList.toggle("no-overlay", !on);
  $("overlayToggle").setAttribute("aria-pressed", String(on));
  localStorage.setItem("voxpipe.overlay", on ? "1" : "0");
  if (on) renderChart();
  clearInterval(tracePoll);
  tracePoll = on ? setInterval(pollTraces, TRACE_POLL_MS) : 0;
  if (on) pollTraces();
}

// ---------- device sessions in the overlay (GET /traces) ----------

// Devices (xiaozhi speakers) have no page: the overlay can show one of
// their recent sessions instead of this page's, from the server's log of
// recent turns. The picker appears once the server reports any.
const TRACE_POLL_MS = 2000;
let tracePoll = 0;

async function getTraces(query) {
  const resp = await fetch(`/traces?${query}`, { headers: authHeaders(), cache: "no-store" });
  if (!resp.ok) throw new Error(`GET /traces: ${resp.status}`);
  return resp.json();
}

async function pollTraces() {
  let got;
  try {
    got = await getTraces(state.source
      ? `session=${encodeURIComponent(state.source)}&limit=${HISTORY_TURNS}`
      : "transport=xiaozhi&limit=1");
  } catch {
    return; // an older server, or no access: the picker stays as it is
  }
  state.deviceSessions = got.sessions.filter((s) => s.transport === "xiaozhi");
  renderSources();
  if (!state.source) return;
  const turns = got.turns.filter((t) => t.session === state.source);
  const last = state.sourceTraces[state.sourceTraces.length - 1];
  const newest = turns[turns.length - 1];
  state.sourceTraces = turns;
  if (newest && (!last || newest.at !== last.at || newest.turn !== last.turn)) renderTrace(newest);
}

function renderSources() {
  const sel = $("traceSource");
  const known = new Set(state.deviceSessions.map((s) => s.session));
  if (state.source) known.add(state.source);
  $("sourceRow").hidden = known.size === 0;
  const want = ["", ...state.deviceSessions.map((s) => s.session)];
  if (state.source && !want.includes(state.source)) want.push(state.source);
  const have = [...sel.options].map((o) => o.value);
  if (want.join("\n") === have.join("\n")) {
    for (const o of sel.options) o.textContent = sourceLabel(o.value);
    return;
  }
  sel.replaceChildren(...want.map((v) => {
    const o = document.createElement("option");
    o.value = v;
    o.textContent = sourceLabel(v);
    return o;
  }));
  sel.value = state.source;
}

function sourceLabel(id) {
  if (!id) return "this page";
  const s = state.deviceSessions.find((d) => d.session === id);
  if (!s) return `device session ${id.slice(0, 8)}`;
  return `xiaozhi ${s.device || s.session.slice(0, 8)} · ${s.turns} turn${s.turns === 1 ? "" : "s"}`;
}

function selectSource(id) {
  state.source = id;
  state.sourceTraces = [];
  $("waterfall").replaceChildren();
  $("v2v").textContent = "–";
  $("v2vServer").textContent = "";
  $("v2vTurn").textContent = "";
  $("prefill").hidden = true;
  if (!id) {
    const last = state.traces[state.traces.length - 1];
    if (last) renderTrace(last); else renderChart();
    return;
  }
  renderChart();
  pollTraces();
}

// ---------- wiring ----------

$("connect").addEventListener("click", () => (wantConnected ? disconnect() : connect()));
const talkBtn = $("talk");
const press = (e) => { e.preventDefault(); talking = true; updateTalkButton(); };
const release = () => { if (talking) { talking = false; updateTalkButton(); } };
talkBtn.addEventListener("pointerdown", press);
for (const ev of ["pointerup", "pointercancel", "pointerleave"]) talkBtn.addEventListener(ev, release);
window.addEventListener("keydown", (e) => {
  if (e.target instanceof HTMLInputElement) return;
  if (e.code === "Space" && !e.repeat) press(e);
  if (e.key === "t" || e.key === "T") setOverlay(document.body.classList.contains("no-overlay"));
});
window.addEventListener("keyup", (e) => { if (e.code === "Space") release(); });
$("alwaysOn").checked = alwaysOn;
$("alwaysOn").addEventListener("change", (e) => {
  alwaysOn = e.target.checked;
  localStorage.setItem("voxpipe.alwaysOn", alwaysOn ? "1" : "0");
  updateTalkButton();
});
$("overlayToggle").addEventListener("click", () => setOverlay(document.body.classList.contains("no-overlay")));
$("traceSource").addEventListener("change", (e) => selectSource(e.target.value));
document.addEventListener("click", () => { $("player").play?.().catch(() => {}); sharedCtx?.resume(); });
window.addEventListener("resize", renderChart);
window.addEventListener("pagehide", () => session?.close());
setOverlay(localStorage.getItem("voxpipe.overlay") !== "0" && params.get("overlay") !== "0");
updateTalkButton();
if (params.get("autoconnect") === "1") connect();
