// The dashboard's live state: the documents polled from the API, the newest page of the
// server's event log read on sign-in (older pages on demand) and then followed on the event
// stream, and what is derived from the events (health series, recovery queue entries, route
// and net state changes). Views subscribe with `useStore`.

import { useEffect, useState } from "preact/hooks";
import * as api from "./api";
import type {
  ApiEvent,
  EventPage,
  NetShow,
  NiKind,
  PeerShow,
  RecoveryShow,
  RouteRow,
  RoutingDoc,
  StatsShow,
} from "./model";
import { readRoutes, readRouting } from "./model";

/** An event as the page keeps it: `t` is its time on the node's clock of this run (ms; an
 * event of an earlier run is placed by its wall-clock time), null when it cannot be placed. */
export interface Ev extends ApiEvent {
  t: number | null;
}

export interface Point {
  t: number; // node clock, ms
  v: number;
}

export interface Mark {
  t: number;
  kind: "fault" | "unfault" | "failure" | "queued" | "ping" | "left" | "reset" | "status";
  label: string;
}

export interface Series {
  nid: string;
  kind: NiKind;
  points: Point[];
  marks: Mark[];
}

export interface RecoveryInfo {
  since: number | null; // node ms the NI was queued
  pings: number; // pings sent so far
  lastPing: number | null;
  nextPing: number | null; // node ms
}

export interface RouteChange {
  down: string | null;
  cause: string;
  at: number;
}

export interface Rate {
  msgs: number; // forwarded messages per second
  bytes: number; // forwarded bytes per second
  drops: number; // dropped messages per second
}

export interface State {
  version: number;
  token: string | null;
  role: api.Role | null;
  connecting: boolean;
  authError: string | null;
  paths: Map<string, Set<string>>; // path -> methods, from the OpenAPI document
  nets: NetShow | null;
  peers: PeerShow | null;
  stats: StatsShow | null;
  rate: Rate | null;
  counters: Record<string, number>;
  recovery: { local: string[]; peer: string[] };
  routes: RouteRow[] | null; // null: this server has no route table endpoint
  routing: RoutingDoc | null; // null: this server has no routing endpoint
  events: Ev[]; // by id, oldest first
  lastEventId: number;
  oldestId: number | null; // the oldest id loaded: the `before` of the next older page
  olderLeft: boolean; // the server keeps events older than those loaded
  loadingOlder: boolean;
  runFirstId: number; // the first id of the server's current run (0: unknown)
  series: Map<string, Series>;
  recoveryInfo: Map<string, RecoveryInfo>;
  routeChanges: Map<string, RouteChange>;
  netAdverts: Map<string, { up: boolean; reason: string; at: number }>;
  offset: number | null; // wall clock ms minus node clock ms
  stream: "connecting" | "live" | "down";
  pollError: string | null;
  lastPoll: number | null; // wall ms
}

const MAX_EVENTS = 5000;
/** Events per page of the log (the newest on sign-in, then each "load older"). */
export const EVENTS_PAGE = 200;
/** A `before` above every id: the newest page. */
const NEWEST = Number.MAX_SAFE_INTEGER;
const MAX_POINTS = 2000;
const POLL_MS = 2000;
const TOKEN_KEY = "lnet-router.dashboard.token";

export const state: State = {
  version: 0,
  token: null,
  role: null,
  connecting: false,
  authError: null,
  paths: new Map(),
  nets: null,
  peers: null,
  stats: null,
  rate: null,
  counters: {},
  recovery: { local: [], peer: [] },
  routes: null,
  routing: null,
  events: [],
  lastEventId: 0,
  oldestId: null,
  olderLeft: false,
  loadingOlder: false,
  runFirstId: 0,
  series: new Map(),
  recoveryInfo: new Map(),
  routeChanges: new Map(),
  netAdverts: new Map(),
  offset: null,
  stream: "connecting",
  pollError: null,
  lastPoll: null,
};

const listeners = new Set<() => void>();
let scheduled = false;

