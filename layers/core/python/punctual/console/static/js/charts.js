// Chart options for Apache ECharts (vendor/echarts.min.js): every chart is drawn by ECharts from a
// declarative option. Tooltips use ECharts' richText mode (drawn on the canvas, never HTML), so
// nothing a user typed can become markup through a chart either.
import { lateness, percentile } from "./format.js";

export const COLORS = {
  succeeded: "#2e9d5b", failed: "#d64541", timeout: "#d64541", dead: "#7a1f1f", dead_lettered: "#7a1f1f",
  cancelled: "#9aa0a6", lease_expired: "#f0a030", running: "#3b82f6", scheduled: "#93b4f5", retrying: "#f0a030",
  accepted: "#8b6bd6",
};
const WAIT = "#dfe3ea";
const live = new Set();

// Render `option` into `el` (again: a live refresh replaces the option and the click handler);
// the instance is disposed when the view changes (disposeAll).
export function chart(el, option, onClick) {
  let instance = window.echarts.getInstanceByDom(el);
  if (!instance) {
    instance = window.echarts.init(el, null, { renderer: "canvas" });
    live.add(instance);
  }
  instance.setOption({ animation: false, ...option }, { notMerge: true });
  instance.off("click");
  if (onClick) instance.on("click", onClick);
  return instance;
}

export function disposeAll() {
  for (const instance of live) instance.dispose();
  live.clear();
}

// Dispose the charts inside `container` (a section about to be redrawn without them).
export function disposeWithin(container) {
  for (const instance of [...live]) {
    if (container.contains(instance.getDom())) {
      instance.dispose();
      live.delete(instance);
    }
  }
}

window.addEventListener("resize", () => live.forEach((instance) => instance.resize()));

export const tooltip = (formatter) => ({ trigger: "item", renderMode: "richText", formatter, confine: true });

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

// Outcomes by day: the share of a day's finished runs that succeeded, on a calendar that spans the
// job's life (from its creation or its oldest run shown, at most a year) up to today, its cells
// sized to fit `width` px (a week-old job gets wide cells, not five empty months).
export function calendar(runs, now, bornAt, width) {
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
  const floor = new Date(now - 364 * 86_400_000).toISOString().slice(0, 10);
  const born = new Date(Math.min(bornAt, now)).toISOString().slice(0, 10);
  const start = [born, ...days.keys()].sort()[0];
  const first = start < floor ? floor : start;
  const weeks = Math.ceil((Date.parse(end) - Date.parse(first)) / (7 * 86_400_000)) + 2;
  const cell = Math.max(9, Math.min(18, Math.floor((width - 60) / weeks)));
  const data = [...days.entries()].map(([day, t]) => [day, Math.round((100 * t.ok) / t.all), t.all]);
  return {
    tooltip: tooltip((p) => `${p.value[0]}: ${p.value[1]}% of ${p.value[2]} runs succeeded`),
    visualMap: { min: 0, max: 100, dimension: 1, calculable: false, orient: "horizontal", left: "center", bottom: 0,
      itemHeight: 120, text: ["100% ok", "0%"], inRange: { color: [COLORS.failed, "#f3d36b", COLORS.succeeded] } },
    calendar: { range: [first, end], cellSize: [cell, cell], top: 25, left: 40,
      itemStyle: { color: "#eef0f3", borderColor: "#fff" }, splitLine: { show: false }, yearLabel: { show: false } },
    series: [{ type: "heatmap", coordinateSystem: "calendar", data }],
  };
}

// Runs by outcome per bucket of the window (GET /stats: a minute, or coarser for long windows), stacked.
export function perMinute(stats) {
  const bucket = stats.bucket_minutes || 1;
  const label = (iso) => (bucket >= 60 ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16));
  const outcome = (name) => ({ type: "bar", stack: "runs", name, itemStyle: { color: COLORS[name] },
    data: stats.per_minute.map((m) => m[name]) });
  return {
    legend: { top: 0 },
    grid: { left: 45, right: 15, top: 30, bottom: 30 },
    tooltip: tooltip((p) => `${p.name} ${p.seriesName}: ${p.value}`),
    xAxis: { type: "category", data: stats.per_minute.map((m) => label(m.minute)), axisLabel: { hideOverlap: true } },
    yAxis: { type: "value", minInterval: 1 },
    series: ["succeeded", "failed", "dead", "cancelled"].map(outcome),
  };
}
