// The fleet page: GPU-hours and how well they were used, by cluster and GPU model, users and
// teams ranked by wasted GPU-hours, the OFU distribution, open alerts and the jobs. Filters
// (cluster, user, team, GPU model, time range) live in the URL's hash, so a filtered view is
// a link to share (filters.ts).
import { fetchAlerts, fetchFleet, fetchJobs, type Alerts, type Fleet, type FleetGroup, type JobsResponse } from "../api";
import { renderBars } from "../chart";
import {
  filterParams,
  filtersFromHash,
  filtersToHash,
  msToUtcInput,
  TEXT_FILTERS,
  utcInputToMs,
  type FleetFilters,
} from "../filters";
import { dateTime, esc, hours, pct, words } from "../format";
import { debounce, latestOnly, openLive } from "../live";
import { alertList, jobHref, unavailable } from "./common";

const RANGES: [string, number][] = [
  ["6 h", 6],
  ["24 h", 24],
  ["7 days", 168],
  ["30 days", 720],
];

const FILTER_LABELS: Record<(typeof TEXT_FILTERS)[number], string> = {
  cluster: "cluster",
  user: "user",
  team: "team",
  gpu_model: "GPU model",
};

function filterForm(f: FleetFilters): string {
  const inputs = TEXT_FILTERS.map(
    (key) => `<label>${esc(FILTER_LABELS[key])} <input name="${key}" data-testid="filter-${key}" value="${esc(f[key])}"
      placeholder="all" size="14"></label>`,
  ).join("");
  return `<form class="filters" data-testid="filters">${inputs}
    <label>from (UTC) <input type="datetime-local" name="from" data-testid="filter-from" value="${esc(msToUtcInput(f.from_ms))}"></label>
    <label>to (UTC) <input type="datetime-local" name="to" data-testid="filter-to" value="${esc(msToUtcInput(f.to_ms))}"></label>
    <button type="submit" data-testid="filter-apply">Apply</button>
    <a href="#/" data-testid="filter-clear">clear</a>
    <span class="muted small">Share this view: <a data-testid="share-link" href="${esc(filtersToHash(f))}">link</a></span></form>`;
}

