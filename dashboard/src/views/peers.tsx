// Peers: a searchable list of peers and their peer NIs (Multi-Rail, state, health, credits).

import { useState } from "preact/hooks";
import { Badge, HealthBar, ResetButton } from "../components";
import type { State } from "../store";

export function Peers({ s }: { s: State }) {
  const [q, setQ] = useState("");
  const needle = q.trim().toLowerCase();
  const peers = (s.peers?.peers ?? []).filter(
    (p) => !needle || p.primary_nid.toLowerCase().includes(needle) || p.nis.some((n) => n.nid.toLowerCase().includes(needle)),
  );
  const total = s.peers?.peers.length ?? 0;
  return (
    <div class="view" data-view="peers">
      <div class="toolbar">
        <input type="search" placeholder="Search NIDs" value={q} onInput={(e) => setQ(e.currentTarget.value)} data-search="peers" />
        <span class="muted">
          {peers.length} of {total} peers
        </span>
      </div>
      <table class="grid" data-table="peers">
        <thead>
          <tr>
            <th>primary NID</th>
            <th>Multi-Rail</th>
            <th>peer NI</th>
            <th>state</th>
            <th>health</th>
            <th title="available / max (lowest seen)">tx credits</th>
            <th title="available (lowest seen)">router credits</th>
            <th>queued</th>
            <th>sent</th>
            <th>received</th>
            <th>dropped</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {peers.flatMap((p) =>
            p.nis.map((ni, i) => (
              <tr key={ni.nid} data-peer-ni={ni.nid} class={i === 0 ? "group-start" : ""}>
                <td class="nid">{i === 0 ? p.primary_nid : ""}</td>
                <td>{i === 0 ? <Badge ok={p.multi_rail ? true : null}>{p.multi_rail ? "yes" : "no"}</Badge> : ""}</td>
                <td class="nid">{ni.nid}</td>
                <td>
                  <Badge ok={ni.state === "NA" ? null : ni.state === "up"}>{ni.state}</Badge>
                </td>
                <td>
                  <HealthBar value={ni.health_stats["health value"]} nid={ni.nid} />
                </td>
                <td>
                  {ni.credits.available_tx_credits} / {ni.credits.max_ni_tx_credits}{" "}
                  <span class="muted">({ni.credits.min_tx_credits})</span>
                </td>
                <td>
                  {ni.credits.available_rtr_credits} <span class="muted">({ni.credits.min_rtr_credits})</span>
                </td>
                <td>{ni.credits.tx_q_num_of_buf}</td>
                <td>{ni.statistics.send_count}</td>
                <td>{ni.statistics.recv_count}</td>
                <td>{ni.statistics.drop_count}</td>
                <td>
                  <ResetButton nid={ni.nid} kind="peer" />
                </td>
              </tr>
            )),
          )}
        </tbody>
      </table>
      {total === 0 && <p class="muted">No peers.</p>}
    </div>
  );
}
