// A job page: OFU against the framework's MFU over time (job aggregate with its confidence
// band, then per GPU), the largest change of level, the divergence verdict and the alerts.
import { fetchJob, type JobDetail, type JobReport, type Reconciliation, type ReportFault, type ReportPolicyAction, type ReportTransient } from "../api";
import { largestLevelShift } from "../analysis";
import { renderChart, type Marker, type Series } from "../chart";
import { dateTime, duration, esc, hours, pct, times, words } from "../format";
import { debounce, latestOnly, openLive } from "../live";
import { alertList, unavailable } from "./common";

function card(label: string, value: string, note = "", testid = ""): string {
  return `<div class="card"${testid ? ` data-testid="${testid}"` : ""}><div class="card-label">${esc(label)}</div>
    <div class="card-value">${esc(value)}</div><div class="muted small">${esc(note)}</div></div>`;
}

function header(d: JobDetail): string {
  const j = d.job;
  const span = j.start_ms ? `${dateTime(j.start_ms)} – ${j.end_ms ? dateTime(j.end_ms) : "now"} UTC` : "";
  return `<div class="page-head"><h2 data-testid="job-title">${esc(j.cluster)} / ${esc(j.job_id)}</h2>
    <span class="badge">${esc(words(j.state))}</span>
    <span class="badge" data-testid="job-kind" title="${esc(j.workload_kind_source ? `workload kind (${j.workload_kind_source})` : "no workload kind: read as training")}">${esc(words(j.workload_kind || "training?"))}</span></div>
    <p class="muted">${esc(j.name)} · ${j.gpu_count} × ${esc(j.gpu_model || "GPU")} · ${esc(j.user)}${j.team ? ` (${esc(j.team)})` : ""}
    · ${esc(words(j.scheduler))} · ${esc(span)}${j.workload_fingerprint ? ` · workload <code>${esc(j.workload_fingerprint)}</code>` : ""}</p>`;
}

function summaryCards(d: JobDetail): string {
  const s = d.summary;
  if (!s.available) return unavailable(s, "Job OFU summary");
  const wasted = s.gpu_hours !== undefined && s.effective_gpu_hours !== undefined ? s.gpu_hours - s.effective_gpu_hours : null;
  return `<div class="cards">
    ${card("Job OFU", pct(s.ofu), `95% CI ${pct(s.ofu_ci95_low)} – ${pct(s.ofu_ci95_high)}`, "job-ofu")}
    ${card("Steady-state OFU", pct(s.steady_state_ofu ?? null), "after warm-up")}
    ${card("GPU-hours", hours(s.gpu_hours), `${hours(s.effective_gpu_hours)} effective`)}
    ${card("Wasted GPU-hours", hours(wasted), `${hours(s.idle_gpu_hours)} idle`)}
    ${card("GPU coverage", pct(s.gpu_coverage, 0), `${(s.sample_count ?? 0).toLocaleString("en-US")} samples`)}
    ${card("Roofline", words(s.roofline_class).replace(" bound", "") || "–", s.roofline_class ? "bound (majority of samples)" : "")}
  </div>`;
}

function levelShiftPanel(d: JobDetail): { html: string; marker: Marker | null } {
  if (!d.ofu.available) return { html: "", marker: null };
  const steady = d.ofu.windows.filter((w) => !w.warmup);
  const shift = largestLevelShift(steady);
  if (!shift) {
    return {
      html: `<div class="notice ok" data-testid="level-shift" data-found="false">No sustained change of OFU level in this job.</div>`,
      marker: null,
    };
  }
  const kind = shift.factor > 1 ? "drop" : "rise";
  const factor = shift.factor > 1 ? shift.factor : 1 / shift.factor;
  return {
    html: `<div class="notice ${kind === "drop" ? "bad" : "ok"}" data-testid="level-shift" data-found="true"
        data-before="${shift.before}" data-after="${shift.after}">
      OFU ${kind} at ${esc(dateTime(shift.at_ms))} UTC: before <b data-testid="ofu-before">${pct(shift.before)}</b>,
      after <b data-testid="ofu-after">${pct(shift.after)}</b> (${times(factor)})
      <div class="muted small">Median OFU of the windows on either side of the largest sustained change in the chart below.</div></div>`,
    marker: { at_ms: shift.at_ms, label: `${kind} ${times(factor)}`, className: kind },
  };
}

