// Recovery queues: each NI on the local and the peer NI recovery queue, since when, the
// pings tried and when the next one is due.

import { HealthBar, ResetButton, Section, When } from "../components";
import type { NiKind } from "../model";
import type { State } from "../store";
import { healthOf } from "../store";

function pingStats(s: State, nid: string, kind: NiKind): { count: number | null; next: number | null } {
  if (kind === "local") {
    for (const n of s.nets?.nets ?? [])
      for (const ni of n.nis)
        if (ni.nid === nid) return { count: ni.health_stats.ping_count ?? null, next: ni.health_stats.next_ping ?? null };
  } else {
    for (const p of s.peers?.peers ?? [])
      for (const ni of p.nis)
        if (ni.nid === nid) return { count: ni.health_stats.ping_count ?? null, next: ni.health_stats.next_ping ?? null };
  }
  return { count: null, next: null };
}

function Queue({ s, kind }: { s: State; kind: NiKind }) {
  const nids = kind === "local" ? s.recovery.local : s.recovery.peer;
  return (
    <Section title={kind === "local" ? "Local NI recovery queue" : "Peer NI recovery queue"} right={<span class="muted">{nids.length} queued</span>}>
      {nids.length === 0 ? (
        <p class="muted" data-queue-empty={kind}>
          Empty: every {kind} NI is at full health.
        </p>
      ) : (
        <table class="grid" data-queue={kind}>
          <thead>
            <tr>
              <th>#</th>
              <th>NID</th>
              <th>health</th>
              <th>queued since</th>
              <th>pings tried</th>
              <th>last ping</th>
              <th>next ping</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {nids.map((nid, i) => {
              const info = s.recoveryInfo.get(nid);
              const shown = pingStats(s, nid, kind);
              return (
                <tr key={nid} data-recovery={nid}>
                  <td>{i}</td>
                  <td class="nid">{nid}</td>
                  <td>
                    <HealthBar value={healthOf(nid)} nid={nid} />
                  </td>
                  <td>
                    <When at={info?.since ?? null} />
                  </td>
                  <td>{info ? info.pings : (shown.count ?? "–")}</td>
                  <td>
                    <When at={info?.lastPing ?? null} />
                  </td>
                  <td>{info?.nextPing != null ? <When at={info.nextPing} /> : shown.next ? `${shown.next} s` : <span class="muted">–</span>}</td>
                  <td>
                    <ResetButton nid={nid} kind={kind} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function Recovery({ s }: { s: State }) {
  return (
    <div class="view" data-view="recovery">
      <Queue s={s} kind="local" />
      <Queue s={s} kind="peer" />
      <p class="muted">
        An NI below full health is pinged on a backoff schedule until it is back at 1000 (or past the recovery limit). Times are
        the node's, shown on this browser's clock.
      </p>
    </div>
  );
}
