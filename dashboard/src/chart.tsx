// A health-over-time chart of one NI (uPlot): the health value as a step line on the browser's
// clock (the node's clock placed on it), with fault, failure, recovery and reset events drawn
// as marks.

import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Mark, Series } from "./store";
import { fmtWall, state } from "./store";

/** A node clock time (ms) as the chart's x: wall-clock seconds (node seconds until the gap
 * between the two clocks is known, when the axis shows no times). */
function wallX(t: number): number {
  return (t + (state.offset ?? 0)) / 1000;
}

const MARK_COLORS: Record<Mark["kind"], string> = {
  fault: "#d62728",
  unfault: "#f4a09c",
  failure: "#ff7f0e",
  queued: "#e6a700",
  ping: "#9aa0a6",
  left: "#2ca02c",
  reset: "#1f77b4",
  status: "#9467bd",
};

export const MARK_LEGEND: [Mark["kind"], string][] = [
  ["fault", "fault rule added"],
  ["unfault", "fault rule removed"],
  ["failure", "failed send"],
  ["queued", "queued for recovery"],
  ["ping", "recovery ping"],
  ["left", "left recovery"],
  ["reset", "health set by admin"],
  ["status", "status change"],
];

function data(s: Series, current: number | null): [number[], number[]] {
  const xs: number[] = [];
  const ys: number[] = [];
  // Start at the earliest mark when it comes before the first value (a fault rule added
  // before the first failure), at the value the NI had then.
  const first = s.points[0];
  const firstMark = s.marks.length ? Math.min(...s.marks.map((m) => m.t)) : null;
  if (first && firstMark != null && firstMark < first.t) {
    xs.push(wallX(firstMark) - 0.5);
    ys.push(first.v);
  }
  for (const p of s.points) {
    xs.push(wallX(p.t));
    ys.push(p.v);
  }
  const lastT = xs.length ? xs[xs.length - 1] : null;
  const end = state.offset != null ? Date.now() / 1000 : lastT;
  const v = current ?? (ys.length ? ys[ys.length - 1] : null);
  if (v != null) {
    if (xs.length === 0) {
      const t = end ?? 0;
      xs.push(t - 60, t);
      ys.push(v, v);
    } else if (end != null && end > (lastT ?? 0)) {
      xs.push(end);
      ys.push(v);
    }
  }
  return [xs, ys];
}

function marksPlugin(get: () => Mark[]): uPlot.Plugin {
  return {
    hooks: {
      draw: (u: uPlot) => {
        const ctx = u.ctx;
        const { left, top, width, height } = u.bbox;
        const [x0, x1] = [u.scales.x.min ?? 0, u.scales.x.max ?? 0];
        ctx.save();
        for (const m of get()) {
          const t = wallX(m.t);
          if (t < x0 || t > x1) continue;
          const x = Math.round(u.valToPos(t, "x", true));
          ctx.strokeStyle = MARK_COLORS[m.kind];
          ctx.lineWidth = m.kind === "ping" ? 1 : 2 * devicePixelRatio;
          ctx.setLineDash(m.kind === "ping" || m.kind === "unfault" ? [2 * devicePixelRatio, 3 * devicePixelRatio] : []);
          ctx.beginPath();
          const y0 = m.kind === "ping" || m.kind === "failure" ? top + height * 0.85 : top;
          ctx.moveTo(x, y0);
          ctx.lineTo(x, top + height);
          ctx.stroke();
        }
        ctx.restore();
        void left;
        void width;
      },
    },
  };
}

export function HealthChart({ s, current, width }: { s: Series; current: number | null; width: number }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const marks = useRef<Mark[]>(s.marks);
  marks.current = s.marks;

  useEffect(() => {
    if (!host.current) return;
    const opts: uPlot.Options = {
      width,
      height: 150,
      legend: { show: false },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false }, y: { range: [0, 1050] } },
      axes: [
        {
          values: (u, ticks) => {
            const labels = ticks.map((t) => (state.offset == null ? "" : fmtWall(t * 1000)));
            // The labels are drawn on a canvas: the chart's element names them too.
            u.root.parentElement?.setAttribute("data-x-labels", labels.join("|"));
            return labels;
          },
          incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400],
          space: 70, // px between ticks: room for HH:MM:SS
          size: 30,
          font: "11px system-ui, sans-serif",
          stroke: "#666",
        },
        {
          size: 44,
          font: "11px system-ui, sans-serif",
          stroke: "#666",
          splits: () => [0, 250, 500, 750, 1000],
          values: (_u, ticks) => ticks.map(String),
        },
      ],
      series: [
        {},
        {
          label: "health",
          stroke: "#2b6cb0",
          width: 2,
          fill: "rgba(43,108,176,0.08)",
          paths: uPlot.paths.stepped!({ align: 1 }),
          points: { show: false },
        },
      ],
      plugins: [marksPlugin(() => marks.current)],
    };
    plot.current = new uPlot(opts, data(s, current), host.current);
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(data(s, current));
  });

  useEffect(() => {
    plot.current?.setSize({ width, height: 150 });
  }, [width]);

  const vals = s.points.map((p) => p.v);
  const falls = vals.filter((v, i) => i > 0 && v < vals[i - 1]).length;
  return (
    <div
      ref={host}
      class="chart"
      data-chart-of={s.nid}
      data-points={s.points.length}
      data-min={vals.length ? Math.min(...vals) : ""}
      data-falls={falls}
      data-last={vals.length ? vals[vals.length - 1] : ""}
      data-marks={s.marks.map((m) => m.kind).join(" ")}
    />
  );
}
