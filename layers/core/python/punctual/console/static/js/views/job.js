// A job: its facts (what it runs after, what it waits for) and actions (pause, resume, trigger,
// delete: each confirmed first), then its runs (job_runs.js: a state filter, the Gantt of
// attempts, start lateness, outcomes by day, the newest runs) or one "No runs yet" state, and its
// dependency graph, and its coming times (GET /jobs/{id}/preview: which run, which its DST policy or
// calendar shifts or skips, and why). Runs can be replayed from here (replay.js: tick them, or a
// filter) and runs that missed the job's deadline_s are marked (deadlines.js). Live: every LIVE_MS
// the job and its runs are read again, and what changed is redrawn.
import { api, get, offers, pages } from "../api.js";
import { chart, disposeWithin, histogramFromRuns } from "../charts.js";
import { deadlineAlerts, deadlineBadge, missedRunBadge } from "../deadlines.js";
import { card, confirmAction, errorBox, h, link, show, state } from "../dom.js";
import { duration, scheduleInWords, when } from "../format.js";
import { dependencyGraph } from "../graph.js";
import { live } from "../live.js";
import { replayFilter, runSelection } from "../replay.js";
import { dependencyWait, dependsOnText, fillNames } from "../waits.js";
import { FILTERS, noRuns, runsSection } from "./job_runs.js";

const MAX_RUNS = 300; // newest runs read for the charts (3 pages)
const LIVE_MS = 5_000;

export async function jobView(ctx, jobId) {
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  const [job, runs, graph, coming, alerts] = await Promise.all([
    get(path),
    pages(`${path}/runs`, MAX_RUNS),
    offers("/jobs/{job_id}/graph").then((offered) => (offered ? get(`${path}/graph`) : null)),
    offers("/jobs/{job_id}/preview").then((offered) => (offered ? get(`${path}/preview?count=12`) : null)),
    deadlineAlerts(get),
  ]);
  const names = await fillNames(new Map([[job.id, job.name]]), job.depends_on ? job.depends_on.jobs : [], get);
  if (!ctx.current()) return;
  const message = h("div", { id: "job-message" });
  const act = (label, verb, question, after) => h("button", {
    type: "button", "data-action": verb, class: verb === "delete" ? "danger" : verb === "trigger" ? "primary" : "",
    onclick: async () => {
      if (!(await confirmAction(question))) return;
      try {
        const result = await api(verb === "delete" ? "DELETE" : "POST", verb === "delete" ? path : `${path}/${verb}`);
        after(result);
      } catch (error) {
        message.replaceChildren(errorBox(error));
      }
    },
  }, label);
  const named = `“${job.name}”`;
  const replays = replaySection(job, () => refresh());
  const actions = h("div", { class: "toolbar", id: "job-actions" },
    act("Trigger now", "trigger", `Run ${named} now, outside its schedule?`, () => ctx.rerender()),
    job.status === "active" ? act("Pause", "pause", `Pause ${named}? It will not run until resumed.`, () => ctx.rerender()) : null,
    job.status === "paused" ? act("Resume", "resume", `Resume ${named}?`, () => ctx.rerender()) : null,
    job.status !== "deleted" ? act("Delete", "delete", `Delete ${named}? This cannot be undone.`, () => ctx.navigate("/console/")) : null,
    replays.filter.toggle);
  let filter = FILTERS.some(([v]) => v === ctx.params.get("state")) ? ctx.params.get("state") : "";
  const select = h("select", { id: "state-filter", "aria-label": "Filter runs by state" },
    FILTERS.map(([value, label]) => h("option", { value, selected: value === filter }, label)));
  const body = h("div", { id: "job-body" });
  const linked = graph && graph.upstream.length + graph.downstream.length > 0;
  const graphEl = h("div", { class: "chart", id: "graph" });
  let current = { job, runs, signature: signature(job, runs) };
  const draw = () => {
    disposeWithin(body);
    const now = Date.now();
    const parts = [facts(current.job, names), cards(current.job, current.runs)];
    let drawRuns = null;
    if (current.runs.length) {
      const section = runsSection(ctx, current.job, current.runs, { filter, select }, now, replays.marks(current.job, now));
      parts.push(section.el);
      drawRuns = section.draw;
    } else parts.push(noRuns(current.job, names));
    body.replaceChildren(...parts.filter(Boolean));
    if (drawRuns) drawRuns();
  };
  select.addEventListener("change", () => {
    filter = select.value;
    const query = filter ? `?state=${encodeURIComponent(filter)}` : "";
    history.replaceState(null, "", `${location.pathname}${query}${location.hash}`);
    draw();
  });
  show(ctx.view,
    h("p", {}, link("/console/", "← Jobs")),
    h("h1", { id: "job-name" }, job.name, " ", state(job.status), " ", missedRunBadge(job.id, alerts)),
    actions, message, replays.filter.panel,
    body,
    coming && job.status !== "deleted" ? [h("h2", {}, "Coming times"), previewTable(coming.items)] : null,
    linked ? [h("h2", {}, `Dependencies${graph.truncated ? " (more than shown)" : ""}`), h("div", { class: "panel" }, graphEl)] : null);
  draw();
  if (linked) {
    const ids = [graph.job, ...graph.upstream, ...graph.downstream].map((j) => j.id);
    chart(graphEl, dependencyGraph(graph), (p) => {
      if (p.dataType === "node" && ids.includes(p.data.id) && p.data.id !== job.id) {
        ctx.navigate(`/console/jobs/${encodeURIComponent(p.data.id)}`);
      }
    });
  }
  const refresh = async () => {
    const [fresh, freshRuns] = await Promise.all([get(path), pages(`${path}/runs`, MAX_RUNS)]);
    if (!ctx.current()) return;
    if (!current.runs.length && freshRuns.length) return ctx.rerender(); // the first run: the whole page changes
    const next = signature(fresh, freshRuns);
    if (next === current.signature && !freshRuns.some((r) => ["running", "accepted"].includes(r.state))) return;
    current = { job: fresh, runs: freshRuns, signature: next };
    draw();
  };
  live(refresh, LIVE_MS);

  // Replay and deadlines on this page (replay.js, deadlines.js): the filter form, the runs' ticks
  // and their badges. `marks` is asked at each draw; what is ticked outlives a redraw.
  function replaySection(shown, reread) {
    const selection = runSelection(shown, reread);
    return {
      filter: replayFilter({ job: shown, onDone: reread }),
      marks: (fresh, now) => ({ bar: selection.bar, select: selection.checkbox,
        badge: (run) => deadlineBadge(run, fresh, alerts, now) }),
    };
  }
}

