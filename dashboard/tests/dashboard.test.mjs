// The dashboard in a real browser (Debian's Chromium, headless, driven by playwright-core)
// against a running router that serves the API and the dashboard over HTTPS with a
// self-signed certificate.
//
// Environment (scripts/browser-test sets it):
//   DASHBOARD_URL            the page, https://HOST:PORT/
//   DASHBOARD_ADMIN_TOKEN    an admin token of that router
//   DASHBOARD_READER_TOKEN   a reader token of that router
//   DASHBOARD_API_URL        where the test itself calls the API (default: DASHBOARD_URL)
//   DASHBOARD_NODES          optional JSON: [{"name","url","admin","reader"}] of every node of a
//                            demo topology, for the route check (a gateway's NI is taken down
//                            on the gateway, the route goes down on the node routing through it)
//   DASHBOARD_OUT            where screenshots and results.json go
//   CHROMIUM                 the browser (default /usr/bin/chromium)
//   ROUTE_TIMEOUT_S          how long the route check waits for the route to go down (120)
//   DASHBOARD_TZ             the browser's time zone (default America/St_Johns: UTC-3:30 or
//                            -2:30, so that a time shown in UTC or the runner's zone shows)
//
// It prints one line per check and closes with "N passed, N failed".

import { X509Certificate, createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { chromium } from "playwright-core";

const BASE = new URL(process.env.DASHBOARD_URL ?? "");
const API_BASE = new URL(process.env.DASHBOARD_API_URL ?? BASE.href);
const ADMIN = process.env.DASHBOARD_ADMIN_TOKEN ?? "";
const READER = process.env.DASHBOARD_READER_TOKEN ?? "";
const NODES = process.env.DASHBOARD_NODES ? JSON.parse(process.env.DASHBOARD_NODES) : [];
const OUT = process.env.DASHBOARD_OUT ?? "target/test-output/dashboard";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ROUTE_TIMEOUT_S = Number(process.env.ROUTE_TIMEOUT_S ?? 120);
const BUDGET = 500 * 1024;
const TZ = process.env.DASHBOARD_TZ ?? "America/St_Johns";

if (BASE.protocol !== "https:" || !ADMIN || !READER) {
  console.error("DASHBOARD_URL (https), DASHBOARD_ADMIN_TOKEN and DASHBOARD_READER_TOKEN are needed");
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });

