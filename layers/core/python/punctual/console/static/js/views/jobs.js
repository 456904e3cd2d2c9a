// Jobs: name, schedule in words (or what it runs after), status, next run (or what it waits for),
// last run state with why it waits, the last 50 runs as a sparkline. Pages of 100 jobs (newest
// first) with "Load more"; search filters the loaded jobs by name. Live: every LIVE_MS the first
// page and each loaded job's newest runs are read again and the rows updated in place. A last run
// that missed its job's deadline, and a job whose instant produced no run, carry a badge
// (deadlines.js); "Replay runs…" replays runs of one job or of all (replay.js).
import { get } from "../api.js";
import { chart, sparkline } from "../charts.js";
import { deadlineAlerts, deadlineBadge, missedRunBadge } from "../deadlines.js";
import { h, link, show, state } from "../dom.js";
import { scheduleInWords, when } from "../format.js";
import { live } from "../live.js";
import { replayFilter } from "../replay.js";
import { dependencyWait, dependsOnText, fillNames, reasonBadge, waitingReason } from "../waits.js";

const PAGE = 100;
const SPARK_RUNS = 50;
const PARALLEL = 6;
const LIVE_MS = 10_000;
const ROW_MS = 200; // a refresh reads each row's runs: 100 rows are polled every 20 s, not 10

export async function jobsView(ctx) {
  const status = ctx.params.get("status") || "";
  const search = h("input", { type: "search", placeholder: "Search by name", "aria-label": "Search by name",
    value: ctx.params.get("q") || "" });
  const filter = h("select", { "aria-label": "Filter by status" },
    ["", "active", "paused", "completed", "deleted"].map((s) =>
      h("option", { value: s, selected: s === status }, s || "all but deleted")));
  filter.addEventListener("change", () => ctx.navigate(`/console/${filter.value ? `?status=${filter.value}` : ""}`));
  const rows = new Map(); // job id -> row
  const names = new Map(); // job id -> name (the upstream jobs of dependents)
  const body = h("tbody", {});
  const count = h("span", { class: "muted", id: "jobs-count" });
  const more = h("button", { type: "button", id: "load-more", hidden: true }, "Load more");
  const replay = replayFilter({ jobs: () => [...rows.values()].map((r) => r.job).filter((j) => j.status !== "deleted") });
  let alerts = await deadlineAlerts(get);
  const empty = h("p", { class: "muted empty", hidden: true }, "No jobs yet: create one with POST /jobs or `punctual jobs create`.");
  let cursor = null;
  const applySearch = () => {
    const needle = search.value.trim().toLowerCase();
    let shown = 0;
    rows.forEach((r) => {
      r.tr.hidden = Boolean(needle) && !r.job.name.toLowerCase().includes(needle);
      shown += r.tr.hidden ? 0 : 1;
    });
    count.textContent = `${shown} of ${rows.size} jobs${cursor ? " loaded" : ""}`;
  };
  const query = (after) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (status) q.set("status", status);
    if (after) q.set("cursor", after);
    return `/jobs?${q}`;
  };
  // Rows for the jobs of a page: new ones added (at the top when `first`), known ones updated.
  const take = async (jobs, first) => {
    jobs.forEach((job) => names.set(job.id, job.name));
    const added = [];
    for (const job of jobs) {
      const known = rows.get(job.id);
      if (known) known.update(job);
      else {
        const r = row(job);
        rows.set(job.id, r);
        added.push(r);
      }
    }
    if (first) body.prepend(...added.map((r) => r.tr));
    else body.append(...added.map((r) => r.tr));
    const dependents = jobs.filter((job) => job.depends_on);
    await fillNames(names, dependents.flatMap((job) => job.depends_on.jobs), get);
    await Promise.all(dependents.map((job) => get(`/jobs/${encodeURIComponent(job.id)}`)
      .then((full) => rows.get(job.id).depends(full, names)).catch(() => rows.get(job.id).depends(job, names))));
    empty.hidden = rows.size > 0;
    applySearch();
    return added;
  };
  const loadPage = async () => {
    more.disabled = true;
    const page = await get(query(cursor));
    if (!ctx.current()) return;
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
    await fillRuns(ctx, await take(page.items, false), alerts);
  };
  search.addEventListener("input", applySearch);
  more.addEventListener("click", () => loadPage());
  show(ctx.view,
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, search, filter, count, replay.toggle),
    replay.panel,
    h("table", { id: "jobs", class: "stack" },
      h("thead", {}, h("tr", {}, ["Name", "Schedule", "Status", "Next run", "Last run", "Last 50 runs"].map((t) => h("th", {}, t)))),
      body),
    h("div", { class: "toolbar" }, more),
    empty);
  await loadPage();
  if (!ctx.current()) return;
  live(async () => {
    const page = await get(query(null));
    alerts = await deadlineAlerts(get);
    if (!ctx.current()) return;
    await take(page.items, true);
    await fillRuns(ctx, [...rows.values()], alerts);
  }, () => Math.max(LIVE_MS, rows.size * ROW_MS));
}

