// Operations: GET /stats over a window the user picks (an hour to 7 days; the API answers windows
// over 6 h in coarser buckets): the caller's own backlog (due runs waiting and executing now),
// start lateness p50/p99, runs by outcome per bucket; the deployment's queue depth and dead letters
// only when the API answers them (to operators); per-tenant limits and usage when the API offers
// GET /limits. A deployment without run counters (-c stats_counters=false) answers
// runs_counted=false with the run figures null: the page says so and shows the rest. Live.
import { get, offers } from "../api.js";
import { chart, disposeWithin, histogram, perMinute } from "../charts.js";
import { card, h, show } from "../dom.js";
import { duration } from "../format.js";
import { limitsSection } from "../limits.js";
import { live } from "../live.js";

export const WINDOWS = [[60, "1 hour"], [360, "6 hours"], [1440, "24 hours"], [10080, "7 days"]];
const MAX_MINUTES = 10080;
const LIVE_MS = 5_000;

export function windowLabel(minutes) {
  const named = WINDOWS.find(([m]) => m === minutes);
  if (named) return named[1];
  return minutes % 60 === 0 ? `${minutes / 60} hours` : `${minutes} minutes`;
}

export async function opsView(ctx) {
  const asked = Math.round(Number(ctx.params.get("minutes")));
  const minutes = Number.isFinite(asked) && asked >= 1 ? Math.min(asked, MAX_MINUTES) : 60;
  const read = async () => {
    const stats = await get(`/stats?minutes=${minutes}`);
    const limits = (await offers("/limits")) ? await get("/limits") : null;
    return { stats, limits };
  };
  let figures = await read();
  if (!ctx.current()) return;
  const picker = h("select", { id: "ops-window", "aria-label": "Window" },
    [...WINDOWS, ...(WINDOWS.some(([m]) => m === minutes) ? [] : [[minutes, windowLabel(minutes)]])]
      .map(([m, label]) => h("option", { value: String(m), selected: m === minutes }, `last ${label}`)));
  picker.addEventListener("change", () => ctx.navigate(`/console/ops?minutes=${picker.value}`));
  const span = h("span", { class: "muted", id: "ops-span" });
  const body = h("div", { id: "ops-body" });
  const minuteEl = h("div", { class: "chart", id: "per-minute" });
  const latenessEl = h("div", { class: "chart", id: "ops-lateness" });
  const draw = () => {
    const { stats, limits } = figures;
    span.textContent = `${stats.since.slice(5, 16).replace("T", " ")} – ${stats.until.slice(5, 16).replace("T", " ")} UTC`;
    const counted = stats.runs_counted !== false && stats.totals !== null;
    const limitsPart = limits ? limitsSection(limits) : null;
    disposeWithin(body);
    body.replaceChildren(...[cards(stats, counted), runCharts(stats, counted, minuteEl, latenessEl),
      limitsPart ? limitsPart.section : null].flat().filter(Boolean));
    if (counted) {
      chart(minuteEl, perMinute(stats));
      chart(latenessEl, histogram(stats.lateness.buckets.map((b) => b.count), `${stats.lateness.count} started runs`));
    }
    if (limitsPart) limitsPart.draw();
  };
  show(ctx.view,
    h("h1", {}, `Operations · last ${windowLabel(minutes)}`),
    h("div", { class: "toolbar" }, picker, span), body);
  draw();
  live(async () => {
    const fresh = await read();
    if (!ctx.current()) return;
    figures = fresh;
    draw();
  }, minutes > 1440 ? 6 * LIVE_MS : LIVE_MS);
}

function cards(stats, counted) {
  const bound = (v) => (v === null ? "—" : `≤ ${duration(v)}`);
  const notCounted = "not counted";
  const finished = counted ? Object.values(stats.totals).reduce((a, b) => a + b, 0) : null;
  const own = stats.open_runs;
  const atLeast = own && !own.complete ? "≥ " : "";
  return h("div", { class: "cards" },
    card("Your runs waiting now", own ? `${atLeast}${own.waiting}` : notCounted, "ops-waiting"),
    card("Your runs executing now", own ? `${atLeast}${own.executing}` : notCounted, "ops-executing"),
    card("Start lateness p50", counted ? bound(stats.lateness.p50_ms) : notCounted, "ops-p50"),
    card("Start lateness p99", counted ? bound(stats.lateness.p99_ms) : notCounted, "ops-p99"),
    card("Runs finished", counted ? String(finished) : notCounted, "ops-finished"),
    stats.queue ? card("Queue depth (deployment)", stats.queue.depth ?? "—", "ops-depth") : null,
    stats.queue ? card("Dead letters (deployment)", stats.queue.dead_letters ?? "—", "ops-dead-letters") : null,
    card("Clock skew", stats.clock_skew_ms === null ? "none (one clock)" : duration(stats.clock_skew_ms), "ops-skew"));
}

function runCharts(stats, counted, minuteEl, latenessEl) {
  if (!counted) {
    return h("p", { class: "muted", "data-testid": "ops-not-counted" },
      "This deployment keeps no run counters (stats_counters=false, to save a write unit per run):"
      + " runs per minute and start lateness are not counted here. CloudWatch's dashboard has the"
      + " lateness and outcome metrics.");
  }
  const bucket = stats.bucket_minutes || 1;
  const per = bucket === 1 ? "minute" : bucket === 60 ? "hour" : `${bucket} minutes`;
  return h("div", { class: "grid2" },
    h("div", {}, h("h2", {}, `Runs per ${per} by outcome`), h("div", { class: "panel" }, minuteEl)),
    h("div", {}, h("h2", {}, "Start lateness"), h("div", { class: "panel" }, latenessEl)));
}
