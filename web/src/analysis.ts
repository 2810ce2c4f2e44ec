// What the job page reads off the OFU series by itself, so that a drop is visible even
// where no alert explains it: the largest sustained change of level. The platform's
// detectors (goodput-alerting) remain the authority; this only describes the chart.

export interface LevelShift {
  // Index of the first window after the change.
  index: number;
  // Time of that window, Unix ms.
  at_ms: number;
  // Median OFU before and after, fractions.
  before: number;
  after: number;
  // before / after (> 1 for a drop).
  factor: number;
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// The single change point of `points` (time order) that best splits the series into two
// levels: the split minimising the sum of absolute deviations from each side's median (a
// robust segmentation: short dips such as checkpoints barely move it). Each side holds at
// least `minSide` points and a tenth of the series. Null when the series is too short or
// the two levels differ by less than `minFactor` (either direction).
export function largestLevelShift(
  points: { start_ms: number; ofu: number }[],
  minFactor = 1.3,
  minSide = 5,
): LevelShift | null {
  const n = points.length;
  const side = Math.max(minSide, Math.ceil(n / 10));
  if (n < 2 * side) return null;
  const values = points.map((p) => p.ofu);
  const deviation = (xs: number[], m: number) => xs.reduce((sum, x) => sum + Math.abs(x - m), 0);
  let best: LevelShift | null = null;
  let bestCost = Infinity;
  for (let k = side; k <= n - side; k++) {
    const left = values.slice(0, k);
    const right = values.slice(k);
    const before = median(left);
    const after = median(right);
    const cost = deviation(left, before) + deviation(right, after);
    if (cost < bestCost) {
      bestCost = cost;
      best = { index: k, at_ms: points[k].start_ms, before, after, factor: before / after };
    }
  }
  if (best === null) return null;
  // A level of zero (the job stopped computing) is the largest drop of all: floor it at
  // 0.1% OFU so that the factor stays finite.
  const floor = 0.001;
  best.factor = Math.max(best.before, floor) / Math.max(best.after, floor);
  const ratio = Math.max(best.factor, 1 / best.factor);
  if (Math.max(best.before, best.after) < 0.01 || ratio < minFactor) return null;
  return best;
}
