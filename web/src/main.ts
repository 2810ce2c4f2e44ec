// The dashboard's entry: a hash router between the fleet page (#/) and a job page
// (#/job/<cluster>/<job id>; the gateway redirects alert links, /jobs/<cluster>/<job id>,
// there), each rendered from the gateway's JSON API and refreshed by live events.
import "./style.css";
import { closeLive } from "./live";
import { renderFleetPage } from "./pages/fleet";
import { renderJobPage } from "./pages/job";
import { esc } from "./format";

const app = document.getElementById("app")!;

// One navigation per route: changing the route aborts the last one, which cancels its reads,
// its pending refreshes and its live stream (see latestOnly in live.ts).
let navigation = new AbortController();

export function route(): void {
  const hash = location.hash.replace(/^#\/?/, "");
  const [page, ...rest] = hash.split("/");
  navigation.abort();
  navigation = new AbortController();
  const signal = navigation.signal;
  closeLive();
  const failed = (error: unknown) => {
    if (!signal.aborted) showError(error);
  };
  if ((page === "job" || page === "jobs") && rest.length >= 2) {
    const cluster = decodeURIComponent(rest[0]);
    const jobId = decodeURIComponent(rest.slice(1).join("/"));
    void renderJobPage(app, cluster, jobId, signal).catch(failed);
  } else {
    void renderFleetPage(app, signal).catch(failed);
  }
}

function showError(error: unknown): void {
  app.innerHTML = `<div class="error">${esc(error instanceof Error ? error.message : error)}</div>`;
}

window.addEventListener("hashchange", route);
route();
