// Chart options for Apache ECharts (vendor/echarts.min.js): every chart is drawn by ECharts from a
// declarative option. Tooltips use ECharts' richText mode (drawn on the canvas, never HTML), so
// nothing a user typed can become markup through a chart either.
import { duration, lateness, ms, percentile, when } from "./format.js";

export const COLORS = {
  succeeded: "#2e9d5b", failed: "#d64541", timeout: "#d64541", dead: "#7a1f1f", dead_lettered: "#7a1f1f",
  cancelled: "#9aa0a6", lease_expired: "#f0a030", running: "#3b82f6", scheduled: "#93b4f5", retrying: "#f0a030",
};
const WAIT = "#dfe3ea";
const ROWS = 25; // timeline rows in view at once
const live = new Set();

// Render `option` into `el`; the instance is disposed when the view changes (disposeAll).
export function chart(el, option, onClick) {
  const instance = window.echarts.init(el, null, { renderer: "canvas" });
  instance.setOption({ animation: false, ...option });
  if (onClick) instance.on("click", onClick);
  live.add(instance);
  return instance;
}

export function disposeAll() {
  for (const instance of live) instance.dispose();
  live.clear();
}

window.addEventListener("resize", () => live.forEach((instance) => instance.resize()));

const tooltip = (formatter) => ({ trigger: "item", renderMode: "richText", formatter, confine: true });

// The last runs of a job as coloured bars, oldest first (one bar per run).
export function sparkline(runs, slots = 50) {
  const ordered = [...runs].reverse();
  const empty = Math.max(0, slots - ordered.length); // fewer runs: keep the bars' width, fill from the right
  return {
    grid: { left: 0, right: 0, top: 2, bottom: 2 },
    xAxis: { type: "category", show: false, data: [...new Array(empty).fill(""), ...ordered.map((r) => r.run_id)] },
    yAxis: { type: "value", show: false, max: 1 },
    series: [{
      type: "bar", barCategoryGap: "15%", silent: true,
      data: [...new Array(empty).fill("-"), ...ordered.map((r) => ({ value: 1, itemStyle: { color: COLORS[r.state] || WAIT } }))],
    }],
  };
}

// Runs on a time axis: one row per run, scheduled -> started -> finished, attempts as segments
// coloured by outcome. Built as stacked horizontal bars: an invisible offset from the window start,
// the wait before the first attempt, then for each attempt the gap before it and its duration.
export function timeline(runs, now) {
  const ordered = [...runs].sort((a, b) => ms(a.scheduled_at) - ms(b.scheduled_at));
  const t0 = ordered.length ? ms(ordered[0].scheduled_at) : now;
  const ends = ordered.map((run) => runEnd(run, now));
  const tEnd = Math.max(t0 + 1000, ...ends);
  const maxAttempts = Math.max(1, ...ordered.map((r) => r.attempts.length));
  const firstShown = ordered.length ? ms(ordered[Math.max(0, ordered.length - ROWS)].scheduled_at) : t0;
  const base = { type: "bar", stack: "run", barMaxWidth: 14 };
  const series = [
    { ...base, name: "offset", silent: true, itemStyle: { color: "transparent" },
      data: ordered.map((run) => ms(run.scheduled_at) - t0) },
    { ...base, name: "waiting", barMinHeight: 3,
      data: ordered.map((run) => ({
        value: Math.max(0, (firstStart(run) ?? runEnd(run, now)) - ms(run.scheduled_at)),
        itemStyle: { color: run.attempts.length ? WAIT : COLORS[run.state] || WAIT },
      })) },
  ];
  for (let k = 0; k < maxAttempts; k += 1) {
    series.push({ ...base, name: `gap ${k + 1}`, silent: true, itemStyle: { color: "transparent" },
      data: ordered.map((run) => (k > 0 && run.attempts[k] ? Math.max(0, ms(run.attempts[k].started_at)
        - attemptEnd(run.attempts[k - 1], now)) : "-")) });
    series.push({ ...base, name: `attempt ${k + 1}`, barMinHeight: 3,
      data: ordered.map((run) => {
        const attempt = run.attempts[k];
        if (!attempt || !attempt.started_at) return "-";
        return { value: Math.max(0, attemptEnd(attempt, now) - ms(attempt.started_at)),
          itemStyle: { color: COLORS[attempt.outcome] || WAIT } };
      }) });
  }
  return {
    grid: { left: 150, right: 30, top: 10, bottom: 60 },
    tooltip: tooltip((p) => runTooltip(ordered[p.dataIndex], now)),
    xAxis: { type: "value", min: 0, max: tEnd - t0,
      axisLabel: { formatter: (v) => axisTime(t0 + v, tEnd - t0), hideOverlap: true } },
    yAxis: { type: "category", inverse: true, data: ordered.map((r) => when(r.scheduled_at).slice(0, 19)),
      axisLabel: { fontSize: 11 } },
    // opens on the newest rows and the time they span; drag or wheel to see the rest
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "none", startValue: firstShown - t0, endValue: tEnd - t0 },
      { type: "slider", xAxisIndex: 0, filterMode: "none", height: 18, bottom: 8, startValue: firstShown - t0, endValue: tEnd - t0 },
      ...(ordered.length > ROWS ? [{ type: "slider", yAxisIndex: 0, right: 4, width: 14, startValue: ordered.length - ROWS,
        endValue: ordered.length - 1 }] : []),
    ],
    series,
  };
}

