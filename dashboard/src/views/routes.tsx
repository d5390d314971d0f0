// Routes: the route table as a matrix of gateway x remote net (each cell up or down, with the
// reason and the time of its last change), what this router advertises per local net, and,
// for admin tokens on a server that has them, adding and removing routes.

import { useState } from "preact/hooks";
import * as api from "../api";
import { Badge, Section, When, confirmThen } from "../components";
import type { RouteRow } from "../model";
import type { State } from "../store";
import { offers, poll, state as store } from "../store";

interface Cell {
  row: RouteRow | null;
  up: boolean;
  reason: string | null;
  changed: number | null;
  cause: string | null;
}

function matrix(s: State): { nets: string[]; gateways: string[]; cells: Map<string, Cell> } {
  const cells = new Map<string, Cell>();
  for (const r of s.routes ?? []) {
    const ch = s.routeChanges.get(`${r.net} ${r.gateway}`);
    cells.set(`${r.net} ${r.gateway}`, {
      row: r,
      up: r.up,
      reason: r.reason ?? (!r.up && ch?.down ? ch.down : null),
      changed: ch?.at ?? null,
      cause: ch?.cause ?? null,
    });
  }
  if (s.routes == null) {
    // No route table document: the cells come from the route events alone.
    for (const [k, ch] of s.routeChanges) {
      cells.set(k, { row: null, up: ch.down == null, reason: ch.down, changed: ch.at, cause: ch.cause });
    }
  }
  const nets = [...new Set([...cells.keys()].map((k) => k.split(" ")[0]))].sort();
  const gateways = [...new Set([...cells.keys()].map((k) => k.split(" ")[1]))].sort();
  return { nets, gateways, cells };
}

// ---------------------------------------------------------------------------------------
// Route changes, from the operations the server's OpenAPI document describes.

interface Op {
  method: string;
  path: string;
}

function routeOp(method: string): Op | null {
  const candidates = [...store.paths.keys()].filter((p) => p.startsWith("/api/v1/routes"));
  candidates.sort((a, b) => a.length - b.length);
  for (const p of candidates) if (offers(p, method)) return { method, path: p };
  return null;
}

function fill(path: string, values: Record<string, string>): string | null {
  let ok = true;
  const out = path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const key = name === "gw" || name === "gateway_nid" ? "gateway" : name === "remote_net" ? "net" : name;
    const v = values[key];
    if (v == null) ok = false;
    return api.seg(v ?? "");
  });
  return ok ? out : null;
}

function AddRoute() {
  const op = routeOp("post");
  const [net, setNet] = useState("");
  const [gateway, setGateway] = useState("");
  const [hops, setHops] = useState("");
  const [priority, setPriority] = useState("");
  const [msg, setMsg] = useState<string | null>(null);
  if (!op || store.role !== "admin") return null;
  const submit = (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { net: net.trim(), gateway: gateway.trim() };
    if (hops.trim()) body.hop = Number(hops);
    if (priority.trim()) body.priority = Number(priority);
    confirmThen({
      title: `Add a route to ${body.net} via ${body.gateway}?`,
      body: <p>The route is added to this router's table; the change is recorded as an admin event.</p>,
      confirm: "Add route",
      run: async () => {
        const path = fill(op.path, { net: String(body.net), gateway: String(body.gateway) });
        if (!path) throw new Error(`cannot fill ${op.path}`);
        await api.send("POST", path, body);
        setMsg(`route to ${body.net} via ${body.gateway} added`);
        await poll();
      },
    });
  };
  return (
    <form class="inline-form" onSubmit={submit} data-form="add-route">
      <input placeholder="remote net (o2ib1)" value={net} onInput={(e) => setNet(e.currentTarget.value)} required />
      <input placeholder="gateway NID" value={gateway} onInput={(e) => setGateway(e.currentTarget.value)} required />
      <input placeholder="hops" value={hops} onInput={(e) => setHops(e.currentTarget.value)} size={4} />
      <input placeholder="priority" value={priority} onInput={(e) => setPriority(e.currentTarget.value)} size={6} />
      <button type="submit">Add route</button>
      {msg && <span class="muted">{msg}</span>}
    </form>
  );
}

