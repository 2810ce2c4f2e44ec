// The gateway's JSON API (goodput-dashboard, tools/dashboard): shapes and fetchers.
// Utilizations are fractions in [0, 1]; times are Unix milliseconds; a section whose service
// cannot answer yet carries `available: false` and the service's message.

export interface Section {
  available: boolean;
  // Why the section is empty: the RPC is not built yet, the service is down, ...
  message?: string;
  // True when the service answered UNIMPLEMENTED (the feature is not built yet).
  not_built?: boolean;
}

export interface FleetGroup {
  cluster: string;
  gpu_model: string;
  user: string;
  team: string;
  job_count: number;
  gpu_hours: number;
  effective_gpu_hours: number;
  wasted_gpu_hours: number;
  ofu_mean: number;
  idle_gpu_hours: number;
  low_efficiency_gpu_hours: number;
  gpu_hours_by_ofu_decile: number[];
}

export interface Fleet extends Section {
  start_ms: number;
  end_ms: number;
  low_efficiency_ofu_threshold: number;
  total?: FleetGroup;
  by_cluster: FleetGroup[];
  by_gpu_model: FleetGroup[];
  // Ranked by wasted GPU-hours, most first.
  by_user: FleetGroup[];
  by_team: FleetGroup[];
}

export interface JobRow {
  cluster: string;
  job_id: string;
  name: string;
  user: string;
  team: string;
  scheduler: string;
  state: string;
  gpu_model: string;
  gpu_count: number;
  workload_fingerprint: string;
  workload_kind: string;
  workload_kind_source: string;
  start_ms: number | null;
  end_ms: number | null;
  ofu: number | null;
  steady_state_ofu: number | null;
  latest_ofu: number | null;
  gpu_hours: number | null;
  wasted_gpu_hours: number | null;
  open_alerts: number | null;
}

export interface JobsResponse {
  jobs: JobRow[];
  next_page_token: string;
  ofu: Section;
  alerts: Section;
}

export interface OfuPoint {
  start_ms: number;
  end_ms: number;
  ofu: number;
  ofu_ci95_low: number;
  ofu_ci95_high: number;
  gpu_coverage: number;
  gpus_reporting: number;
  gpus_allocated: number;
  warmup: boolean;
}

export interface GpuSeries {
  gpu: string;
  points: { start_ms: number; end_ms: number; ofu: number }[];
}

export interface JobOfu extends Section {
  effective_window_s: number;
  windows: OfuPoint[];
  gpus: GpuSeries[];
}

export interface JobSummary extends Section {
  ofu?: number;
  ofu_ci95_low?: number;
  ofu_ci95_high?: number;
  steady_state_ofu?: number | null;
  gpu_hours?: number;
  effective_gpu_hours?: number;
  idle_gpu_hours?: number;
  gpu_coverage?: number;
  sample_count?: number;
  roofline_class?: string;
  stragglers?: { gpu: string; ofu: number; score: number }[];
  idle_gpus?: string[];
  flags?: string[];
  finalized?: boolean;
}

export interface Cause {
  cause: string;
  explanation: string;
  fit_score: number;
}

export interface Verdict {
  verdict: string;
  ratio: number;
  ratio_ci95_low: number;
  ratio_ci95_high: number;
  correction_factor: number;
  confidence: number;
  app_mfu_mean: number;
  ofu_mean: number;
  windows_used: number;
  reason: string;
  causes: Cause[];
}

export interface MfuPoint {
  start_ms: number;
  end_ms: number;
  app_mfu: number | null;
  ofu: number | null;
  difference_pp: number | null;
}

export interface Reconciliation extends Section {
  verdict?: Verdict;
  points: MfuPoint[];
  framework?: string;
  framework_version?: string;
  flops_formula?: string;
}