// Users or teams, most wasted first; each links to the fleet page filtered to it (whose
// job list then shows its jobs).
function peopleTable(groups: FleetGroup[], key: "user" | "team", f: FleetFilters): string {
  if (groups.length === 0) return "";
  const rows = groups
    .map((g) => {
      const name = g[key];
      const cell = name
        ? `<a href="${esc(filtersToHash({ ...f, [key]: name }))}" data-testid="${key}-link">${esc(name)}</a>`
        : `<span class="muted">(none)</span>`;
      return `<tr data-testid="${key}-row" data-name="${esc(name)}"><td>${cell}</td><td class="num">${g.job_count}</td>
        <td class="num">${hours(g.gpu_hours)}</td><td class="num">${pct(g.ofu_mean)}</td>
        <td class="num">${hours(g.wasted_gpu_hours)}</td><td class="num">${hours(g.idle_gpu_hours)}</td></tr>`;
    })
    .join("");
  return `<table class="data" data-testid="by-${key}"><thead><tr><th>${key}</th><th class="num">jobs</th>
    <th class="num">GPU-hours</th><th class="num">OFU</th><th class="num">wasted GPU-h</th>
    <th class="num">idle GPU-h</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function card(label: string, value: string, note = "", testid = ""): string {
  return `<div class="card"${testid ? ` data-testid="${testid}"` : ""}><div class="card-label">${esc(label)}</div>
    <div class="card-value">${esc(value)}</div><div class="muted small">${esc(note)}</div></div>`;
}

function groupTable(groups: FleetGroup[], key: "cluster" | "gpu_model", title: string): string {
  if (groups.length === 0) return "";
  const rows = groups
    .map(
      (g) => `<tr><td>${esc(g[key] || "–")}</td><td class="num">${g.job_count}</td>
        <td class="num">${hours(g.gpu_hours)}</td><td class="num">${pct(g.ofu_mean)}</td>
        <td class="num">${hours(g.wasted_gpu_hours)}</td><td class="num">${hours(g.idle_gpu_hours)}</td>
        <td class="num">${hours(g.low_efficiency_gpu_hours)}</td></tr>`,
    )
    .join("");
  return `<table class="data" data-testid="by-${key}"><thead><tr><th>${esc(title)}</th><th class="num">jobs</th>
    <th class="num">GPU-hours</th><th class="num">OFU</th><th class="num">wasted GPU-h</th>
    <th class="num">idle GPU-h</th><th class="num">low-eff. GPU-h</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function fleetSection(fleet: Fleet, f: FleetFilters): string {
  if (!fleet.available || !fleet.total) return unavailable(fleet, "Fleet summary");
  const t = fleet.total;
  const labels = t.gpu_hours_by_ofu_decile.map((_, i) => `${i * 10}%`);
  return `
    <div class="cards">
      ${card("Fleet OFU", pct(t.ofu_mean), "GPU-hour weighted", "fleet-ofu")}
      ${card("GPU-hours", hours(t.gpu_hours), `${t.job_count} jobs`)}
      ${card("Effective GPU-hours", hours(t.effective_gpu_hours), "GPU-hours × OFU")}
      ${card("Wasted GPU-hours", hours(t.wasted_gpu_hours), "GPU-hours − effective", "wasted")}
      ${card("Idle GPU-hours", hours(t.idle_gpu_hours), "allocated GPUs doing nothing")}
      ${card("Low-efficiency GPU-hours", hours(t.low_efficiency_gpu_hours), `windows with OFU < ${pct(fleet.low_efficiency_ofu_threshold, 0)}`)}
    </div>
    <div class="row">
      <section class="panel"><h3>OFU distribution</h3>
        <p class="muted small">GPU-hours by job-window OFU, ${esc(dateTime(fleet.start_ms))} – ${esc(dateTime(fleet.end_ms))} UTC</p>
        <div data-testid="ofu-distribution">${renderBars(t.gpu_hours_by_ofu_decile, labels, { title: "GPU-hours by OFU decile" })}</div>
      </section>
      <section class="panel grow"><h3>Clusters</h3>${groupTable(fleet.by_cluster, "cluster", "cluster")}
        <h3>GPU models</h3>${groupTable(fleet.by_gpu_model, "gpu_model", "GPU model")}</section>
    </div>
    <div class="row">
      <section class="panel grow" data-testid="users-panel"><h3>Users by wasted GPU-hours</h3>${peopleTable(fleet.by_user, "user", f)}</section>
      <section class="panel grow" data-testid="teams-panel"><h3>Teams by wasted GPU-hours</h3>${peopleTable(fleet.by_team, "team", f)}</section>
    </div>`;
}

function jobsSection(jobs: JobsResponse): string {
  if (jobs.jobs.length === 0) return `<p class="muted">No jobs in this range.</p>`;
  const rows = jobs.jobs
    .map((j) => {
      const ofu = j.steady_state_ofu ?? j.ofu;
      const alerts = j.open_alerts === null ? "–" : j.open_alerts ? `<span class="badge warn">${j.open_alerts}</span>` : "0";
      return `<tr data-testid="job-row" data-job="${esc(j.job_id)}">
        <td><a href="${jobHref(j.cluster, j.job_id)}">${esc(j.job_id)}</a></td>
        <td>${esc(j.cluster)}</td><td>${esc(j.name)}</td><td>${esc(words(j.state))}</td>
        <td class="num">${j.gpu_count}</td><td>${esc(j.gpu_model)}</td>
        <td class="num">${pct(ofu)}</td><td class="num">${pct(j.latest_ofu)}</td>
        <td class="num">${hours(j.gpu_hours)}</td><td class="num">${hours(j.wasted_gpu_hours)}</td>
        <td class="num">${alerts}</td><td class="small">${esc(dateTime(j.start_ms))}</td></tr>`;
    })
    .join("");
  return `<table class="data" data-testid="jobs"><thead><tr><th>job</th><th>cluster</th><th>name</th><th>state</th>
    <th class="num">GPUs</th><th>GPU model</th><th class="num">OFU</th><th class="num">latest OFU</th>
    <th class="num">GPU-hours</th><th class="num">wasted GPU-h</th><th class="num">open alerts</th><th>start (UTC)</th></tr></thead>
    <tbody>${rows}</tbody></table>${jobs.ofu.available ? "" : unavailable(jobs.ofu, "Job OFU")}`;
}

function alertsSection(alerts: Alerts): string {
  if (!alerts.available) return unavailable(alerts, "Alerts");
  return alertList(alerts.items, true);
}

export async function renderFleetPage(root: HTMLElement, signal: AbortSignal): Promise<void> {
  const begin = latestOnly(signal);
  const render = async () => {
    const current = begin();
    const f = filtersFromHash(location.hash);
    const params = filterParams(f);
    const [fleet, jobs, alerts] = await Promise.all([
      fetchFleet(params, signal),
      fetchJobs(params, signal),
      fetchAlerts(params, signal),
    ]);
    if (!current()) return;
    const custom = f.from_ms !== null;
    const ranges = RANGES.map(
      ([label, h]) =>
        `<a data-range="${h}" class="button${!custom && h === f.range_h ? " active" : ""}"
          href="${esc(filtersToHash({ ...f, range_h: h, from_ms: null, to_ms: null }))}">${esc(label)}</a>`,
    ).join("");
    const active = TEXT_FILTERS.filter((k) => f[k]).map((k) => `${FILTER_LABELS[k]} ${f[k]}`);
    root.innerHTML = `
      <div class="page-head"><h2>Fleet</h2><div class="ranges">${ranges}</div></div>
      ${filterForm(f)}
      <p class="muted small" data-testid="active-filters">${esc(active.length ? `Only ${active.join(", ")}` : "All jobs")},
        ${esc(dateTime(fleet.start_ms))} – ${esc(dateTime(fleet.end_ms))} UTC</p>
      <div data-testid="fleet">${fleetSection(fleet, f)}</div>
      <section class="panel" data-testid="alerts-panel"><h3>Alerts</h3>
        <p class="muted small">Open at some time in this range; resolved ones faded.</p>${alertsSection(alerts)}</section>
      <section class="panel"><h3>Jobs</h3>${jobsSection(jobs)}</section>`;
    const form = root.querySelector<HTMLFormElement>("form[data-testid=filters]");
    form?.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const next: FleetFilters = { ...f };
      for (const key of TEXT_FILTERS) next[key] = String(data.get(key) ?? "").trim();
      const from = utcInputToMs(String(data.get("from") ?? ""));
      const to = utcInputToMs(String(data.get("to") ?? ""));
      [next.from_ms, next.to_ms] = from !== null && to !== null && to > from ? [from, to] : [null, null];
      location.hash = filtersToHash(next);
    });
  };
  await render();
  if (signal.aborted) return;
  // Live updates re-render the page, but not under a person editing the filters.
  const editing = () => document.activeElement?.closest("form[data-testid=filters]") != null;
  const refresh = debounce(() => {
    if (!editing()) void render().catch(() => undefined);
  }, 1000);
  openLive("", () => refresh());
}