function verdictPanel(r: Reconciliation): string {
  if (!r.available) return unavailable(r, "MFU reconciliation");
  const v = r.verdict;
  if (!v) return `<p class="muted">No verdict yet.</p>`;
  // Causes that explain next to nothing are left out.
  const causes = v.causes
    .filter((c) => c.fit_score >= 0.05)
    .map((c) => `<li><b>${esc(words(c.cause))}</b> (fit ${pct(c.fit_score, 0)}): ${esc(c.explanation)}</li>`)
    .join("");
  return `<div data-testid="verdict" data-verdict="${esc(v.verdict)}">
    <div class="verdict v-${esc(v.verdict.toLowerCase())}">${esc(words(v.verdict))}</div>
    <p>App MFU ${pct(v.app_mfu_mean)} vs OFU ${pct(v.ofu_mean)}: ratio ${times(v.ratio)}
      (95% CI ${times(v.ratio_ci95_low)} – ${times(v.ratio_ci95_high)}), confidence ${pct(v.confidence, 0)},
      ${v.windows_used} windows.</p>
    <p>${esc(v.reason)}</p>${causes ? `<ol class="causes">${causes}</ol>` : ""}
    ${r.framework ? `<p class="muted small">Reported by ${esc([r.framework, r.framework_version].filter(Boolean).join(" "))}${r.flops_formula ? `, FLOPs formula: ${esc(r.flops_formula)}` : ""}</p>` : ""}
  </div>`;
}

// One GPU fault of the report: time, GPU, code and meaning, whose fault, the action.
function faultItem(f: ReportFault): string {
  const gpu = `${f.gpu?.host ?? "?"}/${f.gpu?.gpu_index ?? f.gpu?.uuid ?? "?"}`;
  const isXid = f.signal === "FAULT_SIGNAL_XID" || f.signal === "FAULT_SIGNAL_XID_COUNT";
  const what = isXid
    ? `XID ${f.xid ?? "?"}${f.xid_meaning ? ` ${f.xid_meaning}` : ""}`
    : `${f.signal_description ?? words(f.signal ?? "")}${f.count && f.count !== 1 ? ` +${f.count}` : ""}`;
  return `<li data-testid="report-fault">${esc(f.time ?? "")} · GPU ${esc(gpu)} · ${esc(what)}${
    f.blame ? ` <span class="badge">${esc(f.blame)}</span>` : ""
  }${f.recommended_action ? `<div class="muted small">${esc(f.recommended_action)}</div>` : ""}</li>`;
}

// One policy action in the report: what was (or, dry-run, would have been) done, by which
// rule, with the command and its outcome, and its undoing.
function policyItem(a: ReportPolicyAction): string {
  const what = `${words(a.action ?? "")}${a.node ? ` node ${a.node}` : ""}`;
  return `<li data-testid="report-policy-action">${esc(words(a.status ?? ""))} · ${esc(what)} · rule ${esc(
    a.rule ?? "",
  )} on ${esc(words(a.kind ?? ""))}${a.dry_run ? ` <span class="badge">dry run</span>` : ""}${
    a.undone_time ? ` <span class="badge">undone${a.undone_by ? ` by ${esc(a.undone_by)}` : ""}</span>` : ""
  }${a.command ? `<div class="muted small"><code>${esc(a.command)}</code></div>` : ""}${
    a.outcome || a.note ? `<div class="muted small">${esc(a.outcome || a.note || "")}</div>` : ""
  }</li>`;
}

