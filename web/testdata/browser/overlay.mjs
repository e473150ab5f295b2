// Opens the voxpipe page in headless Chromium without connecting, picks
// the first device session in the latency overlay's "traces of" list and
// prints what the overlay shows (its tool-call rows too) as JSON. Usage:
// node overlay.mjs <page url> <screenshot.png>
// CHROMIUM overrides the browser path (default /usr/bin/chromium).
import { chromium } from "playwright-core";

const [url, shot] = process.argv.slice(2);
const timeoutMs = Number(process.env.OVERLAY_TIMEOUT_MS || 30000);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const logs = [];
let result;
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  // The picker lists the device sessions the server reports.
  await page.waitForFunction(() => document.querySelectorAll("#traceSource option").length > 1, null, { timeout: timeoutMs });
  const options = await page.evaluate(() => [...document.querySelectorAll("#traceSource option")].map((o) => ({ value: o.value, text: o.textContent })));
  await page.selectOption("#traceSource", options[1].value);
  await page.waitForFunction(() => window.voxpipe.sourceTraces.length > 0 && document.querySelectorAll("#waterfall .bar").length > 0,
    null, { timeout: timeoutMs });
  await page.waitForTimeout(200);
  result = await page.evaluate(() => ({
    options: [...document.querySelectorAll("#traceSource option")].map((o) => ({ value: o.value, text: o.textContent })),
    source: window.voxpipe.source,
    sourceTraces: window.voxpipe.sourceTraces,
    v2vText: document.getElementById("v2v").textContent,
    turnText: document.getElementById("v2vTurn").textContent,
    bars: document.querySelectorAll("#waterfall .bar").length,
    toolRows: [...document.querySelectorAll("#waterfall span.tool")].map((e) => e.textContent),
    toolBars: document.querySelectorAll("#waterfall .bar.tool").length,
    stats: document.getElementById("stats").textContent,
  }));
  await page.screenshot({ path: shot, fullPage: true });
  // Back to this page's own session: the overlay empties again.
  await page.selectOption("#traceSource", "");
  await page.waitForTimeout(100);
  result.pageV2VText = await page.evaluate(() => document.getElementById("v2v").textContent);
} catch (err) {
  result = { error: String(err) };
} finally {
  await browser.close();
}
result.logs = logs;
process.stdout.write(JSON.stringify(result) + "\n");
