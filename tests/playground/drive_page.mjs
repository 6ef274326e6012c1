// Drives the `tfm serve` playground in headless Chromium over the DevTools protocol (CDP on
// --remote-debugging-pipe: no npm package, no browser download, no port of its own), the way a
// person would: load the page, type a message, press Enter, wait for the streamed reply, take a
// screenshot. Prints one JSON line with what the page showed; the caller asserts on it
// (tests/playground/playground_test.sh).
//
//   node drive_page.mjs --chromium /usr/bin/chromium --url http://127.0.0.1:PORT/ \
//        --message "hello" --screenshot out.png [--timeout-ms 60000] [--settings '{"temperature":0}']
//   node drive_page.mjs ... --image picture.png --screenshot out.png     (an image classifier)
// With --image, the picture goes in twice: chosen through the file field (CDP's
// DOM.setFileInputFiles, what the file chooser does) and dropped on the drop zone (a drop event
// carrying the file's bytes); each time the page's predictions and heat map are collected.
//
// Chromium runs headless with --no-sandbox (CI runs as root), a throw-away profile, and a host
// resolver that maps every name except 127.0.0.1 to nothing, so the page can reach only the server.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const need of ["chromium", "url", args.image ? "image" : "message", "screenshot"]) {
  if (!args[need]) { console.error(`drive_page: --${need} is required`); process.exit(2); }
}
const timeoutMs = Number(args["timeout-ms"] || 60000);
const settings = JSON.parse(args.settings || "{}");

const profile = mkdtempSync(join(tmpdir(), "tfm-chromium-"));
const browser = spawn(args.chromium, [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  "--remote-debugging-pipe", `--user-data-dir=${profile}`, "--no-first-run", "--no-default-browser-check",
  "--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--disable-domain-reliability", "--no-pings", "--metrics-recording-only", "--mute-audio",
  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--window-size=1280,900",
  "--force-device-scale-factor=1", "about:blank",
], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });  // fd 3: commands in, fd 4: replies out
let browserLog = "";
browser.stderr.on("data", (d) => { browserLog = (browserLog + d).slice(-4000); });

