import { describe, expect, it } from "vitest";
import { niceMax, renderBars, renderChart } from "./chart";

describe("renderChart", () => {
  it("draws one path per series, breaking lines at missing values", () => {
    const svg = renderChart(
      [
        { name: "OFU", className: "ofu", points: [[0, 0.4], [60_000, 0.5], [120_000, null], [180_000, 0.3]] },
        { name: "MFU", className: "mfu", points: [[0, 0.38], [180_000, 0.29]] },
      ],
      [{ at_ms: 60_000, label: "drop", className: "drop" }],
    );
    expect(svg.match(/class="line /g)).toHaveLength(2);
    // The OFU path restarts after the gap: two M commands.
    const ofu = /class="line ofu" d="([^"]+)"/.exec(svg)![1];
    expect(ofu.match(/M/g)).toHaveLength(2);
    expect(svg).toContain('class="marker drop"');
    expect(svg).toContain(">50%<");
  });
  it("says so when there is nothing to draw", () => {
    expect(renderChart([], [])).toContain("No data yet");
  });
  it("escapes series names", () => {
    expect(renderChart([{ name: "<gpu>", className: "gpu", points: [[0, 0.1]] }], [])).toContain("&lt;gpu&gt;");
  });
  it("rounds the axis up to a readable bound", () => {
    expect(niceMax(0.43)).toBe(0.5);
    expect(niceMax(0.07)).toBe(0.1);
    expect(niceMax(0)).toBe(1);
  });
  it("draws one bar per decile", () => {
    expect(renderBars([1, 2, 3], ["0%", "10%", "20%"]).match(/<rect /g)).toHaveLength(3);
  });
});

describe("markers", () => {
  it("stacks the labels of markers at the same time", () => {
    const svg = renderChart(
      [{ name: "OFU", className: "ofu", points: [[0, 0.4], [600_000, 0.2]] }],
      [
        { at_ms: 300_000, label: "drop", className: "drop" },
        { at_ms: 300_000, label: "regression in job", className: "alert" },
      ],
    );
    const ys = [...svg.matchAll(/class="marker-label[^"]*" x="[^"]+" y="([^"]+)"/g)].map((m) => Number(m[1]));
    expect(ys).toHaveLength(2);
    expect(ys[0]).not.toBe(ys[1]);
  });
});
