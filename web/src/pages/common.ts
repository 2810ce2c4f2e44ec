// Pieces shared by the pages: the "not available" notice and the alert list.
import type { Alert, Section } from "../api";
import { dateTime, esc, pct, times, words } from "../format";

// The notice shown in place of a panel whose service cannot answer.
export function unavailable(section: Section, what: string): string {
  const headline = section.not_built ? `${what}: not available yet` : `${what}: unavailable`;
  return (
    `<div class="notice" data-testid="unavailable">${esc(headline)}` +
    `<div class="muted small">${esc(section.message ?? "")}</div></div>`
  );
}

export function jobHref(cluster: string, jobId: string): string {
  return `#/job/${encodeURIComponent(cluster)}/${encodeURIComponent(jobId)}`;
}

function evidence(alert: Alert): string {
  const parts: string[] = [];
  if (alert.before_ofu !== null && alert.after_ofu !== null) {
    parts.push(`OFU ${pct(alert.before_ofu)} → ${pct(alert.after_ofu)}`);
  } else if (alert.baseline_ofu !== null && alert.after_ofu !== null) {
    parts.push(`baseline ${pct(alert.baseline_ofu)} → ${pct(alert.after_ofu)}`);
  }
  if (alert.factor !== null) parts.push(`${times(alert.factor)} drop`);
  if (alert.onset_ms !== null) parts.push(`from ${dateTime(alert.onset_ms)}`);
  if (alert.confidence !== null) parts.push(`confidence ${pct(alert.confidence, 0)}`);
  return parts.join(" · ");
}

export function alertList(alerts: Alert[], withJob: boolean): string {
  if (alerts.length === 0) return `<p class="muted" data-testid="no-alerts">No alerts.</p>`;
  const rows = alerts.map(
    (a) => `<li class="alert sev-${esc(a.severity.toLowerCase())} state-${esc(a.state.toLowerCase())}"
        data-testid="alert" data-kind="${esc(a.kind)}">
      <div class="alert-head">
        <span class="badge">${esc(words(a.severity))}</span>
        <span class="badge state">${esc(words(a.state))}</span>
        <span class="kind">${esc(words(a.kind))}</span>
        ${!withJob ? "" : a.job_id ? `<a href="${jobHref(a.cluster, a.job_id)}">${esc(a.cluster)}/${esc(a.job_id)}</a>`
          : `<span class="badge" data-testid="platform-alert">goodput itself</span>`}
        <span class="muted small">since ${esc(dateTime(a.start_ms))}</span>
        ${a.found_after_job_end ? `<span class="badge" data-testid="found-after-end">found after the job ended</span>` : ""}
      </div>
      <div class="alert-summary">${esc(a.summary)}</div>
      ${a.likely_cause ? `<div class="small" data-testid="alert-likely-cause">Likely cause: ${esc(a.likely_cause)}</div>` : ""}
      <div class="muted small">${esc(evidence(a))}${a.deliveries ? ` · notified ${a.delivered}/${a.deliveries}` : ""}</div>
    </li>`,
  );
  return `<ul class="alerts">${rows.join("")}</ul>`;
}