// A tick label as precise as the span needs: milliseconds within a minute, the date beyond a day.
function axisTime(epoch, span) {
  const iso = new Date(epoch).toISOString();
  if (span < 60_000) return iso.slice(11, 23);
  if (span < 86_400_000) return iso.slice(11, 19);
  return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
}

function firstStart(run) {
  const first = run.attempts.find((a) => a.started_at);
  return first ? ms(first.started_at) : ms(run.started_at);
}

function attemptEnd(attempt, now) {
  return attempt.finished_at ? ms(attempt.finished_at) : now;
}

function runEnd(run, now) {
  if (run.finished_at) return ms(run.finished_at);
  const last = run.attempts[run.attempts.length - 1];
  if (last) return attemptEnd(last, now);
  return ["scheduled", "running", "retrying"].includes(run.state) ? Math.max(now, ms(run.scheduled_at)) : ms(run.scheduled_at);
}

function runTooltip(run, now) {
  const lines = [`${run.state} · ${run.trigger}`, `scheduled ${when(run.scheduled_at)}`];
  const late = lateness(run);
  if (late !== null) lines.push(`started ${duration(late)} late`);
  run.attempts.forEach((a) => {
    lines.push(`attempt ${a.number}: ${a.outcome}, ${duration(attemptEnd(a, now) - ms(a.started_at))}`);
  });
  return lines.join("\n");
}

// Start lateness of a job's runs in the same buckets as GET /stats, with exact p50/p99 of the sample.
export const BOUNDS_MS = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 900000];

const BUCKET_LABELS = ["≤10 ms", "≤25 ms", "≤50 ms", "≤100 ms", "≤250 ms", "≤500 ms", "≤1 s", "≤2.5 s", "≤5 s",
  "≤10 s", "≤30 s", "≤1 min", "≤5 min", "≤15 min", ">15 min"];

export function bucketLabels() {
  return BUCKET_LABELS;
}

export function histogramFromRuns(runs) {
  const samples = runs.map(lateness).filter((v) => v !== null).sort((a, b) => a - b);
  const counts = new Array(BOUNDS_MS.length + 1).fill(0);
  for (const value of samples) {
    const index = BOUNDS_MS.findIndex((bound) => Math.max(0, value) <= bound);
    counts[index === -1 ? BOUNDS_MS.length : index] += 1;
  }
  return { counts, p50: percentile(samples, 50), p99: percentile(samples, 99), n: samples.length };
}

export function histogram(counts, subtitle) {
  return {
    title: { text: subtitle, left: "center", top: 0, textStyle: { fontSize: 13, fontWeight: "normal" } },
    grid: { left: 45, right: 15, top: 34, bottom: 40 },
    tooltip: tooltip((p) => `${p.name}: ${p.value} runs`),
    xAxis: { type: "category", data: bucketLabels(), axisLabel: { rotate: 40, fontSize: 10 } },
    yAxis: { type: "value", minInterval: 1 },
    series: [{ type: "bar", name: "runs", data: counts, itemStyle: { color: "#f0a030" } }],
  };
}

// Outcomes by day: the share of a day's finished runs that succeeded, on a calendar.
export function calendar(runs, now) {
  const days = new Map();
  for (const run of runs) {
    if (!run.finished_at || !["succeeded", "failed", "dead"].includes(run.state)) continue;
    const day = run.finished_at.slice(0, 10);
    const tally = days.get(day) || { ok: 0, all: 0 };
    tally.all += 1;
    if (run.state === "succeeded") tally.ok += 1;
    days.set(day, tally);
  }
  const end = new Date(now).toISOString().slice(0, 10);
  const oldest = [...days.keys()].sort()[0] || end;
  const floor = new Date(now - 364 * 86_400_000).toISOString().slice(0, 10);
  const start = [oldest, new Date(now - 120 * 86_400_000).toISOString().slice(0, 10)].sort()[0];
  const data = [...days.entries()].map(([day, t]) => [day, Math.round((100 * t.ok) / t.all), t.all]);
  return {
    tooltip: tooltip((p) => `${p.value[0]}: ${p.value[1]}% of ${p.value[2]} runs succeeded`),
    visualMap: { min: 0, max: 100, dimension: 1, calculable: false, orient: "horizontal", left: "center", bottom: 0,
      itemHeight: 120, text: ["100% ok", "0%"], inRange: { color: [COLORS.failed, "#f3d36b", COLORS.succeeded] } },
    calendar: { range: [start < floor ? floor : start, end], cellSize: ["auto", 13], top: 25, left: 40, right: 10,
      itemStyle: { color: "#eef0f3", borderColor: "#fff" }, splitLine: { show: false }, yearLabel: { show: false } },
    series: [{ type: "heatmap", coordinateSystem: "calendar", data }],
  };
}

// Runs per minute by outcome (GET /stats), stacked.
export function perMinute(stats) {
  const minutes = stats.per_minute.map((m) => m.minute.slice(11, 16));
  const outcome = (name) => ({ type: "bar", stack: "runs", name, itemStyle: { color: COLORS[name] },
    data: stats.per_minute.map((m) => m[name]) });
  return {
    legend: { top: 0 },
    grid: { left: 45, right: 15, top: 30, bottom: 30 },
    tooltip: tooltip((p) => `${p.name} ${p.seriesName}: ${p.value}`),
    xAxis: { type: "category", data: minutes, axisLabel: { hideOverlap: true } },
    yAxis: { type: "value", minInterval: 1 },
    series: ["succeeded", "failed", "dead", "cancelled"].map(outcome),
  };
}
