// A job: its facts and actions (pause, resume, trigger, delete: each confirmed first), its coming
// times (GET /jobs/{id}/preview: which run, which its DST policy or calendar shifts or skips, and why),
// the run timeline, the start-lateness histogram and the calendar of outcomes, then the newest runs.
import { api, get, offers, pages } from "../api.js";
import { calendar, chart, histogram, histogramFromRuns, timeline } from "../charts.js";
import { card, confirmAction, errorBox, h, link, show, state } from "../dom.js";
import { duration, scheduleInWords, when } from "../format.js";
import { dependencyGraph } from "../graph.js";

const MAX_RUNS = 300; // newest runs read for the charts (3 pages)
const TIMELINE_RUNS = 100;

export async function jobView(ctx, jobId) {
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  const [job, runs, graph, coming] = await Promise.all([
    get(path),
    pages(`${path}/runs`, MAX_RUNS),
    offers("/jobs/{job_id}/graph").then((offered) => (offered ? get(`${path}/graph`) : null)),
    offers("/jobs/{job_id}/preview").then((offered) => (offered ? get(`${path}/preview?count=12`) : null)),
  ]);
  if (!ctx.current()) return;
  const now = Date.now();
  const finished = runs.filter((r) => ["succeeded", "failed", "dead"].includes(r.state));
  const ok = finished.filter((r) => r.state === "succeeded").length;
  const hist = histogramFromRuns(runs);
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
  const actions = h("div", { class: "toolbar", id: "job-actions" },
    act("Trigger now", "trigger", `Run ${named} now, outside its schedule?`, () => ctx.rerender()),
    job.status === "active" ? act("Pause", "pause", `Pause ${named}? It will not run until resumed.`, () => ctx.rerender()) : null,
    job.status === "paused" ? act("Resume", "resume", `Resume ${named}?`, () => ctx.rerender()) : null,
    job.status !== "deleted" ? act("Delete", "delete", `Delete ${named}? This cannot be undone.`, () => ctx.navigate("/console/")) : null);
  const timelineEl = h("div", { class: "chart tall", id: "timeline" });
  const latenessEl = h("div", { class: "chart", id: "lateness" });
  const calendarEl = h("div", { class: "chart cal", id: "calendar" });
  const linked = graph && graph.upstream.length + graph.downstream.length > 0;
  const graphEl = h("div", { class: "chart", id: "graph" });
  const shown = runs.slice(0, TIMELINE_RUNS);
  show(ctx.view,
    h("p", {}, link("/console/", "← Jobs")),
    h("h1", { id: "job-name" }, job.name, " ", state(job.status)),
    actions, message,
    h("dl", { class: "facts" },
      [["Schedule", scheduleInWords(job)], ...timingFacts(job), ["Next run", when(job.next_run_at)],
        ["Target", targetText(job.target)],
        ["Timeout", `${job.timeout_s} s`], ["Retries", `${job.max_retries} (backoff ${job.retry.backoff_s} s)`],
        ["Overlap", job.overlap], ["Id", job.id]].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("div", { class: "cards" },
      card("Runs shown", `${runs.length}${runs.length >= MAX_RUNS ? "+" : ""}`, "runs-count"),
      card("Succeeded", finished.length ? `${Math.round((100 * ok) / finished.length)}%` : "—", "success-rate"),
      card("Start lateness p50", duration(hist.p50), "p50"),
      card("Start lateness p99", duration(hist.p99), "p99")),
    h("h2", {}, `Run timeline (${shown.length} newest runs; attempts coloured by outcome, click a run to open it)`),
    h("div", { class: "panel" }, timelineEl),
    h("div", { class: "grid2" },
      h("div", {}, h("h2", {}, "Start lateness"), h("div", { class: "panel" }, latenessEl)),
      h("div", {}, h("h2", {}, "Outcomes by day"), h("div", { class: "panel" }, calendarEl))),
    coming && job.status !== "deleted" ? [h("h2", {}, "Coming times"), previewTable(coming.items)] : null,
    linked ? [h("h2", {}, `Dependencies${graph.truncated ? " (more than shown)" : ""}`), h("div", { class: "panel" }, graphEl)] : null,
    h("h2", {}, "Newest runs"),
    runsTable(runs.slice(0, 20)));
  const ordered = [...shown].sort((a, b) => Date.parse(a.scheduled_at) - Date.parse(b.scheduled_at));
  chart(timelineEl, timeline(shown, now), (p) => {
    const run = ordered[p.dataIndex];
    if (run) ctx.navigate(`/console/runs/${encodeURIComponent(run.run_id)}`);
  });
  chart(latenessEl, histogram(hist.counts, `${hist.n} started runs · p50 ${duration(hist.p50)} · p99 ${duration(hist.p99)}`));
  chart(calendarEl, calendar(runs, now));
  if (linked) {
    const ids = [graph.job, ...graph.upstream, ...graph.downstream].map((j) => j.id);
    chart(graphEl, dependencyGraph(graph), (p) => {
      if (p.dataType === "node" && ids.includes(p.data.id) && p.data.id !== job.id) {
        ctx.navigate(`/console/jobs/${encodeURIComponent(p.data.id)}`);
      }
    });
  }
}

function timingFacts(job) {
  const facts = [];
  if (job.dst_repeated || job.dst_skipped) {
    facts.push(["DST", `repeated hour: ${job.dst_repeated || "cron's rule"}; skipped hour: ${job.dst_skipped || "cron's rule"}`]);
  }
  if (job.calendar) {
    facts.push(["Calendar", h("span", {}, link(`/console/calendars/${encodeURIComponent(job.calendar.name)}`,
      job.calendar.name), ` (${job.calendar.mode.replaceAll("_", " ")})`)]);
  }
  return facts;
}

// The next times as the preview lists them: the schedule's wall time, when it runs, and why not as said.
function previewTable(items) {
  if (!items.length) return h("p", { class: "muted" }, "No coming times: it runs after other jobs, or its time has passed.");
  return h("table", { id: "preview" },
    h("thead", {}, h("tr", {}, ["Schedule time", "Runs at", "Fate", "Why"].map((t) => h("th", {}, t)))),
    h("tbody", {}, items.map((item) => h("tr", { "data-fate": item.fate, "data-cause": item.cause || "" },
      h("td", {}, item.local.replace("T", " ")), h("td", {}, item.at ? when(item.at) : "—"),
      h("td", {}, h("span", { class: `state fate-${item.fate}` }, item.fate)),
      h("td", { class: "muted" }, item.detail || "")))));
}

function targetText(target) {
  if (target.type === "http") return `${target.method} ${target.url}`;
  return `${target.type} ${target.function_arn || target.queue_url || target.state_machine_arn || target.event_bus || ""}`;
}

function runsTable(runs) {
  if (!runs.length) return h("p", { class: "muted" }, "No runs yet.");
  return h("table", { id: "runs" },
    h("thead", {}, h("tr", {}, ["Scheduled", "State", "Trigger", "Attempts", "Started", "Finished", "Note"].map((t) => h("th", {}, t)))),
    h("tbody", {}, runs.map((run) => h("tr", { "data-run-id": run.run_id },
      h("td", {}, link(`/console/runs/${encodeURIComponent(run.run_id)}`, when(run.scheduled_at))),
      h("td", {}, state(run.state)), h("td", {}, run.trigger), h("td", {}, String(run.attempts.length)),
      h("td", {}, when(run.started_at)), h("td", {}, when(run.finished_at)),
      h("td", { class: "muted" }, run.note || "")))));
}
