// The browser half of the dashboard's end-to-end test (tests/dashboard_e2e_test.cc starts
// the platform, runs a small simulated fleet with one regressing job, then runs this). It
// drives Debian's Chromium with playwright-core and checks what a person would see: the
// fleet page with its figures and jobs, the regressing job's page showing the OFU drop
// (levels before and after), the verdict panel, the alerts (the regression alert when the
// alerting service lists alerts, "not available yet" while it does not), live updates
// connected, a steady job without a drop and with its job-end report (the regressing job,
// still running, has none yet), and the fleet page filtered by the regressing job's user
// through the filter form, whose shareable link opened in a fresh page shows the same view.
// The cluster and the regressing job's name, user, team, workload and framework hold
// markup: it must show as text, never open a dialog nor become an element, and the page must
// run under the dashboard's Content-Security-Policy without a violation (a violation is a
// console error).
//
// Environment: GOODPUT_DASHBOARD_URL, GOODPUT_E2E_CLUSTER, GOODPUT_E2E_REGRESSED_JOB,
// GOODPUT_E2E_STEADY_JOB, GOODPUT_E2E_REGRESSED_USER, GOODPUT_E2E_MIN_DROP_FACTOR, GOODPUT_E2E_EXPECT_ALERT (1/0),
// GOODPUT_E2E_GPUS (per-GPU series of the regressed job), GOODPUT_WEB_DIR (where
// playwright-core is installed), GOODPUT_CHROMIUM [/usr/bin/chromium],
// GOODPUT_E2E_SCREENSHOTS (a folder for screenshots; optional), GOODPUT_E2E_MARKUP_NAME,
// GOODPUT_E2E_MARKUP_USER, GOODPUT_E2E_MARKUP_TEAM, GOODPUT_E2E_MARKUP_WORKLOAD,
// GOODPUT_E2E_MARKUP_FRAMEWORK (the regressing job's strings with markup).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

