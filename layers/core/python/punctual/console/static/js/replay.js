// Replay (POST /runs/replay, issue 33): new runs for earlier ones, from the console. Two ways to
// say which runs: tick them in a job's run table ("Replay selected"), or a filter (one job or all
// jobs, a time range in UTC, the states they ended in). Either way a dry run first shows what would
// be replayed (the count and the runs), and only a confirmation replays them. Each request that
// replays carries an Idempotency-Key made when its dry run was shown: confirming again after an
// error (a retry) starts nothing twice.
import { api } from "./api.js";
import { confirmAction, errorBox, h, link, state } from "./dom.js";
import { when } from "./format.js";

export const REPLAYABLE = ["failed", "dead", "succeeded", "cancelled"];
const DEFAULT_STATES = ["failed", "dead"];
const LISTED = 20; // runs a preview lists (the count says how many more)
const HOUR_MS = 3_600_000;

// A fresh Idempotency-Key (random, printable ASCII).
function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

const replayOnce = (body, key) => api("POST", "/runs/replay", body, { "Idempotency-Key": key });

// The dry run's answer as a preview: the count, the runs (linked), and the button that replays them.
function preview(id, answer, listed, confirm) {
  const runs = listed.slice(0, LISTED);
  const more = answer.count - runs.length;
  return h("div", { class: "replay-preview", id },
    h("p", { "data-testid": "replay-count" }, answer.count === 1 ? "1 run would be replayed" : `${answer.count} runs would be replayed`,
      answer.count ? " (a new run each, trigger replay, linked to its original):" : "."),
    runs.length ? h("table", { class: "stack replay-runs" },
      h("tbody", {}, runs.map((run) => h("tr", { "data-run-id": run.run_id },
        h("td", { "data-label": "Scheduled" }, link(`/console/runs/${encodeURIComponent(run.run_id)}`, when(run.scheduled_at))),
        h("td", { "data-label": "State" }, state(run.state)),
        h("td", { class: "muted", "data-label": "Run" }, run.run_id))))) : null,
    more > 0 ? h("p", { class: "muted" }, `and ${more} more`) : null,
    answer.count ? h("button", { type: "button", class: "primary", "data-action": "replay-confirm", onclick: confirm },
      `Replay ${answer.count === 1 ? "1 run" : `${answer.count} runs`}`) : null);
}

// After the confirmed requests: what they did (or the error; confirming again retries with the same keys).
async function carryOut(out, requests, count, onDone) {
  if (!(await confirmAction(`Replay ${count === 1 ? "1 run" : `${count} runs`}? Each starts again as a new run.`))) return;
  try {
    let replayed = 0;
    for (const { body, key } of requests) replayed += (await replayOnce(body, key)).count;
    out.replaceChildren(h("p", { class: "notice", "data-testid": "replay-done" },
      `Replayed ${replayed === 1 ? "1 run" : `${replayed} runs`}: new runs with trigger replay, each linked to its original.`));
    if (onDone) await onDone();
  } catch (error) {
    out.append(errorBox(error));
  }
}

// Checkboxes for a job's run table and the bar that replays the runs ticked. `onDone` is called after a
// replay (the view reads its runs again). Returns { bar, checkbox(run), clear() }.
export function runSelection(job, onDone) {
  const chosen = new Map(); // run id -> run
  const count = h("span", { class: "muted", id: "replay-selected-count" }, "");
  const out = h("div", { id: "replay-selected-result" });
  const button = h("button", { type: "button", id: "replay-selected", disabled: true, onclick: () => previewSelection() },
    "Replay selected…");
  const bar = h("div", { class: "replay-bar" }, h("div", { class: "toolbar" }, button, count), out);
  const sync = () => {
    button.disabled = chosen.size === 0;
    count.textContent = chosen.size ? `${chosen.size} selected` : "tick ended runs to replay them";
  };
  // One dry run over the span of the runs ticked; replayed in one request when the span holds exactly
  // them, else one request per run (each a span of one millisecond).
  const previewSelection = async () => {
    const runs = [...chosen.values()].sort((a, b) => Date.parse(a.scheduled_at) - Date.parse(b.scheduled_at));
    const span = {
      job_ids: [job.id],
      from: runs[0].scheduled_at,
      to: new Date(Date.parse(runs[runs.length - 1].scheduled_at) + 1).toISOString(),
      states: [...new Set(runs.map((r) => r.state))],
    };
    try {
      const dry = await api("POST", "/runs/replay", { ...span, dry_run: true });
      const found = new Set(dry.runs.map((r) => r.run_id));
      const listed = dry.runs.filter((r) => chosen.has(r.run_id));
      const exact = listed.length === chosen.size && found.size === chosen.size;
      const requests = exact ? [{ body: span, key: newKey() }] : listed.map((r) => ({
        key: newKey(),
        body: { job_ids: [job.id], from: r.scheduled_at, to: new Date(Date.parse(r.scheduled_at) + 1).toISOString(), states: [r.state] },
      }));
      const answer = { count: listed.length };
      out.replaceChildren(preview("replay-selected-preview", answer, listed,
        () => carryOut(out, requests, listed.length, async () => { chosen.clear(); sync(); if (onDone) await onDone(); })));
    } catch (error) {
      out.replaceChildren(errorBox(error));
    }
  };
  const checkbox = (run) => {
    if (!REPLAYABLE.includes(run.state)) return null;
    const box = h("input", { type: "checkbox", "data-replay": run.run_id, "aria-label": `Select the run of ${when(run.scheduled_at)}`,
      checked: chosen.has(run.run_id) });
    box.addEventListener("change", () => {
      if (box.checked) chosen.set(run.run_id, run);
      else chosen.delete(run.run_id);
      sync();
    });
    return box;
  };
  sync();
  return { bar, checkbox };
}

