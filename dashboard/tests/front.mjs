// A stand-in for the router's own serving of the dashboard, for a server that serves the API
// but not (yet) the dashboard: HTTPS on a loopback port with the API server's certificate,
// the files of dist/ served as web/src/dashboard.rs serves them (content types, the .br/.gz
// copies by Accept-Encoding, the same Content-Security-Policy), and every other path
// proxied to the API server (the event stream included, unbuffered).
//
//   node tests/front.mjs --upstream https://127.0.0.1:8443 --cert cert.pem --key key.pem [--port 0]
//
// Prints `front listening on https://127.0.0.1:PORT` when ready.

import { existsSync, readFileSync } from "node:fs";
import { createServer, request } from "node:https";
import { extname, join, normalize } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    upstream: { type: "string" },
    cert: { type: "string" },
    key: { type: "string" },
    port: { type: "string", default: "0" },
  },
});
if (!values.upstream || !values.cert || !values.key) {
  console.error("usage: front.mjs --upstream URL --cert PEM --key PEM [--port N]");
  process.exit(2);
}
const upstream = new URL(values.upstream);
const cert = readFileSync(values.cert);
const key = readFileSync(values.key);
const dist = new URL("../dist/", import.meta.url).pathname;

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
};
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

function accepts(req, coding) {
  return String(req.headers["accept-encoding"] ?? "")
    .split(",")
    .some((item) => {
      const [name, ...params] = item.split(";");
      const refused = params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
      return name.trim().toLowerCase() === coding && !refused;
    });
}

function staticFile(req, res) {
  const url = new URL(req.url, "https://x");
  const rel = url.pathname === "/" ? "index.html" : normalize(decodeURIComponent(url.pathname)).replace(/^\/+/, "");
  if (rel.includes("..") || rel.endsWith(".br") || rel.endsWith(".gz")) return false;
  const path = join(dist, rel);
  if (!existsSync(path) || !TYPES[extname(path)]) return false;
  const headers = {
    "content-type": TYPES[extname(path)],
    vary: "accept-encoding",
    "x-content-type-options": "nosniff",
    "cache-control": rel.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache",
  };
  if (rel.endsWith(".html")) headers["content-security-policy"] = CSP;
  let body = readFileSync(path);
  for (const [coding, ext] of [
    ["br", "br"],
    ["gzip", "gz"],
  ]) {
    if (accepts(req, coding) && existsSync(`${path}.${ext}`)) {
      body = readFileSync(`${path}.${ext}`);
      headers["content-encoding"] = coding;
      break;
    }
  }
  res.writeHead(200, headers);
  res.end(req.method === "HEAD" ? undefined : body);
  return true;
}

const server = createServer({ cert, key }, (req, res) => {
  if ((req.method === "GET" || req.method === "HEAD") && !req.url.startsWith("/api/") && staticFile(req, res)) return;
  const headers = { ...req.headers, host: upstream.host };
  const up = request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers,
      ca: cert,
      checkServerIdentity: () => undefined,
    },
    (ures) => {
      res.writeHead(ures.statusCode ?? 502, ures.headers);
      res.flushHeaders();
      ures.pipe(res);
    },
  );
  up.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`upstream: ${e.message}`);
  });
  req.pipe(up);
  res.on("close", () => up.destroy());
});

server.listen(Number(values.port), "127.0.0.1", () => {
  console.log(`front listening on https://127.0.0.1:${server.address().port}`);
});
