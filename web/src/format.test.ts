import { describe, expect, it } from "vitest";
import { dateTime, duration, esc, hours, pct, times, words } from "./format";

describe("format", () => {
  it("shows fractions as percent and missing values as a dash", () => {
    expect(pct(0.4512)).toBe("45.1%");
    expect(pct(1)).toBe("100.0%");
    expect(pct(null)).toBe("–");
    expect(pct(Number.NaN)).toBe("–");
  });
  it("sizes GPU-hours to their magnitude", () => {
    expect(hours(0.421)).toBe("0.42");
    expect(hours(12.34)).toBe("12.3");
    expect(hours(1234.4)).toBe("1,234");
  });
  it("escapes markup in names that come from schedulers and users", () => {
    expect(esc(`<img src=x onerror="alert(1)">&'`)).toBe("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;");
  });
  it("writes times in UTC", () => {
    expect(dateTime(Date.UTC(2026, 10, 23, 14, 2, 59))).toBe("2026-11-23 14:02");
    expect(duration(3900)).toBe("1h 05m");
    expect(duration(60)).toBe("1m");
    expect(times(2.5)).toBe("2.50×");
    expect(words("app_flops_overcount")).toBe("app flops overcount");
  });
});