const isoMinute = (millis) => new Date(millis).toISOString().slice(0, 16); // a datetime-local value, UTC
const fromInput = (value) => new Date(`${value}Z`).toISOString(); // the inputs are in UTC, like every time shown

// The filter form: which job (this `job`, or a choice among `jobs()` and "all jobs"), a time range,
// the states. Returns { toggle, panel }: the button that shows it, and the form.
export function replayFilter({ job = null, jobs = () => [], onDone = null } = {}) {
  const now = Date.now();
  const from = h("input", { type: "datetime-local", id: "replay-from", value: isoMinute(now - 24 * HOUR_MS) });
  const to = h("input", { type: "datetime-local", id: "replay-to", value: isoMinute(now + 60_000) });
  const which = job ? null : h("select", { id: "replay-job", "aria-label": "Job" });
  const boxes = REPLAYABLE.map((s) => h("label", { class: "replay-state" },
    h("input", { type: "checkbox", name: "replay-state", value: s, checked: DEFAULT_STATES.includes(s) }), ` ${s}`));
  const out = h("div", { id: "replay-filter-result" });
  const run = async () => {
    const body = { from: fromInput(from.value), to: fromInput(to.value),
      states: boxes.map((l) => l.firstChild).filter((b) => b.checked).map((b) => b.value) };
    const chosenJob = job ? job.id : which.value;
    if (chosenJob) body.job_ids = [chosenJob];
    try {
      const dry = await api("POST", "/runs/replay", { ...body, dry_run: true });
      const key = newKey();
      out.replaceChildren(preview("replay-filter-preview", dry, dry.runs, () => carryOut(out, [{ body, key }], dry.count, onDone)));
    } catch (error) {
      out.replaceChildren(errorBox(error));
    }
  };
  const panel = h("div", { class: "panel replay-panel", id: "replay-panel", hidden: true },
    h("h2", {}, job ? `Replay runs of ${job.name}` : "Replay runs"),
    h("div", { class: "toolbar" },
      job ? null : h("label", {}, "Job ", which),
      h("label", {}, "From (UTC) ", from), h("label", {}, "To (UTC) ", to)),
    h("div", { class: "toolbar" }, h("span", { class: "muted" }, "Ended as"), boxes,
      h("button", { type: "button", id: "replay-preview", onclick: run }, "Preview")),
    out);
  const toggle = h("button", { type: "button", "data-action": "replay", onclick: () => {
    panel.hidden = !panel.hidden;
    if (!panel.hidden && which) {
      which.replaceChildren(h("option", { value: "" }, "all jobs"),
        jobs().map((j) => h("option", { value: j.id }, j.name)));
    }
  } }, "Replay runs…");
  return { toggle, panel };
}

// The run view's "Replay of" fact: the run a replay started again, linked (null for other runs).
export function replayOfFact(run) {
  if (!run.replay_of) return null;
  return [h("dt", {}, "Replay of"), h("dd", { "data-testid": "replay-of" },
    link(`/console/runs/${encodeURIComponent(run.replay_of)}`, run.replay_of))];
}
