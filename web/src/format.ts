// Display formatting shared by the pages. Utilizations arrive as fractions.

const html: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

// Escapes text for use inside HTML (element content and quoted attributes).
export function esc(value: unknown): string {
  return String(value ?? "").replace(/[&<>"']/g, (c) => html[c]);
}

// 0.4512 -> "45.1%"; null/undefined/NaN -> "–".
export function pct(fraction: number | null | undefined, digits = 1): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "–";
  return `${(fraction * 100).toFixed(digits)}%`;
}

// GPU-hours with a precision that suits the size: 0.42, 12.3, 1,234.
export function hours(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US");
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

// A ratio such as 2.5 -> "2.50×".
export function times(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return `${value.toFixed(2)}×`;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

// Unix ms -> "2026-11-23 14:02" in UTC (the platform's time zone for every figure).
export function dateTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  const d = new Date(ms);
  return (
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`
  );
}

// Unix ms -> "14:02" in UTC.
export function clock(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

// Seconds -> "2h 05m", "12m", "40s".
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  if (seconds < 60) return `${Math.round(seconds)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m`;
  return `${Math.floor(m / 60)}h ${pad(m % 60)}m`;
}

// API enum names ("APP_FLOPS_OVERCOUNT", "regression_in_job") -> "app flops overcount".
export function words(name: string | null | undefined): string {
  return String(name ?? "")
    .toLowerCase()
    .replace(/_/g, " ")
    .trim();
}
