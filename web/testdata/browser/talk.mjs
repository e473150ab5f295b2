// Opens the voxpipe page in headless Chromium with a WAV file as the
// microphone, waits for the traces of the turns the WAV speaks and prints
// what the page saw as JSON. Usage: node talk.mjs <page url> <wav> <screenshot.png>
// CHROMIUM overrides the browser path (default /usr/bin/chromium);
// TALK_TURNS (default 1) is how many questions the WAV asks: the page is
// done when it has that many traces, the WAV has played out and no turn
// with a final transcript is still waiting for its trace;
// TALK_TIMEOUT_MS (default 90000) bounds that wait, and an error names what
// was missing; TALK_EXPECT=busy waits for the server-busy notice instead.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const [url, wav, shot] = process.argv.slice(2);
const timeoutMs = Number(process.env.TALK_TIMEOUT_MS || 90000);
const turns = Number(process.env.TALK_TURNS || 1);
const wavMs = wavDurationMs(wav);

// wavDurationMs reads a PCM WAV's length from its fmt and data chunks.
function wavDurationMs(path) {
  const b = readFileSync(path);
  let byteRate = 0;
  for (let off = 12; off + 8 <= b.length;) {
    const id = b.toString("ascii", off, off + 4), size = b.readUInt32LE(off + 4);
    if (id === "fmt ") byteRate = b.readUInt32LE(off + 16);
    if (id === "data" && byteRate) return (Math.min(size, b.length - off - 8) / byteRate) * 1000;
    off += 8 + size + (size & 1);
  }
  throw new Error(`${path}: not a PCM WAV`);
}

// What the page's overlay shows now.
function overlay() {
  return {
    v2vText: document.getElementById("v2v").textContent,
    waterfallRows: document.querySelectorAll("#waterfall .lane").length,
  };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
    `--use-file-for-fake-audio-capture=${wav}%noloop`,
    "--autoplay-policy=no-user-gesture-required",
  ],
});
const logs = [];
let result, first = null;
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  if (process.env.TALK_EXPECT === "busy") {
    // A full server: the page must say so (and keep retrying).
    await page.waitForFunction(() => /busy/i.test(document.getElementById("notice").textContent), null, { timeout: timeoutMs });
  } else {
    const started = Date.now();
    const left = () => Math.max(1000, timeoutMs - (Date.now() - started));
    try {
      await page.waitForFunction(() => window.voxpipe && window.voxpipe.traces.length > 0, null, { timeout: left() });
      // The overlay as the first turn left it (renderTrace runs on the
      // trace event; the next question is seconds away).
      first = await page.evaluate(overlay);
      // The fake microphone starts after the page loaded: the WAV's length
      // from here is a lower bound, and the WAV ends in silence.
      await page.waitForFunction(([n, until]) => {
        const s = window.voxpipe;
        const traced = new Set(s.traces.map((t) => String(t.turn)));
        const open = Object.keys(s.transcripts).filter((turn) => s.transcripts[turn].final && !traced.has(turn));
        return Date.now() >= until && s.traces.length >= n && open.length === 0;
      }, [turns, started + wavMs], { timeout: left(), polling: 100 });
    } catch (err) {
      const s = await page.evaluate(() => ({
        traces: (window.voxpipe?.traces || []).map((t) => t.turn),
        finals: Object.entries(window.voxpipe?.transcripts || {}).filter(([, tr]) => tr.final).map(([turn, tr]) => `${turn}: ${tr.text}`),
        status: window.voxpipe?.status,
      }));
      throw new Error(`waited ${Math.round((Date.now() - started) / 1000)} s (WAV ${Math.round(wavMs / 1000)} s) for the traces of ${turns} turns: ` +
        `got the traces of turns [${s.traces}]; final transcripts [${s.finals.join("; ")}]; status ${s.status} (${err.message.split("\n")[0]})`);
    }
  }
  // Let the overlay render and the rest of the answer play.
  await page.waitForTimeout(500);
  result = await page.evaluate(() => ({
    state: window.voxpipe,
    v2vText: document.getElementById("v2v").textContent,
    waterfallRows: document.querySelectorAll("#waterfall .lane").length,
    rtcInbound: window.voxpipe.rtcInbound,
    statusText: document.getElementById("status").textContent,
    noticeText: document.getElementById("notice").textContent,
    userText: [...document.querySelectorAll(".msg.user")].map((e) => e.textContent),
    botText: [...document.querySelectorAll(".msg.bot")].map((e) => e.textContent),
  }));
  await page.screenshot({ path: shot, fullPage: true });
  // The same page on a phone-sized screen: the overlay moves below the chat.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(200);
  await page.screenshot({ path: shot.replace(/\.png$/, "-phone.png"), fullPage: true });
  result.firstOverlay = first;
} catch (err) {
  result = { error: String(err) };
} finally {
  await browser.close();
}
result.logs = logs;
process.stdout.write(JSON.stringify(result) + "\n");