function env(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

const url = env("GOODPUT_DASHBOARD_URL").replace(/\/$/, "");
const cluster = env("GOODPUT_E2E_CLUSTER");
const regressed = env("GOODPUT_E2E_REGRESSED_JOB");
const steady = env("GOODPUT_E2E_STEADY_JOB");
const minFactor = Number(env("GOODPUT_E2E_MIN_DROP_FACTOR", "1.5"));
const expectAlert = env("GOODPUT_E2E_EXPECT_ALERT", "0") === "1";
const gpus = Number(env("GOODPUT_E2E_GPUS", "0"));
const regressedUser = env("GOODPUT_E2E_REGRESSED_USER");
const shots = process.env.GOODPUT_E2E_SCREENSHOTS;
const markup = {
  name: env("GOODPUT_E2E_MARKUP_NAME"),
  user: env("GOODPUT_E2E_MARKUP_USER"),
  team: env("GOODPUT_E2E_MARKUP_TEAM"),
  workload: env("GOODPUT_E2E_MARKUP_WORKLOAD"),
  framework: env("GOODPUT_E2E_MARKUP_FRAMEWORK"),
};
const require = createRequire(join(env("GOODPUT_WEB_DIR"), "package.json"));
const { chromium } = require("playwright-core");

const jobHash = (job) => `#/job/${encodeURIComponent(cluster)}/${encodeURIComponent(job)}`;
const step = (text) => console.log(`- ${text}`);

const profile = mkdtempSync(join(tmpdir(), "goodput-e2e-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env("GOODPUT_CHROMIUM", "/usr/bin/chromium"),
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1300, height: 1400 },
});
const errors = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  // alert(), confirm() and prompt() from injected markup open a dialog.
  const dialogs = [];
  page.on("dialog", async (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    await d.dismiss();
  });
  // None of the injected markup may have become an element (the charts' own SVG has no
  // event handler attributes and the pages have no images, frames or scripts).
  const noInjectedElements = async (where) => {
    const found = await page.evaluate(() =>
      [...document.querySelectorAll("#app img, #app script, #app iframe, [onerror], [onload], [onmouseover]")].map(
        (e) => e.outerHTML.slice(0, 120),
      ),
    );
    assert.deepEqual(found, [], `${where}: markup from the API became elements`);
    assert.deepEqual(dialogs, [], `${where}: a dialog opened`);
  };

  step("fleet page");
  await page.goto(`${url}/#/`);
  const fleetOfu = page.locator('[data-testid="fleet-ofu"] .card-value');
  await fleetOfu.waitFor();
  assert.match(await fleetOfu.innerText(), /^\d+\.\d%$/, "fleet OFU is a percentage");
  const wasted = await page.locator('[data-testid="wasted"] .card-value').innerText();
  assert.ok(Number(wasted.replace(/,/g, "")) > 0, `wasted GPU-hours shown (${wasted})`);
  assert.equal(await page.locator('[data-testid="ofu-distribution"] rect').count(), 10, "ten OFU deciles");
  assert.ok((await page.locator('[data-testid="by-cluster"] td', { hasText: cluster }).count()) > 0, "cluster row");
  for (const job of [regressed, steady]) {
    await page.locator(`[data-testid="job-row"][data-job="${job}"]`).waitFor();
  }
  await page.locator("#live", { hasText: /^live$/ }).waitFor();
  if (expectAlert) {
    // The test waited for detection before opening the browser: the fleet lists the alert.
    await page.locator('[data-testid="alerts-panel"] [data-testid="alert"][data-kind^="regression"]').first().waitFor();
    const openAlerts = page.locator(`[data-testid="job-row"][data-job="${regressed}"] td.num .badge`);
    assert.match(await openAlerts.innerText(), /^[1-9]\d*$/, "the regressing job has open alerts");
  } else {
    await page.locator('[data-testid="alerts-panel"]', { hasText: "not available yet" }).waitFor();
  }
  step("markup in names shows as text on the fleet page");
  const regressedRow = page.locator(`[data-testid="job-row"][data-job="${regressed}"]`);
  assert.ok((await regressedRow.locator("td", { hasText: markup.name }).count()) > 0, "job name as text");
  assert.ok((await page.locator('[data-testid="by-cluster"] td', { hasText: cluster }).count()) > 0, "cluster as text");
  await noInjectedElements("fleet page");
  if (shots) await page.screenshot({ path: join(shots, "fleet.png"), fullPage: true });

  step(`regressing job ${regressed}: the drop is visible`);
  await page.locator(`[data-testid="job-row"][data-job="${regressed}"] a`).click();
  await page.waitForURL((u) => u.hash === jobHash(regressed));
  await page.locator('[data-testid="job-title"]', { hasText: regressed }).waitFor();
  const shift = page.locator('[data-testid="level-shift"]');
  await shift.waitFor();
  assert.equal(await shift.getAttribute("data-found"), "true", "a change of level is shown");
  const before = Number(await shift.getAttribute("data-before"));
  const after = Number(await shift.getAttribute("data-after"));
  console.log(`  OFU before ${(before * 100).toFixed(1)}%, after ${(after * 100).toFixed(1)}%`);
  assert.ok(before / after >= minFactor, `OFU fell by at least ${minFactor}x (${before} -> ${after})`);
  assert.match(await page.locator('[data-testid="ofu-before"]').innerText(), /^\d+\.\d%$/);
  assert.match(await page.locator('[data-testid="ofu-after"]').innerText(), /^\d+\.\d%$/);
  assert.equal(await page.locator('[data-testid="ofu-chart"] path.line.ofu').count(), 1, "job OFU line");
  if (gpus > 0) {
    assert.equal(await page.locator('[data-testid="gpu-chart"] path.line.gpu').count(), gpus, "one line per GPU");
  }
  const verdictPanel = page.locator('[data-testid="verdict-panel"]');
  await verdictPanel.locator('[data-testid="verdict"], [data-testid="unavailable"]').first().waitFor();
  if ((await verdictPanel.locator('[data-testid="verdict"]').count()) > 0) {
    // Reconciliation answers: the framework's MFU (reported through the SDK) is drawn too.
    assert.equal(await page.locator('[data-testid="ofu-chart"] path.line.mfu').count(), 1, "app MFU line");
    console.log(`  verdict: ${await verdictPanel.locator('[data-testid="verdict"]').getAttribute("data-verdict")}`);
  }
  await page.locator("#live", { hasText: /^live$/ }).waitFor();

  step("markup in the job's strings shows as text on its page");
  const head = await page.locator("#app > p.muted").first().innerText();
  for (const text of [markup.name, markup.user, markup.team, markup.workload]) {
    assert.ok(head.includes(text), `job header shows ${JSON.stringify(text)} as text: ${head}`);
  }
  assert.ok((await page.locator('[data-testid="job-title"]').innerText()).includes(cluster), "cluster in the title");
  if ((await verdictPanel.locator('[data-testid="verdict"]').count()) > 0) {
    assert.ok((await verdictPanel.innerText()).includes(markup.framework), "framework as text");
  }
  await noInjectedElements("job page");

  step(expectAlert ? "the regression alert is listed" : "alerts say they are not available yet");
  const alerts = page.locator('[data-testid="alerts-panel"]');
  if (expectAlert) {
    // Detection may finish after the page loaded: live events (or a reload) bring it in.
    const alert = alerts.locator('[data-testid="alert"][data-kind^="regression"]');
    const deadline = Date.now() + 60_000;
    while ((await alert.count()) === 0) {
      assert.ok(Date.now() < deadline, "no regression alert on the job page within 60 s");
      await page.waitForTimeout(2000);
      if ((await alert.count()) === 0) await page.reload();
      await page.locator('[data-testid="job-title"]').waitFor();
    }
    console.log(`  alert: ${await alert.first().locator(".alert-summary").innerText()}`);
  } else {
    await alerts.locator('[data-testid="unavailable"]', { hasText: "not available yet" }).waitFor();
  }
  await noInjectedElements("job page with its alerts");
  if (shots) await page.screenshot({ path: join(shots, "regressed-job.png"), fullPage: true });

  step(`regressing job ${regressed}: still running, so no job-end report yet`);
  await page.locator('[data-testid="report-panel"] [data-testid="report-missing"]', { hasText: "written when a job ends" }).waitFor();

  step(`steady job ${steady}: no drop`);
  await page.goto(`${url}/${jobHash(steady)}`);
  await page.locator('[data-testid="job-title"]', { hasText: steady }).waitFor();
  assert.equal(await page.locator('[data-testid="level-shift"]').getAttribute("data-found"), "false");
  step(`steady job ${steady}: its job-end report`);
  const reportText = page.locator('[data-testid="report-panel"] [data-testid="report-text"]');
  await reportText.waitFor();
  const report = await reportText.innerText();
  assert.ok(report.startsWith(`goodput report: ${cluster}/${steady} (revision `), `report head: ${report.slice(0, 80)}`);
  for (const line of ["OFU", "GPU-hours", "HBM peak", "MFU vs OFU", "regressions", "Advice"]) {
    assert.ok(report.includes(line), `the report shows ${line}`);
  }
  assert.match(report, /OFU\s+\d+\.\d% \(95% CI/, "the report has the job's OFU");
  await page.locator('[data-testid="report-panel"]', { hasText: "Final" }).waitFor();
  if (shots) await page.screenshot({ path: join(shots, "steady-job.png"), fullPage: true });

  await noInjectedElements("steady job page");

  step("a page left while its answer is slow never replaces the page shown next");
  // The job page's read is held back 3 s, and the route goes to the fleet meanwhile: the
  // fleet must stay, with no error (under load this was a page that swapped itself back).
  const held = [];
  await page.route("**/api/jobs/*/*", async (route) => {
    held.push(route.request().url());
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await route.continue().catch(() => undefined); // the page cancelled it
  });
  await page.evaluate((hash) => {
    location.hash = hash;
  }, jobHash(regressed));
  for (const deadline = Date.now() + 20_000; held.length === 0; await page.waitForTimeout(50)) {
    assert.ok(Date.now() < deadline, "the job page asked for its job");
  }
  await page.evaluate(() => {
    location.hash = "#/";
  });
  await page.locator('[data-testid="fleet-ofu"] .card-value').waitFor();
  await page.waitForTimeout(4000);
  assert.equal(await page.locator('[data-testid="fleet"]').count(), 1, "the fleet page is still shown");
  assert.equal(await page.locator('[data-testid="job-title"]').count(), 0, "the left job page did not come back");
  assert.equal(await page.locator(".error").count(), 0, "no error shown");
  await page.unrouteAll({ behavior: "ignoreErrors" });

  step(`fleet filtered by user ${regressedUser} through the form, then its shared link`);
  await page.goto(`${url}/#/`);
  await page.locator('[data-testid="filters"]').waitFor();
  await page.locator('[data-testid="filter-user"]').fill(regressedUser);
  await page.locator('[data-testid="filter-apply"]').click();
  await page.waitForURL((u) => new URLSearchParams(u.hash.replace(/^#\/?\?/, "")).get("user") === regressedUser);
  await page.locator('[data-testid="active-filters"]', { hasText: `Only user ${regressedUser}` }).waitFor();
  const userRows = page.locator('[data-testid="user-row"]');
  await userRows.first().waitFor();
  assert.equal(await userRows.count(), 1, "only the filtered user is listed");
  assert.equal(await userRows.first().getAttribute("data-name"), regressedUser);
  await page.locator(`[data-testid="job-row"][data-job="${regressed}"]`).waitFor();
  const filteredJobs = await page.locator('[data-testid="job-row"]').evaluateAll((rows) => rows.map((r) => r.dataset.job).sort());
  const filteredOfu = await page.locator('[data-testid="fleet-ofu"] .card-value').innerText();
  const shared = await page.locator('[data-testid="share-link"]').getAttribute("href");
  assert.ok(shared, "a share link");
  assert.equal(new URLSearchParams(shared.replace(/^#\/?\?/, "")).get("user"), regressedUser, `share link ${shared}`);
  if (shots) await page.screenshot({ path: join(shots, "fleet-by-user.png"), fullPage: true });
  const other = await context.newPage();
  other.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  await other.goto(`${url}/${shared}`);
  await other.locator('[data-testid="active-filters"]', { hasText: `Only user ${regressedUser}` }).waitFor();
  await other.locator(`[data-testid="job-row"][data-job="${regressed}"]`).waitFor();
  assert.equal(await other.locator('[data-testid="fleet-ofu"] .card-value').innerText(), filteredOfu, "same fleet OFU");
  assert.deepEqual(
    await other.locator('[data-testid="job-row"]').evaluateAll((rows) => rows.map((r) => r.dataset.job).sort()),
    filteredJobs,
    "same jobs",
  );
  assert.equal(await other.locator('[data-testid="filter-user"]').inputValue(), regressedUser, "the form shows the filter");
  await noInjectedElements("fleet filtered by user");
  await other.close();

  assert.deepEqual(errors, [], "no errors in the page");
  console.log("dashboard e2e: all checks passed");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