function row(job) {
  const cells = {
    schedule: h("td", { "data-label": "Schedule" }),
    status: h("td", { "data-label": "Status" }),
    next: h("td", { "data-label": "Next run", "data-testid": "next" }),
  };
  const last = h("td", { "data-testid": "last-state", "data-label": "Last run" }, "…");
  const spark = h("div", { class: "spark", "data-testid": "spark" });
  const rate = h("span", { class: "muted" });
  const tr = h("tr", { "data-job-id": job.id },
    h("td", { class: "name", "data-label": "Name" }, link(`/console/jobs/${encodeURIComponent(job.id)}`, job.name)),
    cells.schedule, cells.status, cells.next, last,
    h("td", { "data-label": "Last 50 runs" }, h("div", { class: "toolbar spark-cell" }, spark, rate)));
  const r = { job, tr, last, spark, rate, wait: null, missed: h("span", { class: "missed" }) };
  r.update = (fresh) => {
    r.job = fresh;
    if (!fresh.depends_on) cells.schedule.replaceChildren(scheduleInWords(fresh));
    cells.status.replaceChildren(state(fresh.status), " ", r.missed);
    if (!fresh.depends_on) cells.next.replaceChildren(when(fresh.next_run_at));
  };
  r.depends = (full, names) => {
    cells.schedule.replaceChildren(dependsOnText(full, names));
    cells.next.replaceChildren(dependencyWait(full, names) || (full.status === "active" ? "when released" : "—"));
  };
  r.update(job);
  return r;
}

async function fillRuns(ctx, rows, alerts) {
  const queue = [...rows];
  const worker = async () => {
    while (queue.length && ctx.current()) {
      const r = queue.shift();
      const page = await get(`/jobs/${encodeURIComponent(r.job.id)}/runs?limit=${SPARK_RUNS}`);
      if (!ctx.current()) return;
      const runs = page.items;
      const now = Date.now();
      const reasons = runs.map((run) => waitingReason(run, r.job, runs, now)).filter(Boolean);
      const reason = reasons.length > 1 ? { ...reasons[0], text: `${reasons[0].text} (${reasons.length} runs)` } : reasons[0];
      r.last.replaceChildren(...(runs.length ? [state(runs[0].state), " ", reasonBadge(reason),
        deadlineBadge(runs[0], r.job, alerts, now)].filter(Boolean) : ["—"]));
      r.missed.replaceChildren(...[missedRunBadge(r.job.id, alerts)].filter(Boolean));
      if (runs.length) chart(r.spark, sparkline(runs));
      const done = runs.filter((x) => ["succeeded", "failed", "dead"].includes(x.state));
      const ok = done.filter((x) => x.state === "succeeded").length;
      r.rate.textContent = done.length ? `${Math.round((100 * ok) / done.length)}% ok` : "";
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}