export interface Alert {
  alert_id: string;
  kind: string;
  state: string;
  severity: string;
  cluster: string;
  job_id: string;
  summary: string;
  description: string;
  start_ms: number | null;
  end_ms: number | null;
  update_ms: number | null;
  detector: string;
  confidence: number | null;
  onset_ms: number | null;
  condition_end_ms: number | null;
  found_after_job_end: boolean;
  before_ofu: number | null;
  after_ofu: number | null;
  factor: number | null;
  baseline_ofu: number | null;
  // The GPU fault named as the finding's likely cause ("" when none coincides), and how many
  // fault events the alert carries as evidence.
  likely_cause?: string;
  gpu_faults?: number;
  deliveries: number;
  delivered: number;
}

export interface Alerts extends Section {
  items: Alert[];
}

// A job-end report (goodput.v1.JobReport as protobuf JSON, proto field names; only what the
// page shows is typed) and its summary as text, as `goodputctl report` prints it.
export interface JobReport extends Section {
  text?: string;
  report?: {
    final?: boolean;
    summary?: { revision?: number };
    advice?: { kind: string; text: string }[];
    caveats?: string[];
    alerts?: {
      alert_id: string;
      kind: string;
      severity: string;
      summary: string;
      after_job_end?: boolean;
      likely_cause?: string;
    }[];
    // Every GPU fault the job met (goodput.v1.FaultEvent), and a failure's likely cause.
    faults?: ReportFault[];
    failure_cause?: string;
    // What goodput's policies did (or, in dry-run, would have done) to the job
    // (goodput.v1.PolicyAction).
    policy_actions?: ReportPolicyAction[];
    // Drops that recovered before they were confirmed, never paged (goodput.v1.TransientSlowdown).
    transient_slowdowns?: ReportTransient[];
    reconciliation?: { reason?: string };
    reconciliation_note?: string;
    admin_comment_status?: string;
  };
}

export interface ReportFault {
  time?: string;
  gpu?: { host?: string; gpu_index?: number; uuid?: string };
  signal?: string;
  signal_description?: string;
  xid?: string | number;
  count?: number;
  xid_meaning?: string;
  blame?: string;
  recommended_action?: string;
}

export interface ReportTransient {
  onset_time?: string;
  duration_s?: string | number;
  before_ofu?: number;
  during_ofu?: number;
  factor?: number;
  lost_gpu_hours?: number;
}

export interface ReportPolicyAction {
  action_id?: string;
  rule?: string;
  kind?: string;
  action?: string;
  node?: string;
  dry_run?: boolean;
  status?: string;
  command?: string;
  outcome?: string;
  note?: string;
  acted_time?: string;
  undone_time?: string;
  undone_by?: string;
}

export interface JobDetail {
  job: JobRow;
  summary: JobSummary;
  ofu: JobOfu;
  reconciliation: Reconciliation;
  alerts: Alerts;
  report: JobReport;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

// `signal`: the page's navigation (main.ts); leaving the page cancels its reads.
async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const response = await fetch(path, { headers: { Accept: "application/json" }, signal });
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: string }).error ?? text;
    } catch {
      // not JSON: keep the text
    }
    throw new ApiError(`${path}: ${message || response.statusText}`, response.status);
  }
  return JSON.parse(text) as T;
}

// `params`: the fleet page's filters (filters.ts: filterParams).
export function fetchFleet(params: URLSearchParams, signal?: AbortSignal): Promise<Fleet> {
  return getJson(`api/fleet?${params}`, signal);
}

export function fetchJobs(params: URLSearchParams, signal?: AbortSignal): Promise<JobsResponse> {
  const query = new URLSearchParams(params);
  query.set("limit", "200");
  return getJson(`api/jobs?${query}`, signal);
}

export function fetchAlerts(params: URLSearchParams, signal?: AbortSignal): Promise<Alerts> {
  const query = new URLSearchParams();
  for (const key of ["cluster", "range_h", "from_ms", "to_ms"]) {
    const value = params.get(key);
    if (value !== null) query.set(key, value);
  }
  return getJson(`api/alerts?${query}`, signal);
}

export function jobPath(cluster: string, jobId: string): string {
  return `${encodeURIComponent(cluster)}/${encodeURIComponent(jobId)}`;
}

export function fetchJob(cluster: string, jobId: string, signal?: AbortSignal): Promise<JobDetail> {
  return getJson(`api/jobs/${jobPath(cluster, jobId)}`, signal);
}