function finish(code, result) {
  try { browser.kill("SIGKILL"); } catch (_) { /* already gone */ }
  try { rmSync(profile, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  if (result) console.log(JSON.stringify(result));
  process.exit(code);
}
const timer = setTimeout(() => {
  console.error(`drive_page: timed out after ${timeoutMs} ms (step: ${step}); chromium said:\n${browserLog}`);
  finish(1);
}, timeoutMs);
browser.on("exit", (code, signal) => {
  console.error(`drive_page: chromium exited early (${code ?? signal}) at step: ${step}\n${browserLog}`);
  finish(1);
});

// ---- CDP over the pipe: JSON messages separated by NUL bytes -----------------------------
const toBrowser = browser.stdio[3], fromBrowser = browser.stdio[4];
let nextId = 1, buffered = "";
const pending = new Map(), listeners = [];
fromBrowser.on("data", (chunk) => {
  buffered += chunk.toString("utf8");
  let cut;
  while ((cut = buffered.indexOf("\0")) >= 0) {
    const msg = JSON.parse(buffered.slice(0, cut));
    buffered = buffered.slice(cut + 1);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject, method } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(`${method}: ${msg.error.message}`)); else resolve(msg.result);
    } else if (msg.method) {
      for (const l of listeners.slice()) l(msg);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
function once(method, sessionId) {
  return new Promise((resolve) => {
    const l = (m) => { if (m.method === method && m.sessionId === sessionId) { listeners.splice(listeners.indexOf(l), 1); resolve(m.params); } };
    listeners.push(l);
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let step = "start";
try {
  step = "open a tab";
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  const evaluate = async (expression) => {
    const r = await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`page script failed: ${r.exceptionDetails.text} in ${expression}`);
    return r.result.value;
  };
  const waitFor = async (what, expression, pollMs = 50) => {
    step = what;
    for (;;) { if (await evaluate(expression)) return; await sleep(pollMs); }
  };
  const consoleErrors = [];
  listeners.push((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === "Runtime.exceptionThrown") consoleErrors.push(m.params.exceptionDetails.exception?.description || m.params.exceptionDetails.text);
    if (m.method === "Runtime.consoleAPICalled" && m.params.type === "error") consoleErrors.push(m.params.args.map((a) => a.value ?? a.description).join(" "));
  });
  await page("Page.enable");
  await page("Runtime.enable");
  await page("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });

  step = "load the page";
  const loaded = once("Page.loadEventFired", sessionId);
  const nav = await page("Page.navigate", { url: args.url });
  if (nav.errorText) throw new Error(`navigation to ${args.url} failed: ${nav.errorText}`);
  await loaded;
  const title = await evaluate("document.title");

  // Settings (the API key among them), as a person would: set the field and fire its change
  // event (a new key makes the page ask for the model list again).
  step = "fill the settings";
  for (const [id, value] of Object.entries(settings)) {
    await evaluate(`(() => { const e = document.getElementById(${JSON.stringify(id)}); e.value = ${JSON.stringify(String(value))};
                     e.dispatchEvent(new Event("change")); return true; })()`);
  }
  await waitFor("wait for the model name", `document.getElementById("model-status").textContent.startsWith("model:")`);
  const modelStatus = await evaluate(`document.getElementById("model-status").textContent`);

  if (args.image) {
    // What the picture section shows once a classification finished (state done or error).
    const result = async (what) => {
      await waitFor(what, `["done", "error"].includes(document.getElementById("vision").dataset.state)`);
      return evaluate(`(() => { const v = document.getElementById("vision"), img = document.getElementById("overlay");
        return { state: v.dataset.state, label: v.dataset.label, note: document.getElementById("vision-note").textContent,
                 predictions: [...document.querySelectorAll("#predictions li")].map((li) => ({ label: li.dataset.label, text: li.textContent })),
                 overlay: img.hidden ? null : img.src, overlayWidth: img.naturalWidth, overlayHeight: img.naturalHeight,
                 chatHidden: getComputedStyle(document.getElementById("chat")).display === "none",
                 visionShown: getComputedStyle(v).display !== "none" }; })()`);
    };
    await waitFor("wait for the picture section", `!document.getElementById("vision").hidden`);
    step = "choose the file";
    const { root } = await page("DOM.getDocument", { depth: 1 });
    const { nodeId } = await page("DOM.querySelector", { nodeId: root.nodeId, selector: "#image-file" });
    await page("DOM.setFileInputFiles", { nodeId, files: [resolve(args.image)] });
    const chosen = await result("wait for the chosen file's classes");
    step = "drop the file";
    await evaluate(`(() => { document.getElementById("vision").dataset.state = "idle"; return true; })()`);
    const bytes = readFileSync(args.image).toString("base64");
    const type = args.image.endsWith(".png") ? "image/png" : "image/jpeg";
    await evaluate(`(() => { const bin = atob(${JSON.stringify(bytes)}); const a = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
      const dt = new DataTransfer(); dt.items.add(new File([a], ${JSON.stringify(basename(args.image))}, { type: ${JSON.stringify(type)} }));
      document.getElementById("drop").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
      return true; })()`);
    const dropped = await result("wait for the dropped file's classes");
    step = "take the screenshot";
    const { cssContentSize: size } = await page("Page.getLayoutMetrics");
    const shot = await page("Page.captureScreenshot", { format: "png", captureBeyondViewport: true,
      clip: { x: 0, y: 0, width: Math.ceil(size.width), height: Math.ceil(size.height), scale: 1 } });
    writeFileSync(args.screenshot, Buffer.from(shot.data, "base64"));
    clearTimeout(timer);
    browser.removeAllListeners("exit");
    finish(0, { title, modelStatus, chosen, dropped, consoleErrors });
  }

  // Type the message into the box with real input events and press Enter.
  step = "type the message";
  await evaluate(`document.getElementById("input").focus(), true`);
  await page("Input.insertText", { text: args.message });
  const typed = await evaluate(`document.getElementById("input").value`);
  const key = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
  await page("Input.dispatchKeyEvent", { type: "keyDown", ...key, text: "\r" });
  await page("Input.dispatchKeyEvent", { type: "keyUp", ...key });

  // While the reply streams, sample its text: the lengths seen on the way.
  await waitFor("wait for the reply to start", `!!document.querySelector(".msg.assistant")`, 5);
  step = "wait for the stream to end";
  const lengthsSeen = new Set();
  for (;;) {
    const s = await evaluate(`(() => { const m = [...document.querySelectorAll(".msg.assistant")].pop();
                                return [m.dataset.state, m.querySelector(".content").textContent.length]; })()`);
    lengthsSeen.add(s[1]);
    if (s[0] !== "streaming") break;
    await sleep(5);
  }
  const reply = await evaluate(`(() => { const m = [...document.querySelectorAll(".msg.assistant")].pop();
    return { state: m.dataset.state, chunks: Number(m.dataset.chunks), text: m.querySelector(".content").textContent,
             timings: m.querySelector(".timings").textContent, userText: [...document.querySelectorAll(".msg.user")].pop().textContent }; })()`);

  // The heat map follows the reply when the server offers /v1/attention.
  step = "wait for the attention heat map";
  let attention = null;
  for (let i = 0; i < 200; i++) {
    attention = await evaluate(`(() => { const s = document.getElementById("attention"); const c = document.getElementById("heatmap");
      return s.hidden ? null : { note: document.getElementById("attn-note").textContent, width: c.width, height: c.height }; })()`);
    if (attention && (attention.width > 0 || attention.note.startsWith("no heat map"))) break;
    await sleep(25);
  }

  step = "take the screenshot";
  const { cssContentSize: size } = await page("Page.getLayoutMetrics");  // the whole page, not only the window
  const shot = await page("Page.captureScreenshot", { format: "png", captureBeyondViewport: true,
    clip: { x: 0, y: 0, width: Math.ceil(size.width), height: Math.ceil(size.height), scale: 1 } });
  writeFileSync(args.screenshot, Buffer.from(shot.data, "base64"));

  clearTimeout(timer);
  browser.removeAllListeners("exit");
  finish(0, { title, modelStatus, typed, reply, partialLengths: [...lengthsSeen].sort((a, b) => a - b), attention, consoleErrors });
} catch (e) {
  console.error(`drive_page: ${e.message} (step: ${step})`);
  browser.removeAllListeners("exit");
  finish(1);
}
