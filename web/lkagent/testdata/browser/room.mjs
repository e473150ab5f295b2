// Opens room.html in headless Chromium with a WAV file as the microphone,
// waits for the agent's first trace (and the turn's audio heard) and
// prints window.lk as JSON. Usage: node room.mjs <page url> <wav>
// CHROMIUM overrides the browser path (default /usr/bin/chromium);
// ROOM_TIMEOUT_MS (default 60000) bounds the wait.
import { chromium } from "playwright-core";

const [url, wav] = process.argv.slice(2);
const timeout = Number(process.env.ROOM_TIMEOUT_MS || 60000);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
    "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
    `--use-file-for-fake-audio-capture=${wav}%noloop`,
    "--autoplay-policy=no-user-gesture-required",
  ],
});
const logs = [];
let out;
try {
  const page = await browser.newPage();
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  let error = "";
  try {
    await page.waitForFunction(() => {
      const s = window.lk;
      if (!s || s.status === "error") return true;
      const tr = s.events.find((e) => e.type === "trace");
      return tr && (s.audible[tr.turn] || 0) > 0;
    }, null, { timeout, polling: 100 });
  } catch (e) {
    error = String(e);
  }
  out = { error, lk: await page.evaluate(() => window.lk), logs };
} catch (e) {
  out = { error: String(e), logs };
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