// One transient slowdown: when, how long, how deep and what it cost; never paged.
function transientItem(t: ReportTransient): string {
  const onset = t.onset_time ? dateTime(Date.parse(t.onset_time)) : "–";
  return `<li data-testid="report-transient">${esc(onset)} UTC · ${duration(Number(t.duration_s ?? 0))} · OFU ${pct(
    t.before_ofu ?? 0,
  )} → ${pct(t.during_ofu ?? 0)} (${times(t.factor ?? 0)} slower) · ${hours(t.lost_gpu_hours ?? 0)} GPU-hours lost</li>`;
}

// The job-end report: the same text `goodputctl report` prints and Slurm's AdminComment
// decodes to, then the alerts it lists (those found after the job ended marked, with the GPU
// fault named as their likely cause), the GPU faults the job met and caveats.
function reportPanel(r: JobReport | undefined): string {
  if (!r) return "";
  if (!r.available) {
    return `<section class="panel" data-testid="report-panel"><h3>Job-end report</h3>
      <p class="muted" data-testid="report-missing">${esc(r.message ?? "No report yet.")}</p></section>`;
  }
  const rep = r.report ?? {};
  const alerts = (rep.alerts ?? [])
    .map(
      (a) => `<li data-testid="report-alert">${esc(words(a.severity))} · ${esc(words(a.kind))}: ${esc(a.summary)}${
        a.after_job_end ? ` <span class="badge warn">found after the job ended</span>` : ""
      }${a.likely_cause ? `<div class="muted small" data-testid="likely-cause">Likely cause: ${esc(a.likely_cause)}</div>` : ""}</li>`,
    )
    .join("");
  const caveats = (rep.caveats ?? []).map((c) => `<li>${esc(c)}</li>`).join("");
  const faults = (rep.faults ?? []).map(faultItem).join("");
  const actions = (rep.policy_actions ?? []).map(policyItem).join("");
  const transients = (rep.transient_slowdowns ?? []).map(transientItem).join("");
  const note = rep.reconciliation?.reason ?? rep.reconciliation_note ?? "";
  return `<section class="panel" data-testid="report-panel"><h3>Job-end report</h3>
    <p class="muted small">${rep.final ? "Final" : "Provisional (windows still open)"} · revision ${rep.summary?.revision ?? 0}
      · Slurm AdminComment: ${esc(rep.admin_comment_status ?? "–")}</p>
    <pre class="report" data-testid="report-text">${esc(r.text ?? "")}</pre>
    ${note ? `<p><b>MFU reconciliation:</b> ${esc(note)}</p>` : ""}
    ${rep.failure_cause ? `<p data-testid="failure-cause"><b>Likely cause of the failure:</b> ${esc(rep.failure_cause)}</p>` : ""}
    ${alerts ? `<h4>Alerts</h4><ul class="facts">${alerts}</ul>` : ""}
    ${faults ? `<h4>GPU faults</h4><ul class="facts" data-testid="report-faults">${faults}</ul>` : ""}
    ${transients ? `<h4>Transient slowdowns (recovered before they were confirmed; not paged)</h4><ul class="facts" data-testid="report-transients">${transients}</ul>` : ""}
    ${actions ? `<h4>Policy actions</h4><ul class="facts" data-testid="report-policy-actions">${actions}</ul>` : ""}
    ${caveats ? `<h4>Caveats</h4><ul class="facts">${caveats}</ul>` : ""}</section>`;
}

