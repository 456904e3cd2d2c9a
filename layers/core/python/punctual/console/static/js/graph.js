// The dependency graph of a job (GET /jobs/{id}/graph): upstream jobs to the left, the job in the
// middle, its dependents to the right, one column per step; edges say when a dependent is
// released; nodes are coloured by their newest run. Drawn by ECharts' graph series.
import { COLORS } from "./charts.js";

export function dependencyGraph(graph) {
  const jobs = new Map([graph.job, ...graph.upstream, ...graph.downstream].map((j) => [j.id, j]));
  const edges = graph.edges.filter((e) => jobs.has(e.upstream) && jobs.has(e.dependent));
  const column = new Map([[graph.job.id, 0]]);
  const queue = [graph.job.id];
  while (queue.length) { // steps from the job, up (negative) and down (positive) the edges
    const id = queue.shift();
    for (const e of edges) {
      const next = e.dependent === id && column.get(id) <= 0 ? [e.upstream, column.get(id) - 1]
        : e.upstream === id && column.get(id) >= 0 ? [e.dependent, column.get(id) + 1] : null;
      if (next && !column.has(next[0])) {
        column.set(next[0], next[1]);
        queue.push(next[0]);
      }
    }
  }
  graph.upstream.forEach((j) => column.has(j.id) || column.set(j.id, -1));
  graph.downstream.forEach((j) => column.has(j.id) || column.set(j.id, 1));
  const rows = new Map();
  const nodes = [...jobs.values()].map((job) => {
    const x = column.get(job.id);
    const row = rows.get(x) || 0;
    rows.set(x, row + 1);
    const self = job.id === graph.job.id;
    return {
      id: job.id, name: job.name, x: x * 260, y: row * 70, symbolSize: self ? 22 : 16,
      value: job.last_run_state || "no runs yet",
      itemStyle: { color: COLORS[job.last_run_state] || "#c4cad4", borderColor: self ? "#1d2330" : "#fff", borderWidth: 2 },
    };
  });
  return {
    tooltip: { trigger: "item", renderMode: "richText", confine: true,
      formatter: (p) => (p.dataType === "edge" ? `released when ${p.data.value}` : `${p.data.name}: ${p.data.value}`) },
    series: [{
      type: "graph", layout: "none", roam: true,
      label: { show: true, position: "bottom", fontSize: 12 },
      edgeSymbol: ["none", "arrow"], edgeSymbolSize: 9,
      edgeLabel: { show: true, formatter: (p) => p.data.value, fontSize: 11 },
      lineStyle: { color: "#8a93a3", width: 1.5 },
      data: nodes,
      links: edges.map((e) => ({ source: e.upstream, target: e.dependent, value: e.when })),
    }],
  };
}