const results = [];
let passed = 0;
let failed = 0;
function check(name, ok, detail = "") {
  results.push({ name, ok, detail });
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? ` — ${detail}` : ""}`);
}
function note(text) {
  results.push({ name: text, ok: null });
  console.log(`note ${text}`);
}

// ---------------------------------------------------------------------------------------
// The server's certificate, pinned: the browser ignores certificate errors for this key
// only, and the test's own API calls trust this certificate only.

function peerCert(url) {
  return new Promise((resolve, reject) => {
    const s = connect({ host: url.hostname, port: Number(url.port || 443), servername: "localhost", rejectUnauthorized: false }, () => {
      const c = s.getPeerCertificate(true);
      s.end();
      resolve(c);
    });
    s.on("error", reject);
  });
}

function pem(der) {
  const b64 = der.toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

const certs = new Map(); // origin -> PEM

async function pin(url) {
  const c = await peerCert(url);
  const x = new X509Certificate(c.raw);
  certs.set(url.origin, pem(c.raw));
  const spki = createHash("sha256").update(x.publicKey.export({ type: "spki", format: "der" })).digest("base64");
  return { spki, selfSigned: x.issuer === x.subject, subject: x.subject, san: x.subjectAltName };
}

function call(method, base, path, token, body) {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: certs.get(url.origin),
        checkServerIdentity: () => undefined, // the certificate is pinned: it is the only one trusted
        headers: {
          Authorization: `Bearer ${token}`,
          Accept: "application/json",
          ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let json = null;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = null;
          }
          resolve({ status: res.statusCode, json, text });
        });
      },
    );
    req.on("error", reject);
    if (body !== undefined) req.write(JSON.stringify(body));
    req.end();
  });
}

const api = (method, path, body, token = ADMIN, base = API_BASE) => call(method, base, `/api/v1/${path}`, token, body);
const seg = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Seconds since midnight of a wall-clock time (Unix ms) in the browser's time zone. */
function secondsOfDay(wallMs) {
  const parts = new Intl.DateTimeFormat("en-GB", { timeZone: TZ, hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })
    .formatToParts(new Date(wallMs))
    .reduce((o, p) => ({ ...o, [p.type]: Number(p.value) }), {});
  return parts.hour * 3600 + parts.minute * 60 + parts.second;
}

/** Seconds since midnight of a shown `HH:MM:SS` (the last one in the text), or null. */
function shownSeconds(text) {
  const m = [...(text ?? "").matchAll(/(\d\d):(\d\d):(\d\d)/g)].pop();
  return m ? Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) : null;
}

/** How far apart two times of day are, in seconds (across midnight too). */
function daySpan(a, b) {
  const d = Math.abs(a - b) % 86400;
  return Math.min(d, 86400 - d);
}

/** The page's event rows: [id, type] of each. */
async function eventRows() {
  return page.$$eval("[data-table=events] tbody tr", (rows) => rows.map((r) => [Number(r.cells[0].textContent), r.getAttribute("data-event")]));
}

async function until(what, fn, timeoutMs, stepMs = 250) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last !== null && last !== undefined && last !== false) return last;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}

// ---------------------------------------------------------------------------------------

const pinned = await pin(BASE);
if (API_BASE.origin !== BASE.origin) await pin(API_BASE);
for (const n of NODES) if (!certs.has(new URL(n.url).origin)) await pin(new URL(n.url));
check("the server presents a self-signed certificate", pinned.selfSigned, `${pinned.subject.replace(/\n/g, ", ")}; ${pinned.san ?? ""}`);

const profile = mkdtempSync(join(tmpdir(), "dashboard-chromium-"));
const spkis = [pinned.spki];
for (const n of NODES) {
  const p = await pin(new URL(n.url));
  if (!spkis.includes(p.spki)) spkis.push(p.spki);
}
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  viewport: { width: 1440, height: 900 },
  timezoneId: TZ,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--ignore-certificate-errors-spki-list=${spkis.join(",")}`,
  ],
});

const requests = [];
context.on("request", (r) => requests.push(r));
const page = context.pages()[0] ?? (await context.newPage());
const consoleErrors = [];
page.on("console", (m) => {
  // The role probe (a health reset of a NI that cannot exist) answers 400 or 403 by design.
  if (m.type() === "error" && !m.location().url.includes("/nis/role-check/")) consoleErrors.push(`${m.text()} ${m.location().url}`);
});
page.on("pageerror", (e) => consoleErrors.push(String(e)));