function removeRoute(r: RouteRow): void {
  const op = routeOp("delete");
  if (!op) return;
  confirmThen({
    title: `Remove the route to ${r.net} via ${r.gateway}?`,
    body: <p>Traffic to {r.net} then uses the other routes only. The change is recorded as an admin event.</p>,
    confirm: "Remove route",
    run: async () => {
      const values = { net: r.net, gateway: r.gateway };
      const path = fill(op.path, values);
      if (!path) throw new Error(`cannot fill ${op.path}`);
      const hasParams = /\{/.test(op.path);
      await api.send("DELETE", hasParams ? path : `${path}?net=${api.seg(r.net)}&gateway=${api.seg(r.gateway)}`, hasParams ? undefined : values);
      await poll();
    },
  });
}

// ---------------------------------------------------------------------------------------

export function Routes({ s }: { s: State }) {
  const { nets, gateways, cells } = matrix(s);
  const canRemove = s.role === "admin" && routeOp("delete") != null;
  const adverts = new Map<string, { up: boolean; reason: string | null; at: number | null; heard: number | null }>();
  for (const n of s.routing?.nets ?? []) adverts.set(n.net, { up: n.up, reason: n.detail, at: null, heard: n.lastHeard });
  for (const [net, a] of s.netAdverts) {
    const cur = adverts.get(net);
    adverts.set(net, { up: cur ? cur.up : a.up, reason: a.reason, at: a.at, heard: cur?.heard ?? null });
  }
  return (
    <div class="view" data-view="routes">
      <Section
        title="Route table"
        right={<span class="muted">{s.routes ? `${s.routes.length} routes` : "from route events"}</span>}
      >
        {s.routes == null && (
          <p class="muted" data-routes-missing>
            This router's API serves no route table (GET /api/v1/routes); the matrix shows the route state changes from the event
            log and stream, and fills in from the table as soon as the server has it.
          </p>
        )}
        {nets.length === 0 ? (
          <p class="muted">No routes.</p>
        ) : (
          <div class="scroll-x">
            <table class="matrix" data-table="routes">
              <thead>
                <tr>
                  <th>gateway \ remote net</th>
                  {nets.map((n) => (
                    <th key={n}>{n}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {gateways.map((g) => (
                  <tr key={g}>
                    <th class="nid">
                      {g}
                      {(() => {
                        const r = (s.routes ?? []).find((x) => x.gateway === g);
                        if (!r?.gatewayAlive) return null;
                        return (
                          <div class={`small ${r.gatewayAlive === "dead" ? "bad" : "muted"}`} data-gateway-state={r.gatewayAlive}>
                            gateway {r.gatewayAlive}
                            {r.gatewayReason ? `: ${r.gatewayReason}` : ""}
                          </div>
                        );
                      })()}
                    </th>
                    {nets.map((n) => {
                      const c = cells.get(`${n} ${g}`);
                      if (!c) return <td key={n} class="cell-none" />;
                      return (
                        <td key={n} class={`cell ${c.up ? "cell-up" : "cell-down"}`} data-route={`${n} ${g}`} data-state={c.up ? "up" : "down"}>
                          <div class="cell-state">{c.up ? "up" : "down"}</div>
                          {c.reason && <div class="cell-reason">{c.reason}</div>}
                          {c.row && (
                            <div class="muted small">
                              {c.row.kind ? `${c.row.kind} · ` : ""}hops {c.row.hops == null || c.row.hops < 0 ? "–" : c.row.hops} · priority{" "}
                              {c.row.priority ?? "–"}
                            </div>
                          )}
                          <div class="small">
                            {c.changed != null ? (
                              <>
                                changed <When at={c.changed} />
                                {c.cause && <div class="muted">{c.cause}</div>}
                              </>
                            ) : (
                              <span class="muted">no change seen</span>
                            )}
                          </div>
                          {canRemove && c.row && (
                            <button type="button" class="small" data-remove-route={`${n} ${g}`} onClick={() => removeRoute(c.row!)}>
                              Remove
                            </button>
                          )}
                        </td>
                      );
                    })}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <AddRoute />
      </Section>

      <Section title="What this router advertises per local net">
        {adverts.size === 0 ? (
          <p class="muted">
            {s.routing == null
              ? "This router's API serves no routing document (GET /api/v1/routing) and no net status change has been seen."
              : "No local nets advertised (routing disabled?)."}
          </p>
        ) : (
          <table class="grid" data-table="adverts">
            <thead>
              <tr>
                <th>net</th>
                <th>advertised</th>
                <th>reason of the last change</th>
                <th>last change</th>
                <th>last heard on it</th>
              </tr>
            </thead>
            <tbody>
              {[...adverts.entries()].sort().map(([net, a]) => (
                <tr key={net} data-advert={net}>
                  <td>{net}</td>
                  <td>
                    <Badge ok={a.up}>{a.up ? "up" : "down"}</Badge>
                  </td>
                  <td>{a.reason ?? <span class="muted">–</span>}</td>
                  <td>
                    <When at={a.at} />
                  </td>
                  <td>
                    <When at={a.heard} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </div>
  );
}
