// The run timeline as a Gantt of attempts: one row per run (newest at the top), on a time axis
// whose ticks ECharts puts on round times. In a run's row a thin grey bar is the wait from its
// scheduled time to its first attempt; each attempt is a bar from its start to its end (or now),
// coloured by outcome, with a run's attempts stacked in lanes of its row so that retries show as
// steps. A bar is at least 3 px wide, so a 40 ms attempt on a day's axis still shows.
// Drawn by an ECharts custom series: each data item is one bar, [row, start, end, lane, lanes, kind].
import { COLORS, tooltip } from "./charts.js";
import { duration, lateness, ms, when } from "./format.js";

const WAIT = "#c9ced8";
const ROWS = 25; // rows in view at once; the rest scroll
const KIND_WAIT = 0;
const KIND_ATTEMPT = 1;
const KIND_MARK = 2; // a run closed without an attempt (skipped, cancelled): a dot at its time

// The bars of `runs` (any order) at `now`, and which run each bar belongs to.
export function ganttBars(runs, now) {
  const ordered = [...runs].sort((a, b) => ms(a.scheduled_at) - ms(b.scheduled_at));
  const bars = [];
  const owners = [];
  ordered.forEach((run, row) => {
    const attempts = run.attempts.filter((a) => a.started_at);
    const firstStart = attempts.length ? ms(attempts[0].started_at) : null;
    const waitEnd = firstStart ?? (OPEN_STATES.has(run.state) ? now : null);
    if (waitEnd !== null && waitEnd > ms(run.scheduled_at)) {
      bars.push(bar(row, ms(run.scheduled_at), waitEnd, 0, 1, KIND_WAIT, WAIT));
      owners.push(run);
    }
    attempts.forEach((attempt, lane) => {
      const end = attempt.finished_at ? ms(attempt.finished_at) : now;
      bars.push(bar(row, ms(attempt.started_at), end, lane, attempts.length, KIND_ATTEMPT, colorOf(attempt, run)));
      owners.push(run);
    });
    if (!attempts.length && !OPEN_STATES.has(run.state)) {
      bars.push(bar(row, ms(run.scheduled_at), ms(run.scheduled_at), 0, 1, KIND_MARK, COLORS[run.state] || WAIT));
      owners.push(run);
    }
  });
  return { ordered, bars, owners };
}

const OPEN_STATES = new Set(["scheduled", "running", "retrying", "accepted"]);

function bar(row, start, end, lane, lanes, kind, color) {
  return { value: [row, start, Math.max(start, end), lane, lanes, kind], itemStyle: { color } };
}

function colorOf(attempt, run) {
  if (!attempt.finished_at && run.state === "running") return COLORS.running;
  return COLORS[attempt.outcome] || WAIT;
}

export function gantt(runs, now) {
  const { ordered, bars, owners } = ganttBars(runs, now);
  const starts = bars.map((b) => b.value[1]);
  const ends = bars.map((b) => b.value[2]);
  const lo = starts.length ? Math.min(...starts) : now - 60_000;
  const hi = Math.max(lo + 1_000, ...ends);
  const pad = Math.min(3_600_000, Math.max(500, (hi - lo) * 0.02)); // room at both ends, at most an hour
  const firstShown = ordered.length > ROWS ? ms(ordered[ordered.length - ROWS].scheduled_at) : lo;
  return {
    grid: { left: 118, right: 24, top: 10, bottom: 58 },
    tooltip: tooltip((p) => barTooltip(owners[p.dataIndex], p.value, now)),
    xAxis: { type: "time", min: lo - pad, max: hi + pad, axisLabel: { hideOverlap: true, fontSize: 11 },
      splitLine: { show: true, lineStyle: { color: "#eef0f3" } } },
    yAxis: { type: "category", inverse: true, data: [...ordered].map((r) => rowLabel(r)).reverse(),
      axisLabel: { fontSize: 11 }, axisTick: { show: false } },
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "weakFilter", startValue: firstShown - pad, endValue: hi + pad },
      { type: "slider", xAxisIndex: 0, filterMode: "weakFilter", height: 16, bottom: 8, startValue: firstShown - pad,
        endValue: hi + pad, labelFormatter: "" },
      ...(ordered.length > ROWS ? [{ type: "slider", yAxisIndex: 0, right: 2, width: 12, startValue: 0, endValue: ROWS - 1 }] : []),
    ],
    series: [{
      type: "custom", name: "attempts", renderItem: renderBar, encode: { x: [1, 2], y: 0 },
      // rows are drawn newest first: a bar's row counts from the newest run
      data: bars.map((b) => ({ ...b, value: [ordered.length - 1 - b.value[0], ...b.value.slice(1)] })),
    }],
  };
}

function rowLabel(run) {
  const at = when(run.scheduled_at);
  return `${at.slice(5, 10)} ${at.slice(11, 19)}`;
}

function renderBar(params, api) {
  const row = api.value(0);
  const from = api.coord([api.value(1), row]);
  const to = api.coord([api.value(2), row]);
  const band = api.size([0, 1])[1] * 0.72;
  const lanes = Math.max(1, api.value(4));
  const kind = api.value(5);
  const top = from[1] - band / 2;
  const style = api.style();
  if (kind === KIND_MARK) {
    return { type: "circle", shape: { cx: from[0], cy: from[1], r: 4 }, style };
  }
  const height = kind === KIND_WAIT ? Math.max(2, band * 0.22) : band / lanes - (lanes > 1 ? 1 : 0);
  const y = kind === KIND_WAIT ? from[1] - height / 2 : top + api.value(3) * (band / lanes);
  const shape = window.echarts.graphic.clipRectByRect(
    { x: from[0], y, width: Math.max(3, to[0] - from[0]), height },
    { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height },
  );
  return shape && { type: "rect", shape, style };
}

function barTooltip(run, value, now) {
  if (!run) return "";
  const lines = [`${run.state} · ${run.trigger} · scheduled ${when(run.scheduled_at)}`];
  if (value[5] === KIND_WAIT) {
    const waiting = OPEN_STATES.has(run.state) && run.note && run.note.startsWith("waiting: ");
    lines.push(waiting ? `${run.note} (for ${duration(value[2] - value[1])} so far)`
      : `waited ${duration(value[2] - value[1])} before its first attempt`);
  }
  if (value[5] === KIND_ATTEMPT) {
    const attempt = run.attempts.filter((a) => a.started_at)[value[3]];
    lines.push(`attempt ${attempt.number}: ${attempt.finished_at ? attempt.outcome : "running"}, ${duration(value[2] - value[1])}`);
  }
  const late = lateness(run);
  if (late !== null) lines.push(`started ${duration(late)} after its time`);
  if (run.note && value[5] === KIND_MARK) lines.push(run.note);
  lines.push(`run took ${duration(runDuration(run, now))}`);
  return lines.join("\n");
}

// From the first attempt's start to the last one's end (or now, while running); null before a start.
export function runDuration(run, now) {
  const started = run.attempts.filter((a) => a.started_at);
  if (!started.length) return null;
  const last = started[started.length - 1];
  if (run.state === "accepted") return now - ms(started[0].started_at); // its target still works on it
  const end = last.finished_at ? ms(last.finished_at) : (run.state === "running" ? now : ms(run.finished_at) ?? now);
  return end - ms(started[0].started_at);
}
