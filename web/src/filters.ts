// The fleet page's filters and where they live: the URL's hash ("#/?user=alice&range_h=168"),
// so that a filtered view is a link one can share. The same filters become the gateway's
// query parameters (api/fleet, api/jobs, api/alerts).

export interface FleetFilters {
  cluster: string;
  user: string;
  team: string;
  gpu_model: string;
  // The last `range_h` hours, unless a custom range [from_ms, to_ms) is set.
  range_h: number;
  from_ms: number | null;
  to_ms: number | null;
}

export const TEXT_FILTERS = ["cluster", "user", "team", "gpu_model"] as const;

export function defaultFilters(): FleetFilters {
  return { cluster: "", user: "", team: "", gpu_model: "", range_h: 24, from_ms: null, to_ms: null };
}

function whole(text: string | null): number | null {
  if (text === null || !/^\d+$/.test(text)) return null;
  return Number(text);
}

// Filters from a location hash such as "#/?cluster=eos&user=alice"; unknown or malformed
// parameters are ignored (a custom range needs both ends, the end after the start).
export function filtersFromHash(hash: string): FleetFilters {
  const f = defaultFilters();
  const q = hash.indexOf("?");
  if (q < 0) return f;
  const params = new URLSearchParams(hash.slice(q + 1));
  for (const key of TEXT_FILTERS) f[key] = params.get(key) ?? "";
  const range = whole(params.get("range_h"));
  if (range !== null && range > 0) f.range_h = range;
  const from = whole(params.get("from_ms"));
  const to = whole(params.get("to_ms"));
  if (from !== null && to !== null && to > from) {
    f.from_ms = from;
    f.to_ms = to;
  }
  return f;
}

// The gateway's query parameters for the filters (only those that are set).
export function filterParams(f: FleetFilters): URLSearchParams {
  const params = new URLSearchParams();
  for (const key of TEXT_FILTERS) if (f[key]) params.set(key, f[key]);
  if (f.from_ms !== null && f.to_ms !== null) {
    params.set("from_ms", String(f.from_ms));
    params.set("to_ms", String(f.to_ms));
  } else {
    params.set("range_h", String(f.range_h));
  }
  return params;
}

// The shareable hash of the filters: filtersFromHash(filtersToHash(f)) equals f.
export function filtersToHash(f: FleetFilters): string {
  return `#/?${filterParams(f).toString()}`;
}

// "2026-01-01T00:00" (a datetime-local input, read as UTC) -> Unix ms; null when empty or
// not a time.
export function utcInputToMs(value: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(value)) return null;
  const ms = Date.parse(`${value}Z`);
  return Number.isNaN(ms) ? null : ms;
}

// Unix ms -> "2026-01-01T00:00" for a datetime-local input showing UTC.
export function msToUtcInput(ms: number | null): string {
  if (ms === null) return "";
  return new Date(ms).toISOString().slice(0, 16);
}
