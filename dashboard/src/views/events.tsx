// Events: the node's events, newest first, filtered by type and text: the newest page of the
// server's event log on opening, older pages on demand, then live.

import { useState } from "preact/hooks";
import { When } from "../components";
import { EVENT_TYPES, describe } from "../model";
import type { State } from "../store";
import { loadOlder } from "../store";

const SHOWN = 1000;

export function Events({ s }: { s: State }) {
  const [off, setOff] = useState<Set<string>>(new Set(["recovery_ping"]));
  const [q, setQ] = useState("");
  const [paused, setPaused] = useState<number | null>(null);
  const needle = q.trim().toLowerCase();
  const toggle = (t: string) => {
    const n = new Set(off);
    if (n.has(t)) n.delete(t);
    else n.add(t);
    setOff(n);
  };
  const counts = new Map<string, number>();
  for (const e of s.events) counts.set(e.event.type, (counts.get(e.event.type) ?? 0) + 1);
  const rows = [];
  for (let i = s.events.length - 1; i >= 0 && rows.length < SHOWN; i--) {
    const e = s.events[i];
    if (paused != null && e.id > paused) continue;
    if (off.has(e.event.type)) continue;
    const text = describe(e.event);
    if (needle && !text.toLowerCase().includes(needle) && !e.event.type.includes(needle)) continue;
    rows.push({ e, text });
  }
  return (
    <div class="view" data-view="events">
      <div class="toolbar">
        <input type="search" placeholder="Filter text (NID, net, cause…)" value={q} onInput={(e) => setQ(e.currentTarget.value)} data-search="events" />
        <button type="button" onClick={() => setPaused(paused == null ? s.lastEventId : null)}>
          {paused == null ? "Pause" : "Resume"}
        </button>
        <span class={`badge ${s.stream === "live" && paused == null ? "b-up" : "b-na"}`}>{paused == null ? s.stream : "paused"}</span>
      </div>
      <div class="chips">
        {EVENT_TYPES.map((t) => (
          <label key={t} class={`chip ${off.has(t) ? "chip-off" : ""}`}>
            <input type="checkbox" checked={!off.has(t)} onChange={() => toggle(t)} /> {t} <span class="muted">{counts.get(t) ?? 0}</span>
          </label>
        ))}
      </div>
      <table class="grid events" data-table="events">
        <thead>
          <tr>
            <th>id</th>
            <th>time</th>
            <th>type</th>
            <th>what</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ e, text }) => (
            <tr key={e.id} data-event={e.event.type} class={`ev-${e.event.type}`}>
              <td>{e.id}</td>
              <td>
                <When at={e.t} />
              </td>
              <td>
                <span class={`etype et-${e.event.type}`}>{e.event.type}</span>
              </td>
              <td>{text}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 && <p class="muted">No events match.</p>}
      <div class="toolbar" data-events-paging>
        <button
          type="button"
          data-action="load-older"
          disabled={!s.olderLeft || s.loadingOlder}
          onClick={() => void loadOlder().catch(() => undefined)}
        >
          {s.loadingOlder ? "Loading…" : "Load older events"}
        </button>
        <span class="muted" data-events-loaded={s.events.length} data-oldest-id={s.oldestId ?? ""}>
          {s.events.length} events loaded from the server's event log and stream
          {s.events.length > 0 && ` (ids ${s.events[0].id}–${s.lastEventId})`}
          {s.olderLeft ? "; the server keeps older ones" : "; nothing older on the server"}; showing up to {SHOWN}.
        </span>
      </div>
    </div>
  );
}