function characterization(d: JobDetail): string {
  const s = d.summary;
  if (!s.available) return "";
  const items: string[] = [];
  if (s.stragglers?.length) {
    items.push(`Stragglers: ${s.stragglers.map((g) => `${esc(g.gpu)} (${pct(g.ofu)}, ${times(g.score)} of median)`).join(", ")}`);
  }
  if (s.idle_gpus?.length) items.push(`Idle GPUs: ${s.idle_gpus.map(esc).join(", ")}`);
  if (s.flags?.length) items.push(`Data quality: ${s.flags.map((f) => esc(words(f))).join(", ")}`);
  return items.length ? `<ul class="facts">${items.map((i) => `<li>${i}</li>`).join("")}</ul>` : "";
}

function charts(d: JobDetail, extraMarkers: Marker[]): string {
  if (!d.ofu.available) return unavailable(d.ofu, "OFU");
  const w = d.ofu.windows;
  const mid = (a: number, b: number) => (a + b) / 2;
  const series: Series[] = [
    {
      name: "OFU (job)",
      className: "ofu",
      points: w.map((p) => [mid(p.start_ms, p.end_ms), p.ofu]),
      band: w.map((p) => [p.ofu_ci95_low, p.ofu_ci95_high]),
    },
  ];
  const rec = d.reconciliation;
  if (rec.available && rec.points.some((p) => p.app_mfu !== null)) {
    series.push({
      name: "app MFU",
      className: "mfu",
      points: rec.points.map((p) => [mid(p.start_ms, p.end_ms), p.app_mfu]),
    });
  }
  const markers = [...extraMarkers];
  for (const a of d.alerts.available ? d.alerts.items : []) {
    if (a.onset_ms !== null) markers.push({ at_ms: a.onset_ms, label: words(a.kind), className: "alert" });
  }
  const gpuSeries: Series[] = d.ofu.gpus.map((g, i) => ({
    name: g.gpu,
    className: `gpu g${i % 8}`,
    points: g.points.map((p) => [mid(p.start_ms, p.end_ms), p.ofu]),
  }));
  const legend = `<div class="legend"><span class="key ofu"></span>OFU (job, 95% CI band)
    ${series.length > 1 ? `<span class="key mfu"></span>app MFU` : `<span class="muted small">no MFU reports${rec.available ? "" : " (reconciliation not available)"}</span>`}
    <span class="muted small">window ${duration(d.ofu.effective_window_s)}</span></div>`;
  return `<section class="panel" data-testid="ofu-chart"><h3>OFU vs MFU</h3>${legend}
      ${renderChart(series, markers, { title: "OFU and MFU over time" })}</section>
    <section class="panel" data-testid="gpu-chart"><h3>OFU per GPU</h3>
      <p class="muted small">${d.ofu.gpus.length} GPUs</p>
      ${renderChart(gpuSeries, markers, { title: "OFU per GPU over time", height: 220 })}</section>`;
}

export async function renderJobPage(
  root: HTMLElement,
  cluster: string,
  jobId: string,
  signal: AbortSignal,
): Promise<void> {
  const begin = latestOnly(signal);
  const render = async () => {
    const current = begin();
    const d = await fetchJob(cluster, jobId, signal);
    if (!current()) return;
    const shift = levelShiftPanel(d);
    root.innerHTML = `
      <p><a href="#/">← Fleet</a></p>
      ${header(d)}
      ${summaryCards(d)}
      ${reportPanel(d.report)}
      ${shift.html}
      ${charts(d, shift.marker ? [shift.marker] : [])}
      <div class="row">
        <section class="panel grow" data-testid="verdict-panel"><h3>MFU vs OFU verdict</h3>${verdictPanel(d.reconciliation)}</section>
        <section class="panel grow" data-testid="alerts-panel"><h3>Alerts</h3>
          ${d.alerts.available ? alertList(d.alerts.items, false) : unavailable(d.alerts, "Alerts")}</section>
      </div>
      ${characterization(d)}`;
  };
  await render();
  if (signal.aborted) return;
  const refresh = debounce(() => void render().catch(() => undefined), 1000);
  openLive(`cluster=${encodeURIComponent(cluster)}&job=${encodeURIComponent(jobId)}`, () => refresh());
}
