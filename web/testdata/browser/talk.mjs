// Opens the voxpipe page in headless Chromium with a WAV file as the
// microphone, waits for the first turn's trace and prints what the page
// saw as JSON. Usage: node talk.mjs <page url> <wav> <screenshot.png>
// CHROMIUM overrides the browser path (default /usr/bin/chromium);
// TALK_EXPECT=busy waits for the server-busy notice instead of a turn.
import { chromium } from "playwright-core";

const [url, wav, shot] = process.argv.slice(2);
const timeoutMs = Number(process.env.TALK_TIMEOUT_MS || 90000);

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
let result;
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  if (process.env.TALK_EXPECT === "busy") {
    // A full server: the page must say so (and keep retrying).
    await page.waitForFunction(() => /busy/i.test(document.getElementById("notice").textContent), null, { timeout: timeoutMs });
  } else {
    await page.waitForFunction(() => window.voxpipe && window.voxpipe.traces.length > 0, null, { timeout: timeoutMs });
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
} catch (err) {
  result = { error: String(err) };
} finally {
  await browser.close();
}
result.logs = logs;
process.stdout.write(JSON.stringify(result) + "\n");
