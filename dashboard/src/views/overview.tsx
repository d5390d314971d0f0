// Overview: a banner for whatever is not healthy, forwarding rate and router buffers, and
// every net with its local NIs (status, health value, credits, traffic).

import { Badge, HealthBar, Num, ResetButton, Section, fmtBytes } from "../components";
import type { State } from "../store";

export interface Problem {
  key: string;
  text: string;
}

/** What is not healthy right now. */
export function problems(s: State): Problem[] {
  const out: Problem[] = [];
  for (const net of s.nets?.nets ?? []) {
    if (net.net_type === "lo") continue;
    for (const ni of net.nis) {
      if (ni.status !== "up") out.push({ key: `st ${ni.nid}`, text: `local NI ${ni.nid} is ${ni.status}` });
      const h = ni.health_stats["health value"];
      if (h < 1000) out.push({ key: `h ${ni.nid}`, text: `local NI ${ni.nid} health ${h}` });
    }
  }
  for (const p of s.peers?.peers ?? [])
    for (const ni of p.nis) {
      const h = ni.health_stats["health value"];
      if (h < 1000) out.push({ key: `ph ${ni.nid}`, text: `peer NI ${ni.nid} health ${h}` });
      if (ni.state === "down") out.push({ key: `ps ${ni.nid}`, text: `peer NI ${ni.nid} is down` });
    }
  if (s.recovery.local.length) out.push({ key: "rq l", text: `${s.recovery.local.length} in the local NI recovery queue` });
  if (s.recovery.peer.length) out.push({ key: "rq p", text: `${s.recovery.peer.length} in the peer NI recovery queue` });
  for (const r of s.routes ?? [])
    if (!r.up) out.push({ key: `r ${r.net} ${r.gateway}`, text: `route to ${r.net} via ${r.gateway} down${r.reason ? `: ${r.reason}` : ""}` });
  for (const n of s.routing?.nets ?? []) if (!n.up) out.push({ key: `adv ${n.net}`, text: `net ${n.net} advertised down` });
  if (s.stream !== "live") out.push({ key: "sse", text: `event stream ${s.stream}` });
  if (s.pollError) out.push({ key: "poll", text: `API: ${s.pollError}` });
  return out;
}

export function Banner({ s }: { s: State }) {
  const p = problems(s);
  if (!s.nets) return null;
  if (p.length === 0)
    return (
      <div class="banner ok" data-banner="ok">
        All NIs up at full health; nothing in recovery.
      </div>
    );
  return (
    <div class="banner bad" data-banner="problems">
      <b>Not healthy:</b>
      <ul>
        {p.slice(0, 8).map((x) => (
          <li key={x.key}>{x.text}</li>
        ))}
        {p.length > 8 && <li>and {p.length - 8} more</li>}
      </ul>
    </div>
  );
}

