// Vite builds the dashboard into static files that goodput-dashboard serves
// (GOODPUT_WEB_OUT_DIR, default dist/). `npm run dev` serves it with hot reload and proxies
// the JSON API to a running gateway (GOODPUT_DASHBOARD_URL, default http://127.0.0.1:7300).
import { defineConfig } from "vitest/config";

const gateway = process.env.GOODPUT_DASHBOARD_URL ?? "http://127.0.0.1:7300";

export default defineConfig({
  base: "./",
  build: {
    outDir: process.env.GOODPUT_WEB_OUT_DIR ?? "dist",
    emptyOutDir: true,
    target: "es2022",
  },
  server: { proxy: { "/api": gateway } },
  test: { environment: "node", include: ["src/**/*.test.ts"] },
});
