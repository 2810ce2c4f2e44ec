// Live updates: one EventSource on the gateway's /api/events, re-opened by the browser
// after a disconnect. Pages register what to refresh; bursts of events are coalesced.

export type LiveHandler = (event: string, data: unknown) => void;

const indicator = () => document.getElementById("live");

function setState(text: string, className: string) {
  const el = indicator();
  if (!el) return;
  el.textContent = text;
  el.className = `live ${className}`;
}

let source: EventSource | null = null;

// Opens the stream for `query` (e.g. "cluster=eos&job=42"), closing the previous one.
export function openLive(query: string, handler: LiveHandler): void {
  closeLive();
  const es = new EventSource(`api/events${query ? `?${query}` : ""}`);
  source = es;
  setState("connecting…", "connecting");
  es.onopen = () => setState("live", "on");
  es.onerror = () => setState("reconnecting…", "off");
  for (const name of ["ofu", "alert", "fleet", "status"]) {
    es.addEventListener(name, (e) => {
      let data: unknown = null;
      try {
        data = JSON.parse((e as MessageEvent).data);
      } catch {
        data = (e as MessageEvent).data;
      }
      handler(name, data);
    });
  }
}

export function closeLive(): void {
  source?.close();
  source = null;
}

// A page's renders in the order they finish: a render that finishes after a later one started
// (a slow answer under load) is dropped, and nothing renders once the page's navigation is
// over (`signal`: main.ts aborts it when the route changes), so a page left behind never
// writes over the one now shown.
export function latestOnly(signal: AbortSignal): () => () => boolean {
  let latest = 0;
  return () => {
    const mine = ++latest;
    return () => !signal.aborted && mine === latest;
  };
}

// Calls `fn` at most once per `ms`, after the last of a burst of calls.
export function debounce(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      fn();
    }, ms);
  };
}
