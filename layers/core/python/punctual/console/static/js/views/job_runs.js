// A job's runs on its page: the state filter, the Gantt of attempts, the start-lateness histogram,
// the calendar of outcomes and the newest runs as a table (duration, and why an open run waits);
// or, before its first run, one "No runs yet" state saying when the first one comes.
import { calendar, chart, histogram, histogramFromRuns } from "../charts.js";
import { h, link, state } from "../dom.js";
import { duration, ms, when } from "../format.js";
import { gantt, ganttBars, runDuration } from "../gantt.js";
import { dependsOnText, OPEN, whyCell } from "../waits.js";

const TIMELINE_RUNS = 100;
const TABLE_RUNS = 20;
export const FILTERS = [
  ["", "all states"], ["succeeded", "succeeded"], ["failed", "failed"], ["dead", "dead"],
  ["cancelled", "cancelled or skipped"], ["open", "waiting or running"], ["retried", "retried"],
];

export function matches(run, filter) {
  if (!filter) return true;
  if (filter === "open") return OPEN.includes(run.state);
  if (filter === "retried") return run.attempts.length > 1;
  return run.state === filter;
}

// The one state of a job without runs: when its first run comes, in words.
export function noRuns(job, names) {
  let next;
  if (job.status === "paused") next = "paused: resume it to run";
  else if (job.status !== "active") next = `${job.status}: it will not run`;
  else if (job.depends_on) next = ["runs ", dependsOnText(job, names)];
  else if (job.next_run_at) next = `next at ${when(job.next_run_at)}`;
  else next = "on demand: Trigger now runs it";
  return h("div", { class: "empty-state", id: "no-runs", "data-testid": "no-runs" },
    h("strong", {}, "No runs yet"), " — ", next);
}

// The runs section for `runs` (newest first) under `filter` (chosen with `select`); returns the
// element and its drawing. `marks` adds to the table: `bar` above it, a `select` cell (replay.js)
// and a `badge` beside each run's state (deadlines.js).
export function runsSection(ctx, job, runs, { filter, select }, now, marks = {}) {
  const shown = runs.filter((r) => matches(r, filter));
  const timelineRuns = shown.slice(0, TIMELINE_RUNS);
  const hist = histogramFromRuns(shown);
  const timelineEl = h("div", { class: "chart tall", id: "timeline" });
  const latenessEl = h("div", { class: "chart", id: "lateness" });
  const calendarEl = h("div", { class: "chart cal", id: "calendar" });
  const title = `Run timeline: ${timelineRuns.length} ${timelineRuns.length === TIMELINE_RUNS ? "newest " : ""}runs`
    + `${filter ? ` (${FILTERS.find(([v]) => v === filter)[1]})` : ""}; attempts coloured by outcome, retries stacked in their run`;
  // as tall as its rows need (up to 25 in view)
  timelineEl.style.height = `${Math.min(420, 96 + 30 * Math.max(1, timelineRuns.length))}px`;
  const el = h("div", { id: "runs-section" },
    h("div", { class: "toolbar section-head" }, h("h2", {}, title), h("label", {}, "Show ", select)),
    timelineRuns.length
      ? h("div", { class: "panel" }, timelineEl)
      : h("p", { class: "muted", "data-testid": "no-match" }, "No run in this state among the newest runs."),
    h("div", { class: "grid2" },
      h("div", {}, h("h2", {}, "Start lateness"), h("div", { class: "panel" }, latenessEl)),
      h("div", {}, h("h2", {}, "Outcomes by day"), h("div", { class: "panel" }, calendarEl))),
    h("h2", {}, "Newest runs"),
    marks.bar || null,
    runsTable(job, shown.slice(0, TABLE_RUNS), runs, now, marks));
  const draw = () => {
    if (timelineRuns.length) {
      const { owners } = ganttBars(timelineRuns, now);
      chart(timelineEl, gantt(timelineRuns, now), (p) => {
        const run = owners[p.dataIndex];
        if (run) ctx.navigate(`/console/runs/${encodeURIComponent(run.run_id)}`);
      });
    }
    chart(latenessEl, histogram(hist.counts, `${hist.n} started runs · p50 ${duration(hist.p50)} · p99 ${duration(hist.p99)}`));
    const bornAt = Math.min(ms(job.created_at), ...runs.map((r) => ms(r.scheduled_at)));
    chart(calendarEl, calendar(runs, now, bornAt, calendarEl.clientWidth || 600)); // every outcome, whatever the filter
  };
  return { el, draw, hist };
}

function runsTable(job, runs, all, now, marks) {
  if (!runs.length) return h("p", { class: "muted" }, "No runs in this state.");
  const heads = [...(marks.select ? ["Replay"] : []), "Scheduled", "State", "Why", "Trigger", "Attempts", "Started", "Duration"];
  return h("table", { id: "runs", class: "stack" },
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", {}, t)))),
    h("tbody", {}, runs.map((run) => {
      const took = runDuration(run, now);
      return h("tr", { "data-run-id": run.run_id },
        marks.select ? h("td", { "data-label": "Replay" }, marks.select(run)) : null,
        h("td", { "data-label": "Scheduled" }, link(`/console/runs/${encodeURIComponent(run.run_id)}`, when(run.scheduled_at))),
        h("td", { "data-label": "State" }, state(run.state), marks.badge ? marks.badge(run) : null),
        h("td", { "data-label": "Why", "data-testid": "why" }, whyCell(run, job, all, now)),
        h("td", { "data-label": "Trigger" }, run.trigger),
        h("td", { "data-label": "Attempts" }, String(run.attempts.length)),
        h("td", { "data-label": "Started" }, when(run.started_at)),
        h("td", { "data-label": "Duration", "data-testid": "duration" },
          took === null ? "—" : `${duration(took)}${["running", "accepted"].includes(run.state) ? " so far" : ""}`));
    })));
}
