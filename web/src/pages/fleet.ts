// The fleet page: GPU-hours and how well they were used, by cluster and GPU model, the OFU
// distribution, open alerts and the jobs.
import { fetchAlerts, fetchFleet, fetchJobs, type Alerts, type Fleet, type FleetGroup, type JobsResponse } from "../api";
import { renderBars } from "../chart";
import { dateTime, esc, hours, pct, words } from "../format";
import { debounce, openLive } from "../live";
import { alertList, jobHref, unavailable } from "./common";

const RANGES: [string, number][] = [
  ["6 h", 6],
  ["24 h", 24],
  ["7 days", 168],
  ["30 days", 720],
];
let rangeHours = 24;

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

function fleetSection(fleet: Fleet): string {
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

export async function renderFleetPage(root: HTMLElement): Promise<void> {
  const render = async () => {
    const [fleet, jobs, alerts] = await Promise.all([fetchFleet(rangeHours), fetchJobs(rangeHours), fetchAlerts(rangeHours)]);
    const ranges = RANGES.map(
      ([label, h]) => `<button data-range="${h}" class="${h === rangeHours ? "active" : ""}">${esc(label)}</button>`,
    ).join("");
    root.innerHTML = `
      <div class="page-head"><h2>Fleet</h2><div class="ranges">${ranges}</div></div>
      <div data-testid="fleet">${fleetSection(fleet)}</div>
      <section class="panel" data-testid="alerts-panel"><h3>Alerts</h3>
        <p class="muted small">Open at some time in this range; resolved ones faded.</p>${alertsSection(alerts)}</section>
      <section class="panel"><h3>Jobs</h3>${jobsSection(jobs)}</section>`;
    root.querySelectorAll<HTMLButtonElement>("button[data-range]").forEach((b) =>
      b.addEventListener("click", () => {
        rangeHours = Number(b.dataset.range);
        void render();
      }),
    );
  };
  await render();
  const refresh = debounce(() => void render().catch(() => undefined), 1000);
  openLive("", () => refresh());
}