async function shot(name) {
  const path = join(OUT, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  note(`screenshot ${path}`);
}

async function signIn(token) {
  if (await page.locator("[data-logout]").count()) await page.click("[data-logout]");
  await page.fill("[data-token-input]", token);
  await page.click("[data-login]");
  await page.waitForSelector("[data-role-badge]", { timeout: 15000 });
  await view("overview");
}

async function view(name) {
  await page.click(`[data-nav="${name}"]`);
  await page.waitForSelector(`[data-view="${name}"]`, { timeout: 10000 });
}

let exitCode = 0;
try {
  // 1. The page over HTTPS with the self-signed certificate.
  const resp = await page.goto(BASE.href, { waitUntil: "load" });
  check("the page loads over HTTPS with the pinned self-signed certificate", resp?.ok() === true && page.url().startsWith("https:"), page.url());
  check("the page is a secure context", await page.evaluate(() => window.isSecureContext));
  await page.waitForSelector("[data-token-input]", { timeout: 10000 });

  // 2. Admin: the overview shows every NI.
  await signIn(ADMIN);
  await page.evaluate(() => {
    window.__sameDocument = "no reload since sign-in";
  });
  check("an admin token is recognised as admin", (await page.getAttribute("[data-role-badge]", "data-role-badge")) === "admin");
  const storage = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: Object.keys(localStorage), cookie: document.cookie }));
  check("the token is kept in sessionStorage only", storage.session.length === 1 && storage.local.length === 0 && storage.cookie === "", JSON.stringify(storage));

  const nets = (await api("GET", "nets")).json;
  const localNis = nets.nets.filter((n) => n.net_type !== "lo").flatMap((n) => n.nis.map((ni) => ni.nid));
  const allNis = nets.nets.flatMap((n) => n.nis.map((ni) => ni.nid));
  await page.waitForSelector('[data-table="nis"] tr[data-ni]', { timeout: 10000 });
  const shown = await page.$$eval('[data-table="nis"] tr[data-ni]', (rows) => rows.map((r) => r.getAttribute("data-ni")));
  const missing = allNis.filter((n) => !shown.includes(n));
  check("the overview shows every NI", missing.length === 0 && allNis.length > 0, `${allNis.join(", ")}${missing.length ? `; missing ${missing.join(", ")}` : ""}`);
  for (const nid of localNis) {
    const h = await page.getAttribute(`[data-table="nis"] [data-health-of="${nid}"]`, "data-health");
    const want = nets.nets.flatMap((n) => n.nis).find((ni) => ni.nid === nid).health_stats["health value"];
    check(`the overview shows the health of ${nid}`, Number(h) === want, `${h} on screen, ${want} from the API`);
  }
  check("an admin token sees reset buttons", (await page.locator("[data-reset]").count()) >= localNis.length);
  await shot("overview");

  // 3. A fault rule on a local NI: its health falls on its chart, it joins the recovery queue.
  const peers = (await api("GET", "peers")).json.peers;
  await view("health");
  const fallsBefore = new Map();
  for (const nid of localNis) fallsBefore.set(nid, Number((await page.getAttribute(`[data-chart-of="${nid}"]`, "data-falls")) ?? 0));
  // `lnetctl fault drop add --local_nid NID -s * -d * -x -e local_timeout`: every send from
  // that NI fails with LOCAL_TIMEOUT.
  const target = localNis[0];
  const r = await api("POST", `nis/${seg(target)}/fault-rules`, {
    kind: "drop",
    source: "*",
    dest: "*",
    trigger: "all",
    health_error: "local_timeout",
  });
  if (r.status !== 201) throw new Error(`adding a fault rule on ${target}: ${r.status} ${r.text}`);
  const rule = r.json.id;
  note(`fault rule ${rule} on ${target}: every send fails with LOCAL_TIMEOUT`);
  check("a fault rule can be injected through the API", true, target);

  const net = target.split("@")[1];
  const peerOnNet = peers.flatMap((p) => p.nis.map((n) => n.nid)).find((n) => n.split("@")[1] === net);
  const traffic = (async () => {
    // Sends on the NI (besides whatever traffic the node has): pings of a peer on its net.
    for (let i = 0; i < 6 && peerOnNet; i++) await api("POST", "ping", { nid: peerOnNet, timeout_ms: 1000 });
  })();
  const t0 = Date.now();
  const fell = await until(
    `the health chart of ${target} to fall`,
    async () => {
      const falls = Number(await page.getAttribute(`[data-chart-of="${target}"]`, "data-falls"));
      const last = await page.getAttribute(`[data-chart-of="${target}"]`, "data-min");
      return falls > fallsBefore.get(target) ? Number(last) : null;
    },
    20000,
  ).catch(() => null);
  check(`the health of ${target} falls on its chart, live`, fell != null, fell != null ? `a new fall drawn ${Date.now() - t0} ms after the fault` : "");
  // The heading shows the NI's health from the node's last `net show`, which the page
  // refreshes on its own period (the chart follows the event stream): wait for it.
  const headValue = await until(
    `the heading of ${target} to show the fall`,
    async () => {
      const v = await page.getAttribute(`[data-health-card="${target}"] [data-health-of="${target}"]`, "data-health");
      return v !== null && v !== "" && Number(v) < 1000 ? v : null;
    },
    15000,
  ).catch(() => null);
  check(`the chart's heading shows the fallen health of ${target}`, headValue != null, `${headValue}`);
  await traffic;
  await sleep(1500);
  await shot("health");

  await view("recovery");
  const t1 = Date.now();
  const queued = await page
    .waitForSelector(`[data-queue="local"] tr[data-recovery="${target}"]`, { timeout: 15000 })
    .then(() => true)
    .catch(() => false);
  check(`${target} appears in the local NI recovery queue view, live`, queued, queued ? `${Date.now() - t1} ms after the view opened` : "");
  check(
    "the page was not reloaded",
    (await page.evaluate(() => window.__sameDocument)) === "no reload since sign-in",
  );
  await sleep(2500);
  await shot("recovery");

  // 4. Reset health (admin): back to 1000 on screen.
  const d = await api("DELETE", `nis/${seg(target)}/fault-rules/${rule}`);
  note(`fault rule ${rule} removed (${d.status})`);
  await view("health");
  const card = `[data-health-card="${target}"]`;
  const before = await until(
    `${target} below 1000 before the reset`,
    async () => {
      const v = Number(await page.getAttribute(`${card} [data-health-of="${target}"]`, "data-health"));
      return v < 1000 ? v : null;
    },
    5000,
  ).catch(() => null);
  await page.click(`${card} [data-reset="${target}"]`);
  await page.waitForSelector("[role=dialog]", { timeout: 5000 });
  check("reset health asks for a confirmation", (await page.textContent("[role=dialog]")).includes(target));
  await shot("reset-confirmation");
  const t2 = Date.now();
  await page.click("[role=dialog] [data-confirm]");
  const back = await until(
    `${target} back to 1000 on screen`,
    async () => {
      await view("overview");
      const v = await page.getAttribute(`[data-table="nis"] [data-health-of="${target}"]`, "data-health");
      return Number(v) === 1000;
    },
    3000,
  ).catch(() => false);
  check(`reset health brings ${target} back to 1000 on screen`, back === true, `from ${before} in ${Date.now() - t2} ms`);
  await view("recovery");
  const left = await page
    .waitForSelector(`[data-queue="local"] tr[data-recovery="${target}"]`, { state: "detached", timeout: 5000 })
    .then(() => true)
    .catch(() => false);
  check(`${target} leaves the recovery queue view`, left);
  const chartReset = await (async () => {
    await view("health");
    return until(
      "the chart at 1000 with a reset mark",
      async () => {
        const last = await page.getAttribute(`[data-chart-of="${target}"]`, "data-last");
        const marks = (await page.getAttribute(`[data-chart-of="${target}"]`, "data-marks")) ?? "";
        return Number(last) === 1000 && marks.includes("reset") && marks.includes("fault");
      },
      5000,
    ).catch(() => false);
  })();
  check(`the chart of ${target} is back at 1000 with the fault and the reset marked`, chartReset === true);
  await shot("health-after-reset");

  // 5. Peers and events.
  await view("peers");
  const peerNis = peers.flatMap((p) => p.nis.map((n) => n.nid));
  const peerRows = await page.$$eval("[data-peer-ni]", (rows) => rows.map((r) => r.getAttribute("data-peer-ni")));
  check("the peers view lists every peer NI", peerNis.every((n) => peerRows.includes(n)), peerNis.join(", "));
  if (peerNis.length > 0) {
    await page.fill('[data-search="peers"]', peerNis[0]);
    const filtered = await page.$$eval("[data-peer-ni]", (rows) => rows.map((r) => r.getAttribute("data-peer-ni")));
    check("the peers search filters by NID", filtered.includes(peerNis[0]) && filtered.length <= peerNis.length);
    await page.fill('[data-search="peers"]', "");
  }
  await shot("peers");

  await view("events");
  const types = await page.$$eval("[data-event]", (rows) => rows.map((r) => r.getAttribute("data-event")));
  check("the events view shows health, recovery and admin events", ["health", "recovery_queued", "admin"].every((t) => types.includes(t)), [...new Set(types)].join(", "));
  await page.fill('[data-search="events"]', target);
  const filteredEvents = await page.$$eval("[data-table=events] tbody tr td:last-child", (cells) => cells.map((c) => c.textContent));
  check("the events filter keeps only matching events", filteredEvents.length > 0 && filteredEvents.every((t) => t.includes(target)));
  await page.fill('[data-search="events"]', "");
  await shot("events");

  // 5b. The event log on opening: the newest page of the server's log, older pages on
  // demand, no event twice where the page and the stream meet, times on the browser's clock.
  await eventLogCheck(target);

  // 6. The route table view (the route check itself comes last: it may open another node).
  await view("routes");
  const routesDoc = await api("GET", "routes");
  const routingDoc = await api("GET", "routing");
  if (routesDoc.status === 200) {
    const rows = routesDoc.json.routes;
    const cells = await page.$$eval("[data-route]", (els) => els.map((e) => [e.getAttribute("data-route"), e.getAttribute("data-state")]));
    const ok = rows.every((r) => cells.some(([k, st]) => k === `${r.net} ${r.gateway}` && st === r.state));
    check("the route matrix shows every route with its state", ok, rows.map((r) => `${r.net} via ${r.gateway} ${r.state}`).join("; ") || "no routes");
    // Add a route through the page (admin), see it in the matrix with its state, remove it.
    const net = process.env.ROUTE_TEST_NET ?? "tcp99";
    const gw = peers.flatMap((p) => p.nis.map((n) => n.nid)).find((n) => localNis.some((l) => l.split("@")[1] === n.split("@")[1]));
    if (gw && (await page.locator("[data-form=add-route]").count()) === 1) {
      await page.fill('[data-form=add-route] input[placeholder^="remote net"]', net);
      await page.fill('[data-form=add-route] input[placeholder="gateway NID"]', gw);
      await page.click('[data-form=add-route] button[type=submit]');
      await page.click("[role=dialog] [data-confirm]");
      const cell = `[data-route="${net} ${gw}"]`;
      const added = await page.waitForSelector(cell, { timeout: 10000 }).then(() => true).catch(() => false);
      const stateNow = added ? await page.getAttribute(cell, "data-state") : null;
      const reasonNow = added ? await page.textContent(cell) : "";
      check(`a route to ${net} via ${gw} added from the page shows in the matrix`, added, `${stateNow}: ${reasonNow}`);
      if (stateNow === "down") {
        const hasReason = (await page.locator(`${cell} .cell-reason`).count()) === 1;
        check("a down route shows its reason", hasReason, await page.textContent(`${cell} .cell-reason`).catch(() => ""));
      }
      await sleep(1500);
      await shot("routes-added");
      await page.click(`[data-remove-route="${net} ${gw}"]`);
      await page.click("[role=dialog] [data-confirm]");
      const removed = await page.waitForSelector(cell, { state: "detached", timeout: 10000 }).then(() => true).catch(() => false);
      const still = (await api("GET", "routes")).json.routes.some((r) => r.net === net && r.gateway === gw);
      check(`the route removed from the page is gone from the matrix and the node`, removed && !still);
    }
  } else {
    note("this server has no GET /api/v1/routes: the route matrix shows route events only");
  }
  if (routingDoc.status === 200) {
    await view("overview");
    const pools = await page.locator('[data-table="buffers"] tbody tr').count();
    check("the overview shows the router buffer pools", pools === routingDoc.json.cpts.length * 3, `${pools} rows for ${routingDoc.json.cpts.length} CPTs`);
    await view("routes");
    const adverts = await page.$$eval("[data-advert]", (els) => els.map((e) => e.getAttribute("data-advert")));
    check("the routes view shows what the node advertises per net", routingDoc.json.nets.every((n) => adverts.includes(n.net)), adverts.join(", ") || "no nets advertised");
  }
  await shot("routes");

  // 7. A reader token sees no action buttons.
  await signIn(READER);
  check("a reader token is recognised as read-only", (await page.getAttribute("[data-role-badge]", "data-role-badge")) === "reader");
  let buttons = 0;
  for (const v of ["overview", "health", "recovery", "routes", "peers", "events"]) {
    await view(v);
    await sleep(300);
    buttons += await page.locator("[data-reset], [data-remove-route], [data-form=add-route]").count();
  }
  check("a reader token sees no reset (or route) buttons in any view", buttons === 0, `${buttons} found`);
  await view("overview");
  await shot("overview-reader");

  // 8. Only the router's host; the page's weight.
  const hosts = new Set(requests.map((r) => new URL(r.url()).host).filter((h) => h !== ""));
  const foreign = [...hosts].filter((h) => h !== BASE.host);
  check("no request goes to another host", foreign.length === 0, [...hosts].join(", "));
  const assets = requests.filter((r) => !new URL(r.url()).pathname.startsWith("/api/") && new URL(r.url()).origin === BASE.origin);
  let total = 0;
  const sizes = [];
  const seen = new Set();
  for (const r of assets) {
    const u = new URL(r.url()).pathname;
    if (seen.has(u)) continue;
    const res = await r.response();
    if (!res || res.status() !== 200) continue;
    seen.add(u);
    const s = await r.sizes();
    const enc = (await res.allHeaders())["content-encoding"] ?? "identity";
    total += s.responseBodySize;
    sizes.push(`${u} ${s.responseBodySize} B ${enc}`);
  }
  check(`all assets together are under 500 KB compressed`, total > 0 && total < BUDGET, `${total} B: ${sizes.join("; ")}`);
  check("no errors in the browser console", consoleErrors.length === 0, consoleErrors.slice(0, 5).join(" | "));
  writeFileSync(join(OUT, "page-size.txt"), `${total}\n${sizes.join("\n")}\n`);
  requests.length = 0;
  // 9. Routes: a gateway NI taken down shows its route cell down with the reason.
  await view("routes");
  const hasRoutes = (await api("GET", "routes")).status === 200;
  const routeNode = NODES.find((n) => n.routes_via) ?? null;
  if (hasRoutes && routeNode) {
    await routeCheck(routeNode);
  } else {
    note(
      hasRoutes
        ? "route check skipped: DASHBOARD_NODES names no node with routes_via (the demo topology)"
        : "route check skipped: this server has no GET /api/v1/routes",
    );
  }

} catch (e) {
  check("the browser test ran to its end", false, e instanceof Error ? e.stack : String(e));
  await shot("failure").catch(() => undefined);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

async function eventLogCheck(target) {
  // More events than one page of the dashboard (200) after the fault rule's admin event:
  // health resets of the NI (each an admin event), made before the page is opened again.
  const PAGE = 200;
  const extra = PAGE + 40;
  const tMade = Date.now();
  for (let i = 0; i < extra; i++) {
    const r = await api("POST", `nis/${seg(target)}/health`, { value: 1000 });
    if (r.status !== 200) throw new Error(`health reset ${i}: ${r.status} ${r.text}`);
  }
  const newest = (await api("GET", "events?before=9007199254740991&limit=1")).json;
  // The fault rule's admin event, paging back through the log.
  let faultId = null;
  for (let before = 9007199254740991, i = 0; faultId == null && i < 20; i++) {
    const p = (await api("GET", `events?before=${before}&limit=1000`)).json;
    const hits = p.events.filter((e) => e.event.type === "admin" && e.event.action.includes("fault_rule") && e.event.target === target);
    if (hits.length) faultId = hits[0].id;
    if (p.events.length === 0 || p.next_before <= p.first_available_id) break;
    before = p.next_before;
  }
  note(`${extra} admin events made; the log's newest id is ${newest.last_id}, the fault rule's event ${faultId}`);
  check("GET events?before= pages back from the newest, with where the next page starts", newest.events.length === 1 && newest.next_before === newest.events[0].id && typeof newest.now_ms === "number", JSON.stringify({ ...newest, events: newest.events.map((e) => e.id) }));

  // Open the page again: nothing has arrived live yet, the events come from the log.
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector("[data-role-badge]", { timeout: 15000 });
  await view("events");
  for (const off of await page.$$(".chip-off input")) await off.click(); // every type shown
  const loaded = await until("the newest page of the log on screen", async () => {
    const rows = await eventRows();
    return rows.some(([id]) => id >= newest.last_id) ? rows : null;
  }, 15000).catch(() => []);
  const ids = loaded.map(([id]) => id);
  check(
    "on opening, the events view shows the newest page of the server's event log",
    ids.length >= PAGE && ids.includes(newest.last_id) && ids.filter((id) => id <= newest.last_id).length >= PAGE,
    `${ids.length} rows, ids ${Math.min(...ids)}–${Math.max(...ids)}`,
  );
  check(
    "an event from before the page opened is not shown until older events are loaded",
    faultId != null && !ids.includes(faultId),
    `fault rule event ${faultId}`,
  );
  await shot("events-from-log");

  // A few events live, over the stream, while the page holds the log's page.
  for (let i = 0; i < 3; i++) await api("POST", `nis/${seg(target)}/health`, { value: 1000 });
  const liveLast = (await api("GET", "events?before=9007199254740991&limit=1")).json.last_id;
  await until("the live events on screen", async () => ((await eventRows()).some(([id]) => id >= liveLast) ? true : null), 15000).catch(() => null);

  // Older pages until the fault rule's event is in (bounded: the log holds it).
  let clicks = 0;
  while (clicks < 10 && faultId != null && !(await eventRows()).some(([id]) => id === faultId)) {
    const oldest = await page.getAttribute("[data-oldest-id]", "data-oldest-id");
    await page.click('[data-action="load-older"]');
    clicks++;
    await until("an older page", async () => ((await page.getAttribute("[data-oldest-id]", "data-oldest-id")) !== oldest ? true : null), 10000).catch(() => null);
  }
  const rows = await eventRows();
  const shownIds = rows.map(([id]) => id);
  check(`"load older" brings the events before the first page (the fault rule's event)`, faultId != null && shownIds.includes(faultId), `${clicks} clicks`);
  const dup = shownIds.filter((id, i) => shownIds.indexOf(id) !== i);
  check("no event is shown twice where the loaded pages and the stream meet", dup.length === 0 && rows.length > 0, dup.length ? `twice: ${dup.slice(0, 10).join(", ")}` : `${rows.length} rows`);
  const lo = Math.min(...shownIds);
  const hi = Math.max(...shownIds);
  const want = [];
  for (let after = lo - 1; want.length <= hi - lo + 1;) {
    const p = (await api("GET", `events?after=${after}&limit=1000`)).json;
    want.push(...p.events.map((e) => e.id).filter((id) => id <= hi));
    if (p.events.length === 0 || p.next_after >= hi) break;
    after = p.next_after;
  }
  const shownSet = new Set(shownIds);
  const gaps = want.filter((id) => !shownSet.has(id));
  check(
    "the events view holds every event of the log between its oldest and newest, in order",
    gaps.length === 0 && want.length === shownIds.length && shownIds.every((id, i) => i === 0 || id < shownIds[i - 1]),
    `${shownIds.length} shown, ${want.length} in the log from ${lo} to ${hi}${gaps.length ? `; missing ${gaps.slice(0, 10).join(", ")}` : ""}`,
  );
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await shot("events-older");

  // Times: the browser's clock in its time zone.
  const lastRow = `[data-table=events] tbody tr:has(td:first-child:text-is("${newest.last_id}")) .when`;
  const shownText = await page.textContent(lastRow).catch(() => "");
  const shownAt = shownSeconds(shownText);
  const span = shownAt == null ? null : daySpan(shownAt, secondsOfDay(Date.now()));
  const made = daySpan(secondsOfDay(tMade), secondsOfDay(Date.now()));
  check(
    `event times are clock times in the browser's time zone (${TZ})`,
    span != null && span <= made + 5,
    `event ${newest.last_id} shown at "${shownText}"; ${TZ} now ${new Intl.DateTimeFormat("en-GB", { timeZone: TZ, timeStyle: "medium" }).format(new Date())}`,
  );
  const bodyText = await page.textContent("body");
  check('no time is shown as node clock ("node +N s")', !/node \+/.test(bodyText));

  // The health chart, rebuilt from the log: the fault rule and the reset marked, the time
  // axis in clock time.
  await view("health");
  const chart = `[data-chart-of="${target}"]`;
  const marks = await until("the chart's marks", async () => {
    const m = (await page.getAttribute(chart, "data-marks")) ?? "";
    return m.includes("fault") && m.includes("reset") ? m : null;
  }, 10000).catch(() => "");
  check(`after opening again, the chart of ${target} shows the fault rule and the resets from the log`, marks !== "", [...new Set(marks.split(" "))].join(" "));
  // The axis is drawn after the marks: wait (bounded) for its labels.
  const labels = await until("the chart's time labels", async () => {
    const l = ((await page.getAttribute(chart, "data-x-labels")) ?? "").split("|").filter(Boolean);
    return l.length > 0 ? l : null;
  }, 10000).catch(() => []);
  const nowS = secondsOfDay(Date.now());
  const clockLabels = labels.filter((l) => /^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d$/.test(l));
  check(
    `the chart's time axis is labelled in clock time (${TZ})`,
    labels.length > 0 && clockLabels.length === labels.length && labels.every((l) => daySpan(shownSeconds(l), nowS) <= 3600),
    labels.join(", "),
  );
  await shot("health-from-log");
}

async function routeCheck(node) {
  // node: {name, url, admin, reader, routes_via: {net, gateway, gateway_node, gateway_ni}}
  const via = node.routes_via;
  const gw = NODES.find((n) => n.name === via.gateway_node);
  await page.goto(node.url);
  // From here on, only this node's page makes requests (the previous page's polls are gone).
  requests.length = 0;
  await page.waitForSelector("[data-token-input], [data-role-badge]", { timeout: 10000 });
  await signIn(node.admin);
  await view("routes");
  const cell = `[data-route="${via.net} ${via.gateway}"]`;
  await page.waitForSelector(`${cell}[data-state="up"]`, { timeout: 30000 });
  await shot(`routes-${node.name}-up`);
  // Take the gateway's NI down on the gateway: a fault rule that drops every message the
  // NI receives, so that it answers nothing (the node routing through it sees the gateway
  // stop answering its pings).
  const gwBase = new URL(gw.url);
  const r = await call("POST", gwBase, `/api/v1/nis/${seg(via.gateway_ni)}/fault-rules`, gw.admin, {
    kind: "drop",
    source: "*",
    dest: "*",
    trigger: "all",
  });
  note(`every message to ${via.gateway_ni} dropped on ${gw.name} (fault rule ${r.json?.id}, ${r.status})`);
  const undo = () => call("DELETE", gwBase, `/api/v1/nis/${seg(via.gateway_ni)}/fault-rules/${r.json?.id}`, gw.admin);
  const t = Date.now();
  const down = await page
    .waitForSelector(`${cell}[data-state="down"] .cell-reason`, { timeout: ROUTE_TIMEOUT_S * 1000 })
    .then(() => true)
    .catch(() => false);
  const reason = down ? await page.textContent(`${cell} .cell-reason`) : "";
  check(`the route to ${via.net} via ${via.gateway} shows down with its reason`, down, down ? `${reason} after ${Date.now() - t} ms` : "");
  await shot("routes-down");
  await undo();
  const own = new URL(node.url).host;
  const other = requests.map((r) => new URL(r.url()).host).filter((h) => h !== "" && h !== own);
  check(`${node.name}'s dashboard requests nothing from another host`, other.length === 0, [...new Set(other)].join(", "));
}

writeFileSync(join(OUT, "results.json"), JSON.stringify({ base: BASE.href, passed, failed, results }, null, 2));
console.log(`\n${passed} passed, ${failed} failed`);
if (failed > 0) exitCode = 1;
process.exit(exitCode);
