// The API's documents (the subset the dashboard reads), and the route and router-buffer
// documents read tolerantly: their keys follow `lnetctl route show -v` and
// `lnetctl routing show`, and the reader accepts the usual spellings of each.

export interface MsgStats {
  put: number;
  get: number;
  reply: number;
  ack: number;
  hello: number;
}

export interface NiStatistics {
  send_count: number;
  recv_count: number;
  drop_count: number;
}

export interface ShowNi {
  nid: string;
  status: "up" | "down";
  interfaces: string[];
  statistics: NiStatistics;
  health_stats: {
    "health value": number;
    fatal_error: number;
    interrupts: number;
    dropped: number;
    aborted: number;
    "no route": number;
    timeouts: number;
    error: number;
    ping_count?: number | null;
    next_ping?: number | null;
  };
  tunables: { peer_timeout: number; peer_credits: number; peer_buffer_credits: number; credits: number };
}

export interface NetShow {
  nets: { net_type: string; nis: ShowNi[] }[];
}

export interface ShowPeerNi {
  nid: string;
  state: "up" | "down" | "NA";
  credits: {
    max_ni_tx_credits: number;
    available_tx_credits: number;
    min_tx_credits: number;
    tx_q_num_of_buf: number;
    available_rtr_credits: number;
    min_rtr_credits: number;
    refcount: number;
  };
  statistics: NiStatistics;
  health_stats: {
    "health value": number;
    dropped: number;
    timeout: number;
    error: number;
    "network timeout": number;
    ping_count?: number | null;
    next_ping?: number | null;
  };
}

export interface PeerShow {
  peers: { primary_nid: string; multi_rail: boolean; peer_state: number; nis: ShowPeerNi[] }[];
}

export interface StatsShow {
  send_count: number;
  recv_count: number;
  route_count: number;
  route_length: number;
  drop_count: number;
  drop_length: number;
  resend_count: number;
  [k: string]: number | null | undefined;
}

export interface RecoveryShow {
  kind: string;
  nids: string[];
}

export type NiKind = "local" | "peer";

export type EventBody =
  | { type: "health"; ni_kind: NiKind; nid: string; before: number; after: number; cause: string | null }
  | { type: "ni_status"; nid: string; status: string }
  | { type: "recovery_queued"; queue: NiKind; nid: string }
  | { type: "recovery_ping"; queue: NiKind; nid: string; ping_count: number; next_ping_ms: number }
  | { type: "recovery_left"; queue: NiKind; nid: string }
  | { type: "resend"; status: string; from_ni: string; to_peer_ni: string; retry: number }
  | { type: "route"; net: string; gateway: string; down: string | null; cause: string }
  | { type: "net_status"; net: string; up: boolean; reason: string }
  | { type: "forward_dropped"; src: string; dest: string; reason: string }
  | { type: "other"; description: string }
  | { type: "events_lost"; count: number }
  | { type: "admin"; token: string; action: string; target: string | null; detail: string };

export interface ApiEvent {
  id: number;
  at_ms: number; // node clock of the run that recorded it
  wall_ms?: number | null; // wall clock (Unix ms), for an event read back from the log
  event: EventBody;
}

export interface EventPage {
  events: ApiEvent[];
  first_available_id: number;
  last_id: number;
  missed: number;
  next_after: number;
  next_before?: number;
  run_first_id?: number;
  now_ms?: number;
}

export const EVENT_TYPES = [
  "health",
  "ni_status",
  "recovery_queued",
  "recovery_ping",
  "recovery_left",
  "resend",
  "route",
  "net_status",
  "forward_dropped",
  "admin",
  "events_lost",
  "other",
] as const;

