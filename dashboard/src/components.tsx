// Small pieces the views share: health bars, status badges, times, the confirmation dialog
// and the reset-health button (shown to admin tokens only).

import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { NiKind } from "./model";
import { fmtAgo, fmtTime, resetHealth, state, toWall } from "./store";

export function healthClass(v: number | null): string {
  if (v == null) return "h-unknown";
  if (v >= 1000) return "h-ok";
  if (v >= 500) return "h-warn";
  return "h-bad";
}

export function HealthBar({ value, nid }: { value: number | null; nid?: string }) {
  const pct = value == null ? 0 : Math.max(0, Math.min(100, value / 10));
  return (
    <span class={`health ${healthClass(value)}`} data-health-of={nid} data-health={value ?? ""}>
      <span class="bar">
        <span class="fill" style={{ width: `${pct}%` }} />
      </span>
      <span class="value">{value ?? "–"}</span>
    </span>
  );
}

export function Badge({ ok, children, title }: { ok: boolean | null; children: ComponentChildren; title?: string }) {
  return (
    <span class={`badge ${ok == null ? "b-na" : ok ? "b-up" : "b-down"}`} title={title}>
      {children}
    </span>
  );
}

/** A time on this run's node clock (ms), shown on the browser's clock and time zone. */
export function When({ at }: { at: number | null }) {
  if (at == null) return <span class="muted">–</span>;
  const wall = toWall(at);
  return (
    <span class="when" title={`${wall == null ? "" : `${new Date(wall).toString()}; `}node clock ${at} ms`} data-wall-ms={wall ?? ""}>
      {fmtTime(at)} <span class="muted">{fmtAgo(at)}</span>
    </span>
  );
}

export function Num({ v, unit }: { v: number | null | undefined; unit?: string }) {
  if (v == null || !isFinite(v)) return <span class="muted">–</span>;
  const s = Number.isInteger(v) || Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
  return (
    <span class="num">
      {s}
      {unit ? ` ${unit}` : ""}
    </span>
  );
}

export function fmtBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(2)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n.toFixed(0)} B`;
}

// ---------------------------------------------------------------------------------------
// Confirmation.

interface Ask {
  title: string;
  body: ComponentChildren;
  confirm: string;
  run: () => Promise<void>;
}

let openDialog: ((a: Ask | null) => void) | null = null;

/** Asks the person to confirm, then runs `run`; the dialog shows its error if it fails. */
export function confirmThen(a: Ask): void {
  openDialog?.(a);
}

export function ConfirmHost() {
  const [ask, setAsk] = useState<Ask | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  openDialog = (a) => {
    setAsk(a);
    setError(null);
    setBusy(false);
  };
  if (!ask) return null;
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      await ask.run();
      setAsk(null);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="modal-back" role="presentation">
      <div class="modal" role="dialog" aria-modal="true" aria-labelledby="modal-title">
        <h3 id="modal-title">{ask.title}</h3>
        <div class="modal-body">{ask.body}</div>
        {error && <p class="error">{error}</p>}
        <div class="modal-actions">
          <button type="button" onClick={() => setAsk(null)} disabled={busy}>
            Cancel
          </button>
          <button type="button" class="danger" data-confirm onClick={go} disabled={busy}>
            {busy ? "Working…" : ask.confirm}
          </button>
        </div>
      </div>
    </div>
  );
}

/** "Reset health" for a local NI or peer NI: admin tokens only, after a confirmation. */
export function ResetButton({ nid, kind }: { nid: string; kind: NiKind }) {
  if (state.role !== "admin") return null;
  const what = kind === "local" ? "local NI" : "peer NI";
  return (
    <button
      type="button"
      class="small"
      data-reset={nid}
      title={`Set the health of ${what} ${nid} back to 1000`}
      onClick={() =>
        confirmThen({
          title: `Reset the health of ${nid}?`,
          body: (
            <p>
              The health value of {what} <b>{nid}</b> is set back to 1000 (full health), which also takes it off the{" "}
              {kind} NI recovery queue. The change is recorded as an admin event.
            </p>
          ),
          confirm: "Reset health",
          run: () => resetHealth(nid, kind),
        })
      }
    >
      Reset health
    </button>
  );
}

export function Section({ title, children, right }: { title: string; children: ComponentChildren; right?: ComponentChildren }) {
  return (
    <section class="card">
      <header class="card-head">
        <h2>{title}</h2>
        {right}
      </header>
      {children}
    </section>
  );
}
