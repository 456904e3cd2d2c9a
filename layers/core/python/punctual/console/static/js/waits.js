// Why a run waits, and what a job runs after: read from what the API answers, never guessed.
//
// A run's reason holds only while the run is open (scheduled or retrying); once it starts or ends,
// no reason is shown, whatever its note said (the run's log keeps the history: each attempt's
// `waited`). Reasons, by where they come from:
// - the run's note "waiting: <reason>": an owner's limit (max_runs_per_minute, max_concurrency) or
//   any other limit the API names there (keyed limits...): shown as the API words it;
// - retrying: the backoff, until `next_attempt_at`;
// - overlap forbid: an earlier run of the job still open at this run's instant (it is skipped if so then);
// - due and none of the above: waiting for a worker to take it.
// A dependent job waits for its upstream jobs (GET /jobs/{id} `dependencies.waiting_for`).
import { h, link } from "./dom.js";
import { ms, when } from "./format.js";

export const OPEN = ["scheduled", "running", "retrying", "accepted"];
const WAITING_NOTE = "waiting: ";

// { kind, text } for an open run that has not started (or waits between attempts), else null.
export function waitingReason(run, job, runs, now) {
  if (run.state !== "scheduled" && run.state !== "retrying") return null;
  if (run.note && run.note.startsWith(WAITING_NOTE)) {
    const reason = run.note.slice(WAITING_NOTE.length);
    return { kind: limitKind(reason), text: `waiting: ${reason}` };
  }
  if (run.state === "retrying") {
    return { kind: "retry", text: run.next_attempt_at ? `retry at ${when(run.next_attempt_at).slice(11)}` : "retrying" };
  }
  if (ms(run.scheduled_at) > now) return null; // not due yet
  if (job && job.overlap === "forbid") { // replace does not wait: it cancels the earlier run
    const earlier = (runs || []).find((r) => r.run_id !== run.run_id && OPEN.includes(r.state)
      && ms(r.scheduled_at) < ms(run.scheduled_at));
    if (earlier) return { kind: "overlap", text: `overlap=forbid: the run of ${when(earlier.scheduled_at).slice(11)} is still ${earlier.state}` };
  }
  return { kind: "worker", text: "waiting for a worker" };
}

function limitKind(reason) {
  if (reason.startsWith("max_runs_per_minute")) return "tenant-rate";
  if (reason.startsWith("max_concurrency")) return "concurrency";
  return "limit"; // another limit the API names (a keyed limit, ...): its words are shown as they are
}

// The badge of a reason (or nothing).
export function reasonBadge(reason) {
  if (!reason) return null;
  return h("span", { class: `wait ${reason.kind}`, "data-testid": "waiting", title: reason.text }, reason.text);
}

// An accepted run (completion callback: its target took the work and reports its end): until when
// it lives without a heartbeat, and its last heartbeat's time and note.
export function acceptedBadge(run) {
  if (run.state !== "accepted") return null;
  const due = run.heartbeat_deadline_at ? `heartbeat due ${when(run.heartbeat_deadline_at).slice(11)}` : "accepted";
  const last = run.heartbeat_at ? ` · last ${when(run.heartbeat_at).slice(11)}${run.progress ? ` (${run.progress})` : ""}` : "";
  const text = `${due}${last}`;
  return h("span", { class: "wait accepted", "data-testid": "accepted", title: text }, text);
}

// What a run's "Why" cell says: the waiting reason while it holds, an accepted run's heartbeat, else
// a closed run's note (why it was skipped, cancelled or dead: history), never a stale "waiting: ..." note.
export function whyCell(run, job, runs, now) {
  if (run.state === "accepted") return acceptedBadge(run);
  const reason = waitingReason(run, job, runs, now);
  if (reason) return reasonBadge(reason);
  if (run.note && !run.note.startsWith(WAITING_NOTE) && !OPEN.includes(run.state)) return h("span", { class: "muted" }, run.note);
  return null;
}

// "after extract (succeeded)", each upstream job linked: `names` maps a job id to its name, when known.
export function dependsOnText(job, names) {
  const deps = job.depends_on;
  const parts = [];
  deps.jobs.forEach((id, index) => {
    if (index) parts.push(index === deps.jobs.length - 1 ? " and " : ", ");
    parts.push(link(`/console/jobs/${encodeURIComponent(id)}`, names.get(id) || id));
  });
  return h("span", { "data-testid": "depends-on" }, "after ", parts, ` (${deps.when})`);
}

// "waiting for extract" while a dependent job waits for upstream runs (null once none is missing).
export function dependencyWait(job, names) {
  const waiting = job.dependencies ? job.dependencies.waiting_for : [];
  if (!waiting.length) return null;
  const text = `waiting for ${waiting.map((id) => names.get(id) || id).join(", ")}`;
  return reasonBadge({ kind: "dependency", text });
}

// Names of the jobs `ids` that `known` lacks, read one by one (GET /jobs/{id}); unreadable ones stay ids.
export async function fillNames(known, ids, get) {
  const missing = [...new Set(ids)].filter((id) => !known.has(id));
  await Promise.all(missing.map((id) => get(`/jobs/${encodeURIComponent(id)}`)
    .then((job) => known.set(id, job.name)).catch(() => null)));
  return known;
}