/** One line for a person. */
export function describe(b: EventBody): string {
  switch (b.type) {
    case "health":
      return `${b.ni_kind === "local" ? "local NI" : "peer NI"} ${b.nid}: health ${b.before} → ${b.after}${
        b.cause ? ` (${b.cause})` : " (set)"
      }`;
    case "ni_status":
      return `local NI ${b.nid} is ${b.status}`;
    case "recovery_queued":
      return `${b.nid} queued for ${b.queue} NI recovery`;
    case "recovery_ping":
      return `recovery ping ${b.ping_count + 1} of ${b.nid} (${b.queue} queue)`;
    case "recovery_left":
      return `${b.nid} left the ${b.queue} NI recovery queue`;
    case "resend":
      return `resend ${b.retry} after ${b.status}: ${b.from_ni} → ${b.to_peer_ni}`;
    case "route":
      return `route to ${b.net} via ${b.gateway}: ${b.down == null ? "up" : `down (${b.down})`}${b.cause ? ` [${b.cause}]` : ""}`;
    case "net_status":
      return `net ${b.net} advertised ${b.up ? "up" : "down"} (${b.reason})`;
    case "forward_dropped":
      return `forward ${b.src} → ${b.dest} dropped: ${b.reason}`;
    case "events_lost":
      return `${b.count} events lost before the server read them`;
    case "admin":
      return `${b.token}: ${b.action}${b.target ? ` ${b.target}` : ""} (${b.detail})`;
    case "other":
      return b.description;
  }
}

/** The NID an event is about, if it is about one NI. */
export function eventNid(b: EventBody): string | null {
  switch (b.type) {
    case "health":
    case "ni_status":
    case "recovery_queued":
    case "recovery_ping":
    case "recovery_left":
      return b.nid;
    case "admin":
      return b.target;
    default:
      return null;
  }
}

// ---------------------------------------------------------------------------------------
// Routes and router buffers.

