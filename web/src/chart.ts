// A small SVG time-series chart: lines, an optional confidence band and vertical markers.
// Returns markup, so it is testable without a DOM and cheap to re-render on live updates.

import { clock, esc } from "./format";

export interface Series {
  name: string;
  // [Unix ms, value]; null values break the line.
  points: [number, number | null][];
  className: string;
  // Lower and upper bound per point (same order as points), drawn as a band.
  band?: [number, number][];
}

export interface Marker {
  at_ms: number;
  label: string;
  className: string;
}

export interface ChartOptions {
  width?: number;
  height?: number;
  // Values are fractions shown as percent on the axis.
  yMax?: number;
  title?: string;
}

const PAD = { left: 44, right: 12, top: 12, bottom: 26 };

// A "nice" upper bound for the y axis: 0.1, 0.2, 0.25, 0.5, 0.6, 0.8, 1.0 ...
export function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const steps = [0.05, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.2, 1.5];
  for (const s of steps) if (value <= s) return s;
  return Math.ceil(value);
}

function path(points: [number, number][]): string {
  return points.map(([x, y], i) => `${i === 0 ? "M" : "L"}${x.toFixed(1)},${y.toFixed(1)}`).join("");
}

export function renderChart(series: Series[], markers: Marker[], options: ChartOptions = {}): string {
  const width = options.width ?? 900;
  const height = options.height ?? 260;
  const all = series.flatMap((s) => s.points);
  const times = all.map((p) => p[0]);
  if (times.length === 0) {
    return `<div class="empty">No data yet.</div>`;
  }
  let t0 = Math.min(...times);
  let t1 = Math.max(...times);
  if (t1 === t0) t1 = t0 + 60_000;
  const values = all.map((p) => p[1]).filter((v): v is number => v !== null && Number.isFinite(v));
  const bands = series.flatMap((s) => (s.band ?? []).map((b) => b[1]));
  const yMax = options.yMax ?? niceMax(Math.max(0.05, ...values, ...bands));
  const w = width - PAD.left - PAD.right;
  const h = height - PAD.top - PAD.bottom;
  const x = (t: number) => PAD.left + ((t - t0) / (t1 - t0)) * w;
  const y = (v: number) => PAD.top + h - (Math.min(Math.max(v, 0), yMax) / yMax) * h;

  const parts: string[] = [];
  parts.push(
    `<svg class="chart" viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img"` +
      ` aria-label="${esc(options.title ?? "chart")}">`,
  );
  // Grid and axes: 3 to 6 horizontal lines at round percentages.
  const step = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5].find((st) => yMax / st <= 6) ?? yMax / 4;
  for (let v = 0; v <= yMax + 1e-9; v += step) {
    const yy = y(v);
    parts.push(`<line class="grid" x1="${PAD.left}" x2="${width - PAD.right}" y1="${yy}" y2="${yy}"/>`);
    parts.push(
      `<text class="axis" x="${PAD.left - 6}" y="${yy + 4}" text-anchor="end">${Math.round(v * 100)}%</text>`,
    );
  }
  const ticks = 6;
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + ((t1 - t0) * i) / ticks;
    const anchor = i === 0 ? "start" : i === ticks ? "end" : "middle";
    parts.push(
      `<text class="axis" x="${x(t)}" y="${height - 8}" text-anchor="${anchor}">${clock(t)}</text>`,
    );
  }
  // Bands first, then lines, then markers on top.
  for (const s of series) {
    if (!s.band || s.band.length !== s.points.length) continue;
    const upper: [number, number][] = [];
    const lower: [number, number][] = [];
    s.points.forEach(([t], i) => {
      upper.push([x(t), y(s.band![i][1])]);
      lower.push([x(t), y(s.band![i][0])]);
    });
    parts.push(`<path class="band ${esc(s.className)}" d="${path(upper)}${path(lower.reverse()).replace(/^M/, "L")}Z"/>`);
  }
  for (const s of series) {
    let run: [number, number][] = [];
    const segments: string[] = [];
    for (const [t, v] of s.points) {
      if (v === null || !Number.isFinite(v)) {
        if (run.length) segments.push(path(run));
        run = [];
        continue;
      }
      run.push([x(t), y(v)]);
    }
    if (run.length) segments.push(path(run));
    if (segments.length) {
      parts.push(`<path class="line ${esc(s.className)}" d="${segments.join("")}"><title>${esc(s.name)}</title></path>`);
    }
  }
  // Labels of markers close to each other are stacked rather than drawn over each other.
  const placed: number[] = [];
  for (const m of [...markers].sort((a, b) => a.at_ms - b.at_ms)) {
    if (m.at_ms < t0 || m.at_ms > t1) continue;
    const xx = x(m.at_ms);
    const row = placed.filter((px) => Math.abs(px - xx) < 120).length;
    placed.push(xx);
    parts.push(`<line class="marker ${esc(m.className)}" x1="${xx}" x2="${xx}" y1="${PAD.top}" y2="${PAD.top + h}"/>`);
    parts.push(
      `<text class="marker-label ${esc(m.className)}" x="${xx + 4}" y="${PAD.top + 12 + 14 * row}">${esc(m.label)}</text>`,
    );
  }
  parts.push("</svg>");
  return parts.join("");
}

// Bars of a histogram (e.g. GPU-hours per OFU decile), labels under each bar.
export function renderBars(values: number[], labels: string[], options: ChartOptions = {}): string {
  const width = options.width ?? 480;
  const height = options.height ?? 200;
  const max = Math.max(...values, 0);
  const w = width - PAD.left - PAD.right;
  const h = height - PAD.top - PAD.bottom;
  const bw = values.length ? w / values.length : w;
  const parts = [
    `<svg class="chart bars" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(options.title ?? "histogram")}">`,
  ];
  values.forEach((v, i) => {
    const bh = max > 0 ? (v / max) * h : 0;
    const bx = PAD.left + i * bw + 2;
    parts.push(
      `<rect class="bar" x="${bx.toFixed(1)}" y="${(PAD.top + h - bh).toFixed(1)}" width="${(bw - 4).toFixed(1)}"` +
        ` height="${bh.toFixed(1)}"><title>${esc(labels[i])}: ${v.toFixed(1)} GPU-hours</title></rect>`,
    );
    parts.push(
      `<text class="axis" x="${(bx + (bw - 4) / 2).toFixed(1)}" y="${height - 8}" text-anchor="middle">${esc(labels[i])}</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("");
}
