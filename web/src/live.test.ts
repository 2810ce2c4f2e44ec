import { describe, expect, it } from "vitest";
import { latestOnly } from "./live";

describe("latestOnly", () => {
  it("lets only the render that started last write", () => {
    const navigation = new AbortController();
    const begin = latestOnly(navigation.signal);
    const first = begin();
    const second = begin();
    expect(first()).toBe(false); // finished after a later render started: dropped
    expect(second()).toBe(true);
  });

  it("lets nothing write once the page's navigation is aborted", () => {
    const navigation = new AbortController();
    const begin = latestOnly(navigation.signal);
    const pending = begin();
    navigation.abort();
    expect(pending()).toBe(false);
    expect(begin()()).toBe(false);
  });
});