export interface RouteRow {
  net: string;
  gateway: string;
  hops: number | null;
  priority: number | null;
  up: boolean;
  reason: string | null;
  gatewayAlive: string | null;
  gatewayReason: string | null;
  kind: string | null; // single-hop or multi-hop
  raw: Record<string, unknown>;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function firstArray(doc: unknown, keys: string[]): unknown[] {
  if (Array.isArray(doc)) return doc;
  if (!isObj(doc)) return [];
  for (const k of keys) if (Array.isArray(doc[k])) return doc[k] as unknown[];
  for (const v of Object.values(doc)) if (Array.isArray(v)) return v;
  return [];
}

function pick(o: Obj, keys: string[]): unknown {
  for (const k of keys) if (o[k] !== undefined) return o[k];
  return undefined;
}

function num(v: unknown): number | null {
  return typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" && !isNaN(Number(v)) ? Number(v) : null;
}

function text(v: unknown): string | null {
  if (v == null) return null;
  if (typeof v === "string") return v;
  if (typeof v === "boolean" || typeof v === "number") return String(v);
  if (isObj(v)) {
    const r = pick(v, ["reason", "message", "why", "state", "status"]);
    if (r !== undefined) return text(r);
    return JSON.stringify(v);
  }
  return String(v);
}

/** The rows of a route table document (`{"routes": [...]}` or a bare list). */
export function readRoutes(doc: unknown): RouteRow[] {
  const rows: RouteRow[] = [];
  for (const item of firstArray(doc, ["routes", "route"])) {
    if (!isObj(item)) continue;
    const net = text(pick(item, ["net", "remote_net"]));
    const gateway = text(pick(item, ["gateway", "gw", "gateway_nid"]));
    if (!net || !gateway) continue;
    const state = pick(item, ["state", "status"]);
    const down = pick(item, ["down", "down_reason"]);
    let up: boolean;
    if (typeof state === "string") up = state.toLowerCase() === "up";
    else if (typeof state === "boolean") up = state;
    else if (typeof item.up === "boolean") up = item.up;
    else up = down == null;
    let reason = text(pick(item, ["reason", "down_reason", "state_reason", "why"]));
    if (reason == null && typeof down === "string") reason = down;
    if (reason == null && isObj(down)) reason = text(down);
    const gw = pick(item, ["gateway_alive", "gateway_state", "gateway_status", "alive"]);
    rows.push({
      net,
      gateway,
      hops: num(pick(item, ["hop", "hops"])),
      priority: num(item.priority),
      up,
      reason: up ? null : reason,
      gatewayAlive: gw === undefined ? null : typeof gw === "boolean" ? (gw ? "alive" : "dead") : text(gw),
      gatewayReason: text(pick(item, ["gateway_down_reason", "gateway_reason"])),
      kind: text(pick(item, ["type", "route_type"])),
      raw: item,
    });
  }
  return rows;
}

export interface Pool {
  name: string;
  fields: Record<string, number>;
  total: number | null;
  free: number | null;
  low: number | null;
}

export interface PeerRtrCredits {
  nid: string;
  max: number | null;
  credits: number | null;
  min: number | null;
}

export interface RoutingDoc {
  enabled: boolean | null;
  cpts: { name: string; pools: Pool[] }[];
  nets: { net: string; up: boolean; detail: string | null; lastHeard: number | null; raw: Obj }[];
  peers: PeerRtrCredits[];
  waiting: number | null;
}

const POOLS = ["tiny", "small", "large"];

function pool(name: string, o: Obj): Pool {
  const fields: Record<string, number> = {};
  for (const [k, v] of Object.entries(o)) {
    const n = num(v);
    if (n != null) fields[k] = n;
  }
  const f = (keys: string[]) => {
    for (const k of keys) if (fields[k] !== undefined) return fields[k];
    return null;
  };
  return {
    name,
    fields,
    total: f(["nbuffers", "buffers", "total", "count"]),
    free: f(["credits", "available", "free", "available_credits"]),
    low: f(["mincredits", "min_credits", "low_water", "low_water_mark", "min"]),
  };
}

function findPools(v: unknown, name: string, out: { name: string; pools: Pool[] }[]): void {
  if (Array.isArray(v)) {
    v.forEach((x, i) => findPools(x, `${name}[${i}]`, out));
    return;
  }
  if (!isObj(v)) return;
  const here = POOLS.filter((p) => isObj(v[p]));
  if (here.length > 0) {
    out.push({ name, pools: here.map((p) => pool(p, v[p] as Obj)) });
    return;
  }
  if (Array.isArray(v.pools)) {
    const pools = (v.pools as unknown[]).filter(isObj).map((p, i) => pool(text(p.name ?? p.pool) ?? POOLS[i] ?? `pool ${i}`, p));
    if (pools.length > 0) {
      out.push({ name: text(v.cpt) ?? name, pools });
      return;
    }
  }
  for (const [k, x] of Object.entries(v)) if (k !== "nets" && k !== "peers" && k !== "buffers") findPools(x, k, out);
}

/** The router buffers (per CPT: tiny, small, large) and what the node advertises per net. */
export function readRouting(doc: unknown): RoutingDoc {
  const out: RoutingDoc = { enabled: null, cpts: [], nets: [], peers: [], waiting: null };
  if (!isObj(doc)) return out;
  const en = pick(doc, ["enabled", "enable", "routing_enabled"]);
  out.enabled = en == null ? null : en === true || en === 1 || en === "1" || en === "yes";
  findPools(doc, "cpt", out.cpts);
  out.cpts.forEach((c, i) => {
    if (/^\d+$|^cpt$|^\w+\[\d+\]$/.test(c.name)) c.name = `CPT ${i}`;
  });
  const nets = Array.isArray(doc.nets) ? doc.nets : Array.isArray(doc.advertised) ? doc.advertised : [];
  for (const n of nets as unknown[]) {
    if (!isObj(n)) continue;
    const net = text(pick(n, ["net", "net_type", "name"]));
    if (!net) continue;
    const st = pick(n, ["up", "status", "state", "advertised"]);
    const up = typeof st === "boolean" ? st : typeof st === "string" ? st.toLowerCase() === "up" : st === 1;
    out.nets.push({ net, up, detail: text(pick(n, ["reason", "why"])), lastHeard: num(pick(n, ["last_heard_ms", "last_heard"])), raw: n });
  }
  for (const p of Array.isArray(doc.peers) ? (doc.peers as unknown[]) : []) {
    if (!isObj(p)) continue;
    const nid = text(pick(p, ["nid", "peer_ni"]));
    if (!nid) continue;
    out.peers.push({ nid, max: num(p.max), credits: num(p.credits), min: num(pick(p, ["mincredits", "min_credits"])) });
  }
  out.waiting = num(doc.waiting);
  return out;
}
