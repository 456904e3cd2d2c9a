// Deadlines (a job's deadline_s, issue 33): which runs missed theirs, and which jobs had an
// instant that produced no run. Read from what the API answers, never guessed:
// - a run missed its deadline when its job has deadline_s and the run had not finished by
//   scheduled_at + deadline_s: it is still open past that, or it finished after it (the rule the
//   reaper alerts by), or GET /alerts holds a deadline_missed alert for it (the job's deadline_s
//   may have changed since);
// - a job missed a run when GET /alerts holds a run_missed alert for it (its cron instant produced
//   no run within deadline_s: no scheduler claimed it).
// GET /alerts answers the newest 100 alerts; the rule above needs no alert for a run.
import { h } from "./dom.js";
import { duration, ms, when } from "./format.js";
import { OPEN } from "./waits.js";

const ALERTS = 100; // GET /alerts answers at most this many, newest first
const EMPTY = Object.freeze({ runs: new Map(), jobs: new Map() });

// The deadline alerts the API holds: { runs: run id -> alert, jobs: job id -> [run_missed alerts] }.
export async function deadlineAlerts(get) {
  try {
    const page = await get(`/alerts?limit=${ALERTS}`);
    const runs = new Map();
    const jobs = new Map();
    for (const alert of page.items) {
      if (alert.kind === "deadline_missed") runs.set(alert.run_id, alert);
      else if (alert.kind === "run_missed") jobs.set(alert.job_id, [...(jobs.get(alert.job_id) || []), alert]);
    }
    return { runs, jobs };
  } catch (_error) {
    return EMPTY; // an API without alerts (or refused): the rule on run fields still holds
  }
}

// { due, late } for a run that missed its deadline (`late`: ms past it, so far or when it ended), else null.
export function missedDeadline(run, job, alerts, now) {
  const alerted = alerts ? alerts.runs.get(run.run_id) : null;
  if (job && job.deadline_s) {
    const due = ms(run.scheduled_at) + job.deadline_s * 1000;
    const end = OPEN.includes(run.state) ? now : ms(run.finished_at);
    if (end !== null && end > due) return { due, late: end - due, open: OPEN.includes(run.state) };
  }
  return alerted ? { due: null, late: null, open: OPEN.includes(run.state), reason: alerted.reason } : null;
}

// The badge of a run that missed its deadline (or nothing).
export function deadlineBadge(run, job, alerts, now) {
  const missed = missedDeadline(run, job, alerts, now);
  if (!missed) return null;
  const title = missed.reason || `due by ${when(new Date(missed.due).toISOString())} (deadline_s ${job.deadline_s});`
    + ` ${missed.open ? "still open" : "finished"} ${duration(missed.late)} after it`;
  return h("span", { class: "badge deadline", "data-testid": "deadline-badge", title }, "missed deadline");
}

// The badge of a job whose instants produced no run within its deadline (or nothing).
export function missedRunBadge(jobId, alerts) {
  const missed = alerts ? alerts.jobs.get(jobId) : null;
  if (!missed || !missed.length) return null;
  const text = missed.length > 1 ? `${missed.length} missed runs` : "missed run";
  return h("span", { class: "badge deadline", "data-testid": "missed-run-badge", title: missed[0].reason }, text);
}

// The run view's "Deadline" fact: when it was due, and whether it made it (null without deadline_s).
export function deadlineFact(run, job, alerts, now) {
  if (!job || !job.deadline_s) return null;
  const due = ms(run.scheduled_at) + job.deadline_s * 1000;
  const missed = missedDeadline(run, job, alerts, now);
  const text = `finish by ${when(new Date(due).toISOString())} (deadline_s ${job.deadline_s})`;
  return h("span", { "data-testid": "deadline-fact" }, text, " ",
    missed ? deadlineBadge(run, job, alerts, now) : h("span", { class: "muted" }, OPEN.includes(run.state) ? "· not yet due" : "· made it"));
}
