import { describe, expect, it } from "vitest";
import { defaultFilters, filterParams, filtersFromHash, filtersToHash, msToUtcInput, utcInputToMs } from "./filters";

describe("fleet filters", () => {
  it("round-trip through the shareable hash", () => {
    const f = { ...defaultFilters(), cluster: "eos", user: "alice b", team: "vision&co", gpu_model: "NVIDIA H100 80GB HBM3" };
    expect(filtersFromHash(filtersToHash(f))).toEqual(f);
    const custom = { ...defaultFilters(), user: "bob", from_ms: 1_767_225_600_000, to_ms: 1_767_312_000_000 };
    expect(filtersFromHash(filtersToHash(custom))).toEqual(custom);
  });
  it("ignore malformed parameters", () => {
    expect(filtersFromHash("#/")).toEqual(defaultFilters());
    expect(filtersFromHash("#/?range_h=-3&from_ms=10&to_ms=5")).toEqual(defaultFilters());
    expect(filtersFromHash("#/?range_h=168").range_h).toBe(168);
  });
  it("send a custom range instead of range_h", () => {
    const p = filterParams({ ...defaultFilters(), from_ms: 1000, to_ms: 2000 });
    expect(p.get("from_ms")).toBe("1000");
    expect(p.has("range_h")).toBe(false);
  });
  it("read datetime-local inputs as UTC", () => {
    expect(utcInputToMs("2026-01-01T00:00")).toBe(1_767_225_600_000);
    expect(utcInputToMs("yesterday")).toBeNull();
    expect(msToUtcInput(1_767_225_600_000)).toBe("2026-01-01T00:00");
  });
});