// What the page shows of a job and its runs changes only when this does (a redraw resets the zoom).
function signature(job, runs) {
  const dependencies = job.dependencies ? job.dependencies.waiting_for.join() : "";
  return JSON.stringify([job.status, job.next_run_at, dependencies,
    runs.map((r) => [r.run_id, r.state, r.note, r.attempts.length, r.next_attempt_at])]);
}

function facts(job, names) {
  const schedule = job.depends_on ? dependsOnText(job, names) : scheduleInWords(job);
  const waiting = job.depends_on ? dependencyWait(job, names) : null;
  const rows = [["Schedule", schedule], ...timingFacts(job), ...deadlineFacts(job), ["Next run", job.depends_on ? waiting || "when released" : when(job.next_run_at)],
    ["Target", targetText(job.target)], ["Timeout", `${job.timeout_s} s`],
    ["Retries", `${job.max_retries} (backoff ${job.retry.backoff_s} s)`], ["Overlap", job.overlap], ["Id", job.id]];
  return h("dl", { class: "facts", id: "job-facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function timingFacts(job) {
  const rows = [];
  if (job.dst_repeated || job.dst_skipped) {
    rows.push(["DST", `repeated hour: ${job.dst_repeated || "cron's rule"}; skipped hour: ${job.dst_skipped || "cron's rule"}`]);
  }
  if (job.calendar) {
    rows.push(["Calendar", h("span", {}, link(`/console/calendars/${encodeURIComponent(job.calendar.name)}`,
      job.calendar.name), ` (${job.calendar.mode.replaceAll("_", " ")})`)]);
  }
  return rows;
}

function deadlineFacts(job) {
  return job.deadline_s ? [["Deadline", `a run not finished ${duration(job.deadline_s * 1000)} after its time alerts (deadline_s ${job.deadline_s})`]] : [];
}

// The next times as the preview lists them: the schedule's wall time, when it runs, and why not as said.
function previewTable(items) {
  if (!items.length) return h("p", { class: "muted" }, "No coming times: it runs after other jobs, or its time has passed.");
  return h("table", { id: "preview", class: "stack" },
    h("thead", {}, h("tr", {}, ["Schedule time", "Runs at", "Fate", "Why"].map((t) => h("th", {}, t)))),
    h("tbody", {}, items.map((item) => h("tr", { "data-fate": item.fate, "data-cause": item.cause || "" },
      h("td", { "data-label": "Schedule time" }, item.local.replace("T", " ")),
      h("td", { "data-label": "Runs at" }, item.at ? when(item.at) : "—"),
      h("td", { "data-label": "Fate" }, h("span", { class: `state fate-${item.fate}` }, item.fate)),
      h("td", { class: "muted", "data-label": "Why" }, item.detail || "")))));
}

function cards(job, runs) {
  if (!runs.length) return null;
  const finished = runs.filter((r) => ["succeeded", "failed", "dead"].includes(r.state));
  const ok = finished.filter((r) => r.state === "succeeded").length;
  const hist = histogramFromRuns(runs);
  return h("div", { class: "cards" },
    card("Runs shown", `${runs.length}${runs.length >= MAX_RUNS ? "+" : ""}`, "runs-count"),
    card("Succeeded", finished.length ? `${Math.round((100 * ok) / finished.length)}%` : "—", "success-rate"),
    card("Start lateness p50", duration(hist.p50), "p50"),
    card("Start lateness p99", duration(hist.p99), "p99"));
}

function targetText(target) {
  if (target.type === "http") return `${target.method} ${target.url}`;
  return `${target.type} ${target.function_arn || target.queue_url || target.state_machine_arn || target.event_bus || ""}`;
}
