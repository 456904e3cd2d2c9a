// The caller's limits and usage (GET /limits, when the API offers it): one row per limit, and the
// usage of each limit that is set as a share of it.
import { chart } from "./charts.js";
import { h } from "./dom.js";

const ROWS = [
  ["Jobs (active + paused)", "max_jobs", "live_jobs"],
  ["Runs executing at once", "max_concurrency", "running"],
  ["Run starts per minute", "max_runs_per_minute", "runs_this_minute"],
  ["API requests per second", "api_requests_per_second", null],
];

export function limitsSection(body) {
  const limits = body.limits || {};
  const usage = body.usage || {};
  const el = h("div", { class: "chart short", id: "limits-chart" });
  const shown = ROWS.filter(([, limit, used]) => used && limits[limit] !== null && limits[limit] !== undefined);
  const section = [
    h("h2", {}, "Limits and usage"),
    h("table", { id: "limits" },
      h("thead", {}, h("tr", {}, ["", "Limit", "Now"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ROWS.map(([label, limit, used]) => h("tr", { "data-limit": limit },
        h("td", {}, label),
        h("td", {}, limits[limit] === null || limits[limit] === undefined ? "none" : String(limits[limit])),
        h("td", {}, used && usage[used] !== null && usage[used] !== undefined ? String(usage[used]) : "—"))))),
    shown.length ? h("div", { class: "panel" }, el) : null,
  ];
  const draw = () => shown.length && chart(el, {
    grid: { left: 170, right: 30, top: 10, bottom: 25 },
    xAxis: { type: "value", max: 100, axisLabel: { formatter: "{value}%" } },
    yAxis: { type: "category", data: shown.map(([label]) => label) },
    series: [{ type: "bar", data: shown.map(([, limit, used]) => Math.round((100 * (usage[used] || 0)) / limits[limit])),
      itemStyle: { color: "#3b82f6" }, label: { show: true, position: "right", formatter: "{c}%" } }],
  });
  return { section, draw };
}
