// A run: its facts and its attempts as its log (worker, times, outcome, error, response excerpt); a
// replay names the run it replays, and a run that missed its job's deadline_s says so.
import { get } from "../api.js";
import { deadlineAlerts, deadlineBadge, deadlineFact } from "../deadlines.js";
import { h, link, show, state } from "../dom.js";
import { duration, lateness, ms, when } from "../format.js";
import { replayOfFact } from "../replay.js";
import { whyCell } from "../waits.js";

export async function runView(ctx, runId) {
  const run = await get(`/runs/${encodeURIComponent(runId)}`);
  if (!ctx.current()) return;
  const [job, alerts] = await Promise.all([get(`/jobs/${encodeURIComponent(run.job_id)}`).catch(() => null), deadlineAlerts(get)]);
  if (!ctx.current()) return;
  const now = Date.now();
  const why = whyCell(run, job, [], now); // a wait while it holds; its history is in the attempts
  const deadline = deadlineFact(run, job, alerts, now);
  show(ctx.view,
    h("p", {}, link(`/console/jobs/${encodeURIComponent(run.job_id)}`, "← ", job ? job.name : run.job_id)),
    h("h1", {}, "Run ", h("span", { class: "muted" }, run.run_id), " ", state(run.state), " ", deadlineBadge(run, job, alerts, now)),
    h("dl", { class: "facts", id: "run-facts" },
      fact("Trigger", run.trigger),
      replayOfFact(run),
      fact("Scheduled", when(run.scheduled_at)),
      fact("Started", `${when(run.started_at)}${run.started_at ? ` (${duration(lateness(run))} late)` : ""}`),
      fact("Finished", when(run.finished_at)),
      fact("Attempt", String(run.attempt)),
      run.next_attempt_at ? fact("Next attempt", when(run.next_attempt_at)) : null,
      deadline ? fact("Deadline", deadline) : null,
      run.heartbeat_deadline_at ? fact("Heartbeat due", when(run.heartbeat_deadline_at)) : null,
      run.heartbeat_at ? fact("Last heartbeat", `${when(run.heartbeat_at)}${run.progress ? ` · ${run.progress}` : ""}`) : null,
      why ? fact("Why", why) : null),
    h("h2", {}, `Attempts (${run.attempts.length})`),
    run.attempts.length
      ? h("ol", { class: "attempts", id: "attempts" }, run.attempts.map(attemptItem))
      : h("p", { class: "muted" }, "No attempt yet."));
}

function fact(label, value) {
  return [h("dt", {}, label), h("dd", {}, value)];
}

function attemptItem(attempt) {
  const took = attempt.started_at && attempt.finished_at ? ms(attempt.finished_at) - ms(attempt.started_at) : null;
  return h("li", { class: attempt.outcome, "data-testid": "attempt" },
    h("div", {}, h("strong", {}, `Attempt ${attempt.number}`), " ", state(attempt.outcome),
      attempt.status_code ? ` · HTTP ${attempt.status_code}` : "", ` · ${duration(took)}`),
    h("div", { class: "muted" }, `worker ${attempt.worker_id || "—"} · ${when(attempt.started_at)} → ${when(attempt.finished_at)}`),
    attempt.waited ? h("div", { class: "muted", "data-testid": "attempt-waited" }, `started after waiting for ${attempt.waited}`) : null,
    attempt.error ? h("div", { class: "error", "data-testid": "attempt-error" }, attempt.error) : null,
    attempt.response_excerpt ? h("pre", { class: "excerpt", "data-testid": "excerpt" }, attempt.response_excerpt) : null);
}
