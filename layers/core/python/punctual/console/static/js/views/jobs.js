// Jobs: name, schedule in words, status, next run, last run state, the last 50 runs as a sparkline.
// Pages of 100 jobs (newest first) with "Load more"; search filters the loaded jobs by name.
import { get } from "../api.js";
import { chart, sparkline } from "../charts.js";
import { h, link, show, state } from "../dom.js";
import { scheduleInWords, when } from "../format.js";

const PAGE = 100;
const SPARK_RUNS = 50;
const PARALLEL = 6;

export async function jobsView(ctx) {
  const status = ctx.params.get("status") || "";
  const search = h("input", { type: "search", placeholder: "Search by name", "aria-label": "Search by name",
    value: ctx.params.get("q") || "" });
  const filter = h("select", { "aria-label": "Filter by status" },
    ["", "active", "paused", "completed", "deleted"].map((s) =>
      h("option", { value: s, selected: s === status }, s || "all but deleted")));
  filter.addEventListener("change", () => ctx.navigate(`/console/${filter.value ? `?status=${filter.value}` : ""}`));
  const rows = [];
  const body = h("tbody", {});
  const count = h("span", { class: "muted", id: "jobs-count" });
  const more = h("button", { type: "button", id: "load-more", hidden: true }, "Load more");
  const empty = h("p", { class: "muted", hidden: true }, "No jobs yet: create one with POST /jobs or `punctual jobs create`.");
  let cursor = null;
  const applySearch = () => {
    const needle = search.value.trim().toLowerCase();
    let shown = 0;
    rows.forEach((r) => {
      r.tr.hidden = Boolean(needle) && !r.job.name.toLowerCase().includes(needle);
      shown += r.tr.hidden ? 0 : 1;
    });
    count.textContent = `${shown} of ${rows.length} jobs${cursor ? " loaded" : ""}`;
  };
  const loadPage = async () => {
    more.disabled = true;
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (status) query.set("status", status);
    if (cursor) query.set("cursor", cursor);
    const page = await get(`/jobs?${query}`);
    if (!ctx.current()) return;
    cursor = page.next_cursor;
    const added = page.items.map(row);
    rows.push(...added);
    body.append(...added.map((r) => r.tr));
    more.hidden = !cursor;
    more.disabled = false;
    empty.hidden = rows.length > 0;
    applySearch();
    await fillRuns(ctx, added);
  };
  search.addEventListener("input", applySearch);
  more.addEventListener("click", () => loadPage());
  show(ctx.view,
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, search, filter, count),
    h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, ["Name", "Schedule", "Status", "Next run", "Last run", "Last 50 runs"].map((t) => h("th", {}, t)))),
      body),
    h("div", { class: "toolbar" }, more),
    empty);
  await loadPage();
}

function row(job) {
  const last = h("td", { "data-testid": "last-state" }, "…");
  const spark = h("div", { class: "spark", "data-testid": "spark" });
  const rate = h("span", { class: "muted" });
  const tr = h("tr", { "data-job-id": job.id },
    h("td", { class: "name" }, link(`/console/jobs/${encodeURIComponent(job.id)}`, job.name)),
    h("td", {}, scheduleInWords(job)),
    h("td", {}, state(job.status)),
    h("td", {}, when(job.next_run_at)),
    last,
    h("td", {}, h("div", { class: "toolbar" }, spark, rate)));
  return { job, tr, last, spark, rate };
}

async function fillRuns(ctx, rows) {
  const queue = [...rows];
  const worker = async () => {
    while (queue.length && ctx.current()) {
      const r = queue.shift();
      const page = await get(`/jobs/${encodeURIComponent(r.job.id)}/runs?limit=${SPARK_RUNS}`);
      if (!ctx.current()) return;
      const runs = page.items;
      r.last.replaceChildren(runs.length ? state(runs[0].state) : "—");
      if (runs.length) chart(r.spark, sparkline(runs));
      const done = runs.filter((x) => ["succeeded", "failed", "dead"].includes(x.state));
      const ok = done.filter((x) => x.state === "succeeded").length;
      r.rate.textContent = done.length ? `${Math.round((100 * ok) / done.length)}% ok` : "";
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}
