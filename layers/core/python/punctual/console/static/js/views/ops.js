// Operations: GET /stats (aggregated by the engine): dispatch lateness p50/p99 over the last hour,
// runs per minute by outcome, queue depth, dead letters and clock skew; per-tenant limits and usage
// when the API offers GET /limits. A deployment without run counters (-c stats_counters=false)
// answers runs_counted=false with the run figures null: the page says so and shows the rest.
import { get, offers } from "../api.js";
import { chart, histogram, perMinute } from "../charts.js";
import { card, h, show } from "../dom.js";
import { duration } from "../format.js";
import { limitsSection } from "../limits.js";

export async function opsView(ctx) {
  const minutes = Number(ctx.params.get("minutes")) || 60;
  const stats = await get(`/stats?minutes=${minutes}`);
  const limits = (await offers("/limits")) ? limitsSection(await get("/limits")) : null;
  if (!ctx.current()) return;
  const counted = stats.runs_counted !== false && stats.totals !== null;
  const finished = counted ? Object.values(stats.totals).reduce((a, b) => a + b, 0) : null;
  const minuteEl = h("div", { class: "chart", id: "per-minute" });
  const latenessEl = h("div", { class: "chart", id: "ops-lateness" });
  const bound = (v) => (v === null ? "—" : `≤ ${duration(v)}`);
  const notCounted = "not counted";
  const runCharts = counted
    ? h("div", { class: "grid2" },
      h("div", {}, h("h2", {}, "Runs per minute by outcome"), h("div", { class: "panel" }, minuteEl)),
      h("div", {}, h("h2", {}, "Start lateness"), h("div", { class: "panel" }, latenessEl)))
    : h("p", { class: "muted", "data-testid": "ops-not-counted" },
      "This deployment keeps no run counters (stats_counters=false, to save a write unit per run):"
      + " runs per minute and start lateness are not counted here. CloudWatch's dashboard has the"
      + " lateness and outcome metrics.");
  show(ctx.view,
    h("h1", {}, `Operations · last ${minutes} minutes`),
    h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => ctx.rerender() }, "Refresh"),
      h("span", { class: "muted" }, `${stats.since.slice(11, 16)}–${stats.until.slice(11, 16)} UTC`)),
    h("div", { class: "cards" },
      card("Start lateness p50", counted ? bound(stats.lateness.p50_ms) : notCounted, "ops-p50"),
      card("Start lateness p99", counted ? bound(stats.lateness.p99_ms) : notCounted, "ops-p99"),
      card("Runs finished", counted ? String(finished) : notCounted, "ops-finished"),
      card("Queue depth", stats.queue.depth ?? "—", "ops-depth"),
      card("Dead letters", stats.queue.dead_letters ?? "—", "ops-dead-letters"),
      card("Clock skew", stats.clock_skew_ms === null ? "none (one clock)" : duration(stats.clock_skew_ms), "ops-skew")),
    runCharts,
    limits ? limits.section : null);
  if (counted) {
    chart(minuteEl, perMinute(stats));
    chart(latenessEl, histogram(stats.lateness.buckets.map((b) => b.count), `${stats.lateness.count} started runs`));
  }
  if (limits) limits.draw();
}