/** Tells the views that the state changed (once per animation frame). */
export function changed(): void {
  state.version++;
  if (scheduled) return;
  scheduled = true;
  const run = () => {
    scheduled = false;
    listeners.forEach((l) => l());
  };
  if (typeof requestAnimationFrame === "function" && document.visibilityState === "visible") requestAnimationFrame(run);
  else setTimeout(run, 50);
}

/** Re-renders the calling component whenever the state changes. */
export function useStore(): State {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set(state.version);
    listeners.add(l);
    return () => {
      listeners.delete(l);
    };
  }, []);
  return state;
}

// ---------------------------------------------------------------------------------------
// Time: the node's clock counts milliseconds from its start. Every page of the event log
// says the node's clock then (`now_ms`) and every event received live when it happened:
// each tells how far the wall clock is ahead of the node's (at least); the smallest such
// gap is the estimate. Times are shown on the browser's clock, in its time zone.

export function observeClock(atMs: number): void {
  const gap = Date.now() - atMs;
  if (state.offset == null || gap < state.offset) state.offset = gap;
}

/** The node clock now, if known. */
export function nodeNow(): number | null {
  return state.offset == null ? null : Date.now() - state.offset;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** A wall-clock time (Unix ms) as the browser's clock shows it in its time zone: HH:MM:SS,
 * with the date before it when it is not today. */
export function fmtWall(wallMs: number): string {
  const d = new Date(wallMs);
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const today = new Date();
  if (d.getFullYear() === today.getFullYear() && d.getMonth() === today.getMonth() && d.getDate() === today.getDate())
    return time;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/** A node clock time (this run) on the wall clock (Unix ms), once the gap is known. */
export function toWall(atMs: number): number | null {
  return state.offset == null ? null : atMs + state.offset;
}

/** A node clock time as the browser's clock shows it (see `fmtWall`); "–" until the page
 * knows the node's clock (it learns it with the first page of events). */
export function fmtTime(atMs: number | null): string {
  if (atMs == null) return "–";
  const w = toWall(atMs);
  return w == null ? "–" : fmtWall(w);
}

/** How long ago (or, negative, how long until) a node clock time is. */
export function fmtAgo(atMs: number | null): string {
  const now = nodeNow();
  if (atMs == null || now == null) return "";
  const s = Math.round((now - atMs) / 1000);
  if (s >= 0) return s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago` : `${(s / 3600).toFixed(1)} h ago`;
  return -s < 90 ? `in ${-s} s` : `in ${Math.round(-s / 60)} min`;
}

// ---------------------------------------------------------------------------------------
// Events.

function series(nid: string, kind: NiKind): Series {
  let s = state.series.get(nid);
  if (!s) {
    s = { nid, kind, points: [], marks: [] };
    state.series.set(nid, s);
  }
  return s;
}

function mark(nid: string, kind: NiKind, m: Mark): void {
  const s = series(nid, kind);
  s.marks.push(m);
  if (s.marks.length > MAX_POINTS) s.marks.splice(0, s.marks.length - MAX_POINTS);
}

function kindOf(nid: string): NiKind {
  const s = state.series.get(nid);
  if (s) return s.kind;
  const local = state.nets?.nets.some((n) => n.nis.some((ni) => ni.nid === nid));
  return local ? "local" : "peer";
}

function recInfo(nid: string): RecoveryInfo {
  let r = state.recoveryInfo.get(nid);
  if (!r) {
    r = { since: null, pings: 0, lastPing: null, nextPing: null };
    state.recoveryInfo.set(nid, r);
  }
  return r;
}

/** Applies one event to the derived state. */
function apply(e: Ev): void {
  const b = e.event;
  const t = e.t;
  if (t == null) return;
  switch (b.type) {
    case "health": {
      const s = series(b.nid, b.ni_kind);
      if (s.points.length === 0) s.points.push({ t, v: b.before });
      s.points.push({ t, v: b.after });
      if (s.points.length > MAX_POINTS) s.points.splice(0, s.points.length - MAX_POINTS);
      if (b.after < b.before && b.cause && b.cause !== "OK") mark(b.nid, b.ni_kind, { t, kind: "failure", label: b.cause });
      break;
    }
    case "ni_status":
      mark(b.nid, "local", { t, kind: "status", label: `status ${b.status}` });
      break;
    case "recovery_queued": {
      mark(b.nid, b.queue, { t, kind: "queued", label: "queued for recovery" });
      const r = recInfo(b.nid);
      r.since = t;
      r.pings = 0;
      r.lastPing = null;
      r.nextPing = null;
      break;
    }
    case "recovery_ping": {
      mark(b.nid, b.queue, { t, kind: "ping", label: `recovery ping ${b.ping_count + 1}` });
      const r = recInfo(b.nid);
      if (r.since == null) r.since = t;
      r.pings = b.ping_count + 1;
      r.lastPing = t;
      r.nextPing = b.next_ping_ms;
      break;
    }
    case "recovery_left":
      mark(b.nid, b.queue, { t, kind: "left", label: "left recovery" });
      state.recoveryInfo.delete(b.nid);
      break;
    case "route":
      state.routeChanges.set(`${b.net} ${b.gateway}`, { down: b.down, cause: b.cause, at: t });
      break;
    case "net_status":
      state.netAdverts.set(b.net, { up: b.up, reason: b.reason, at: t });
      break;
    case "admin":
      if (b.target) {
        if (/fault_rule/.test(b.action)) {
          const removed = b.action.startsWith("remove");
          mark(b.target, kindOf(b.target), {
            t,
            kind: removed ? "unfault" : "fault",
            label: `${removed ? "fault rule removed" : "fault rule added"} by ${b.token}`,
          });
        } else if (/health/.test(b.action)) {
          mark(b.target, kindOf(b.target), { t, kind: "reset", label: `${b.detail} by ${b.token}` });
        }
      }
      break;
    default:
      break;
  }
}

/** Where an event goes on this run's node clock: as recorded, for an event of this run; by
 * its wall-clock time, for one of an earlier run (whose node clock started elsewhere). */
function place(e: ApiEvent): Ev {
  const earlier = state.runFirstId > 0 && e.id < state.runFirstId;
  if (!earlier) return { ...e, t: e.at_ms };
  return { ...e, t: e.wall_ms != null && state.offset != null ? e.wall_ms - state.offset : null };
}

function trim(): void {
  if (state.events.length <= MAX_EVENTS) return;
  state.events.splice(0, state.events.length - MAX_EVENTS);
  state.oldestId = state.events[0].id;
  state.olderLeft = true;
}

/** Records an event newer than every one kept (live, or a page forward); skips one seen. */
function record(e: ApiEvent): void {
  if (e.id <= state.lastEventId) return;
  const ev = place(e);
  state.lastEventId = e.id;
  state.events.push(ev);
  if (state.oldestId == null) state.oldestId = e.id;
  trim();
  apply(ev);
}

/** The derived state again from every event kept, in order (after older ones came in). */
function rebuild(): void {
  state.series = new Map();
  state.recoveryInfo = new Map();
  state.routeChanges = new Map();
  state.netAdverts = new Map();
  state.events.forEach(apply);
  sampleHealth();
}

function learnPage(page: EventPage): void {
  if (page.now_ms != null) observeClock(page.now_ms);
  if (page.run_first_id != null) state.runFirstId = page.run_first_id;
}

/** The newest page of the server's event log: what the page shows on opening. */
async function loadNewest(signal: AbortSignal): Promise<void> {
  const page = await api.get<EventPage>(`events?before=${NEWEST}&limit=${EVENTS_PAGE}`, signal);
  learnPage(page);
  page.events.forEach(record);
  const before = page.next_before ?? page.events[0]?.id ?? null;
  state.oldestId = before;
  state.olderLeft = before != null && before > page.first_available_id;
  changed();
}

/** The events after the newest one kept (after the stream fell behind), page by page. */
async function loadHistory(signal: AbortSignal): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const page = await api.get<EventPage>(`events?after=${state.lastEventId}&limit=1000`, signal);
    learnPage(page);
    page.events.forEach(record);
    changed();
    if (page.events.length === 0 || page.next_after >= page.last_id) return;
  }
}

/** The page of events before the oldest one kept ("load older"). */
export async function loadOlder(): Promise<void> {
  if (state.loadingOlder || state.oldestId == null || !state.olderLeft) return;
  state.loadingOlder = true;
  changed();
  try {
    const page = await api.get<EventPage>(`events?before=${state.oldestId}&limit=${EVENTS_PAGE}`);
    learnPage(page);
    const seen = new Set(state.events.map((e) => e.id));
    const older = page.events.filter((e) => !seen.has(e.id)).map(place);
    state.events = [...older, ...state.events].sort((a, b) => a.id - b.id);
    const before = page.next_before ?? older[0]?.id ?? state.oldestId;
    state.oldestId = before;
    state.olderLeft = page.events.length > 0 && before > page.first_available_id;
    rebuild();
  } finally {
    state.loadingOlder = false;
    changed();
  }
}

let refreshTimer: ReturnType<typeof setTimeout> | null = null;

function refreshSoon(): void {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    void poll();
  }, 150);
}

async function follow(signal: AbortSignal): Promise<void> {
  let backoff = 500;
  while (!signal.aborted) {
    state.stream = "connecting";
    changed();
    try {
      await api.readStream(
        state.lastEventId,
        {
          onOpen: () => {
            state.stream = "live";
            backoff = 500;
            changed();
          },
          onEvent: (e) => {
            observeClock(e.at_ms);
            record(e);
            if (e.event.type !== "recovery_ping" && e.event.type !== "resend") refreshSoon();
            changed();
          },
          onLagged: () => {
            void loadHistory(signal).catch(() => undefined);
          },
        },
        signal,
      );
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof api.ApiError && e.status === 401) {
        logout(`the token was refused: ${e.message}`);
        return;
      }
    }
    if (signal.aborted) return;
    state.stream = "down";
    changed();
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

// ---------------------------------------------------------------------------------------
// Polling.

let prevStats: { at: number; stats: StatsShow } | null = null;
let polling = false;

function has(path: string, method = "get"): boolean {
  return state.paths.get(path)?.has(method) ?? false;
}

/** Whether the server offers `method path` (from its OpenAPI document). */
export function offers(path: string, method = "get"): boolean {
  return has(path, method);
}

async function optional<T>(path: string, signal?: AbortSignal): Promise<T | null> {
  try {
    return await api.get<T>(path, signal);
  } catch (e) {
    if (e instanceof api.ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}

function sampleHealth(): void {
  const now = nodeNow();
  if (now == null) return;
  const seen = (nid: string, kind: NiKind, v: number) => {
    const s = series(nid, kind);
    const last = s.points[s.points.length - 1];
    if (!last || last.v !== v) s.points.push({ t: Math.max(now, last ? last.t : now), v });
  };
  for (const net of state.nets?.nets ?? []) {
    if (net.net_type === "lo") continue;
    for (const ni of net.nis) seen(ni.nid, "local", ni.health_stats["health value"]);
  }
  for (const p of state.peers?.peers ?? []) for (const ni of p.nis) seen(ni.nid, "peer", ni.health_stats["health value"]);
}

export async function poll(signal?: AbortSignal): Promise<void> {
  if (polling || !state.token) return;
  polling = true;
  try {
    const [nets, peers, stats, local, peer, counters] = await Promise.all([
      api.get<NetShow>("nets", signal),
      api.get<PeerShow>("peers", signal),
      api.get<StatsShow>("stats", signal),
      api.get<RecoveryShow>("recovery/local", signal),
      api.get<RecoveryShow>("recovery/peer", signal),
      api.get<{ counters: Record<string, number> }>("counters", signal).catch(() => ({ counters: {} })),
    ]);
    const routesDoc = has("/api/v1/routes") || state.paths.size === 0 ? await optional<unknown>("routes", signal) : null;
    const routingDoc = has("/api/v1/routing") || state.paths.size === 0 ? await optional<unknown>("routing", signal) : null;
    state.nets = nets;
    state.peers = peers;
    state.recovery = { local: local.nids, peer: peer.nids };
    state.counters = counters.counters;
    state.routes = routesDoc == null ? null : readRoutes(routesDoc);
    state.routing = routingDoc == null ? null : readRouting(routingDoc);
    const at = performance.now();
    if (prevStats && at - prevStats.at > 500) {
      const dt = (at - prevStats.at) / 1000;
      const d = (k: string) => Math.max(0, Number(stats[k] ?? 0) - Number(prevStats!.stats[k] ?? 0)) / dt;
      state.rate = { msgs: d("route_count"), bytes: d("route_length"), drops: d("drop_count") };
    }
    if (!prevStats || at - prevStats.at > 500) prevStats = { at, stats };
    state.stats = stats;
    sampleHealth();
    state.pollError = null;
    state.lastPoll = Date.now();
  } catch (e) {
    if (e instanceof api.ApiError && e.status === 401) {
      logout(`the token was refused: ${e.message}`);
    } else if (!(e instanceof DOMException && e.name === "AbortError")) {
      state.pollError = e instanceof Error ? e.message : String(e);
    }
  } finally {
    polling = false;
    changed();
  }
}

// ---------------------------------------------------------------------------------------
// Session.

let session: AbortController | null = null;

async function readPaths(): Promise<void> {
  try {
    const doc = await api.get<{ paths?: Record<string, Record<string, unknown>> }>("openapi.json");
    state.paths = new Map(Object.entries(doc.paths ?? {}).map(([p, ops]) => [p, new Set(Object.keys(ops))]));
  } catch {
    state.paths = new Map();
  }
}

/** Signs in with `token`: checks it, learns its role, then loads and follows the node. */
export async function login(token: string): Promise<void> {
  session?.abort();
  state.connecting = true;
  state.authError = null;
  changed();
  api.setToken(token);
  try {
    await readPaths();
    await api.get("global");
    state.role = await api.detectRole(new Set(state.paths.keys()));
  } catch (e) {
    api.setToken(null);
    state.connecting = false;
    state.authError =
      e instanceof api.ApiError && e.status === 401 ? `token refused: ${e.message}` : `cannot reach the API: ${String(e)}`;
    changed();
    return;
  }
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  state.connecting = false;
  changed();
  const ctl = new AbortController();
  session = ctl;
  await poll(ctl.signal);
  try {
    await loadNewest(ctl.signal);
  } catch {
    // the stream resumes from what was read
  }
  void follow(ctl.signal);
  const tick = async () => {
    if (ctl.signal.aborted) return;
    await poll(ctl.signal);
    setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

/** Forgets the token (and why, if it was refused). */
export function logout(why: string | null = null): void {
  session?.abort();
  session = null;
  sessionStorage.removeItem(TOKEN_KEY);
  api.setToken(null);
  Object.assign(state, {
    token: null,
    role: null,
    authError: why,
    nets: null,
    peers: null,
    stats: null,
    rate: null,
    routes: null,
    routing: null,
    events: [],
    lastEventId: 0,
    oldestId: null,
    olderLeft: false,
    loadingOlder: false,
    runFirstId: 0,
    offset: null,
    stream: "connecting",
  });
  state.series = new Map();
  state.recoveryInfo = new Map();
  state.routeChanges = new Map();
  state.netAdverts = new Map();
  prevStats = null;
  changed();
}

export function savedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Health of a local or peer NI now, from the last poll. */
export function healthOf(nid: string): number | null {
  for (const n of state.nets?.nets ?? []) for (const ni of n.nis) if (ni.nid === nid) return ni.health_stats["health value"];
  for (const p of state.peers?.peers ?? []) for (const ni of p.nis) if (ni.nid === nid) return ni.health_stats["health value"];
  return null;
}

/** Resets the health of a local NI or peer NI to 1000; refreshes at once. */
export async function resetHealth(nid: string, kind: NiKind): Promise<void> {
  const path = kind === "local" ? `nis/${api.seg(nid)}/health` : `peer-nis/${api.seg(nid)}/health`;
  await api.send("POST", path, {});
  await poll();
}
