// Health over time: one chart per local NI and per peer NI, from the event log and the live
// event stream, with fault and recovery events marked.

import type { RefObject } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { HealthChart, MARK_LEGEND } from "../chart";
import { Badge, HealthBar, ResetButton } from "../components";
import type { NiKind } from "../model";
import type { Series, State } from "../store";
import { healthOf } from "../store";

function useWidth(): [RefObject<HTMLDivElement | null>, number] {
  const ref = useRef<HTMLDivElement>(null);
  const [w, setW] = useState(900);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setW(el.clientWidth);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  return [ref, w];
}

function nis(s: State): { nid: string; kind: NiKind }[] {
  const out: { nid: string; kind: NiKind }[] = [];
  const seen = new Set<string>();
  const add = (nid: string, kind: NiKind) => {
    if (seen.has(nid)) return;
    seen.add(nid);
    out.push({ nid, kind });
  };
  for (const n of s.nets?.nets ?? []) if (n.net_type !== "lo") for (const ni of n.nis) add(ni.nid, "local");
  for (const p of s.peers?.peers ?? []) for (const ni of p.nis) add(ni.nid, "peer");
  for (const x of s.series.values()) add(x.nid, x.kind);
  return out;
}

export function Health({ s }: { s: State }) {
  const [ref, width] = useWidth();
  const [filter, setFilter] = useState("");
  const list = nis(s).filter((x) => x.nid.includes(filter.trim()));
  const cols = width > 1100 ? 2 : 1;
  const chartW = Math.max(280, Math.floor(width / cols) - 40);
  const card = (x: { nid: string; kind: NiKind }) => {
    const series: Series = s.series.get(x.nid) ?? { nid: x.nid, kind: x.kind, points: [], marks: [] };
    const h = healthOf(x.nid);
    const queued = (x.kind === "local" ? s.recovery.local : s.recovery.peer).includes(x.nid);
    return (
      <div class="chart-card" key={x.nid} data-health-card={x.nid}>
        <div class="chart-head">
          <span class="nid">{x.nid}</span>
          <span class="muted">{x.kind === "local" ? "local NI" : "peer NI"}</span>
          <HealthBar value={h} nid={x.nid} />
          {queued && <Badge ok={false}>in recovery</Badge>}
          <span class="spacer" />
          <ResetButton nid={x.nid} kind={x.kind} />
        </div>
        <HealthChart s={series} current={h} width={chartW} />
      </div>
    );
  };
  const local = list.filter((x) => x.kind === "local");
  const peer = list.filter((x) => x.kind === "peer");
  return (
    <div class="view" data-view="health" ref={ref}>
      <div class="toolbar">
        <input type="search" placeholder="Filter by NID" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
        <span class="legend">
          {MARK_LEGEND.map(([k, label]) => (
            <span key={k} class={`mark-key mk-${k}`}>
              {label}
            </span>
          ))}
        </span>
      </div>
      <h2 class="sub">Local NIs</h2>
      <div class={`charts cols-${cols}`}>{local.map(card)}</div>
      <h2 class="sub">Peer NIs</h2>
      {peer.length === 0 && <p class="muted">No peer NIs.</p>}
      <div class={`charts cols-${cols}`}>{peer.map(card)}</div>
    </div>
  );
}