function Buffers({ s }: { s: State }) {
  if (!s.routing) {
    return <p class="muted">This router's API has no router buffer document (GET /api/v1/routing) yet.</p>;
  }
  const r = s.routing;
  return (
    <div>
      <p>
        Routing: <Badge ok={r.enabled}>{r.enabled == null ? "?" : r.enabled ? "enabled" : "disabled"}</Badge>
      </p>
      {r.cpts.length === 0 && <p class="muted">No buffer pools.</p>}
      {r.cpts.length > 0 && (
        <table class="grid" data-table="buffers">
          <thead>
            <tr>
              <th>CPT</th>
              <th>pool</th>
              <th>buffers</th>
              <th>free credits</th>
              <th>in use</th>
              <th>low water</th>
            </tr>
          </thead>
          <tbody>
            {r.cpts.flatMap((c) =>
              c.pools.map((p) => {
                const used = p.total != null && p.free != null ? p.total - Math.max(0, p.free) : null;
                const pct = used != null && p.total ? (100 * used) / p.total : null;
                return (
                  <tr key={`${c.name} ${p.name}`}>
                    <td>{c.name}</td>
                    <td>{p.name}</td>
                    <td>
                      <Num v={p.total} />
                    </td>
                    <td class={p.free != null && p.free < 0 ? "bad" : ""}>
                      <Num v={p.free} />
                    </td>
                    <td>
                      <span class="usebar">
                        <span style={{ width: `${Math.min(100, pct ?? 0)}%` }} />
                      </span>{" "}
                      <Num v={used} /> {pct != null && <span class="muted">({pct.toFixed(0)}%)</span>}
                    </td>
                    <td>
                      <Num v={p.low} />
                    </td>
                  </tr>
                );
              }),
            )}
          </tbody>
        </table>
      )}
      {r.waiting != null && (
        <p>
          Messages waiting for a credit or a buffer: <b class={r.waiting > 0 ? "bad" : ""}>{r.waiting}</b>
        </p>
      )}
      {r.peers.length > 0 && (
        <table class="grid" data-table="rtr-credits">
          <thead>
            <tr>
              <th>peer NI (router-buffer credits)</th>
              <th>max</th>
              <th>now</th>
              <th>lowest</th>
            </tr>
          </thead>
          <tbody>
            {r.peers.map((p) => (
              <tr key={p.nid}>
                <td class="nid">{p.nid}</td>
                <td>
                  <Num v={p.max} />
                </td>
                <td class={p.credits != null && p.credits < 0 ? "bad" : ""}>
                  <Num v={p.credits} />
                </td>
                <td>
                  <Num v={p.min} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

export function Overview({ s }: { s: State }) {
  const nets = s.nets?.nets ?? [];
  const nis = nets.flatMap((n) => n.nis).filter((ni) => !ni.nid.endsWith("@lo"));
  const up = nis.filter((ni) => ni.status === "up").length;
  const full = nis.filter((ni) => ni.health_stats["health value"] >= 1000).length;
  return (
    <div class="view" data-view="overview">
      <Banner s={s} />
      <div class="tiles">
        <div class="tile">
          <div class="tile-label">local NIs up</div>
          <div class="tile-value">
            {up} / {nis.length}
          </div>
        </div>
        <div class="tile">
          <div class="tile-label">at full health</div>
          <div class="tile-value">
            {full} / {nis.length}
          </div>
        </div>
        <div class="tile">
          <div class="tile-label">forwarding</div>
          <div class="tile-value" data-rate>
            {s.rate ? `${s.rate.msgs.toFixed(1)} msg/s` : "–"}
          </div>
          <div class="tile-sub">{s.rate ? `${fmtBytes(s.rate.bytes)}/s` : ""}</div>
        </div>
        <div class="tile">
          <div class="tile-label">forwarded total</div>
          <div class="tile-value">{s.stats ? s.stats.route_count : "–"}</div>
          <div class="tile-sub">{s.stats ? fmtBytes(s.stats.route_length) : ""}</div>
        </div>
        <div class="tile">
          <div class="tile-label">dropped</div>
          <div class="tile-value">{s.stats ? s.stats.drop_count : "–"}</div>
          <div class="tile-sub">{s.rate ? `${s.rate.drops.toFixed(1)} /s` : ""}</div>
        </div>
        <div class="tile">
          <div class="tile-label">in recovery</div>
          <div class="tile-value">
            {s.recovery.local.length} local · {s.recovery.peer.length} peer
          </div>
        </div>
      </div>

      <Section title="Nets and local NIs">
        <table class="grid" data-table="nis">
          <thead>
            <tr>
              <th>net</th>
              <th>NID</th>
              <th>status</th>
              <th>health</th>
              <th>credits</th>
              <th>peer credits</th>
              <th>sent</th>
              <th>received</th>
              <th>dropped</th>
              <th>failures</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {nets.flatMap((net) =>
              net.nis.map((ni, i) => {
                const h = ni.health_stats;
                const lo = net.net_type === "lo";
                const failures = h.interrupts + h.dropped + h.aborted + h["no route"] + h.timeouts + h.error;
                const queued = s.recovery.local.includes(ni.nid);
                return (
                  <tr key={ni.nid} data-ni={ni.nid}>
                    <td>{i === 0 ? net.net_type : ""}</td>
                    <td class="nid">{ni.nid}</td>
                    <td>
                      <Badge ok={ni.status === "up"}>{ni.status}</Badge>
                      {queued && (
                        <span class="badge b-warn" title="on the local NI recovery queue">
                          recovery
                        </span>
                      )}
                    </td>
                    <td>{lo ? <span class="muted">–</span> : <HealthBar value={h["health value"]} nid={ni.nid} />}</td>
                    <td>{ni.tunables.credits}</td>
                    <td>{ni.tunables.peer_credits}</td>
                    <td>{ni.statistics.send_count}</td>
                    <td>{ni.statistics.recv_count}</td>
                    <td>{ni.statistics.drop_count}</td>
                    <td title="interrupts, dropped, aborted, no route, timeouts, errors">{failures}</td>
                    <td>{!lo && <ResetButton nid={ni.nid} kind="local" />}</td>
                  </tr>
                );
              }),
            )}
          </tbody>
        </table>
      </Section>

      <Section title="Router buffers">
        <Buffers s={s} />
      </Section>
    </div>
  );
}
