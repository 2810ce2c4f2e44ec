import { describe, expect, it } from "vitest";
import { largestLevelShift, median } from "./analysis";

const minute = 60_000;
function series(values: number[]) {
  return values.map((ofu, i) => ({ start_ms: i * minute, ofu }));
}

describe("largestLevelShift", () => {
  it("finds a sustained 2.5x drop and where it starts", () => {
    const values = [...Array(30).fill(0.45), ...Array(20).fill(0.18)];
    const shift = largestLevelShift(series(values));
    expect(shift).not.toBeNull();
    expect(shift!.index).toBe(30);
    expect(shift!.before).toBeCloseTo(0.45);
    expect(shift!.after).toBeCloseTo(0.18);
    expect(shift!.factor).toBeCloseTo(2.5);
  });
  it("ignores short checkpoint dips in a steady job", () => {
    const values = Array.from({ length: 60 }, (_, i) => (i % 20 === 10 || i % 20 === 11 ? 0.01 : 0.4 + 0.01 * Math.sin(i)));
    expect(largestLevelShift(series(values))).toBeNull();
  });
  it("needs enough windows on both sides", () => {
    expect(largestLevelShift(series([0.5, 0.5, 0.5, 0.1, 0.1]))).toBeNull();
  });
  it("takes medians", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
  });
});
