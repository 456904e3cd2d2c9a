// Calendars: the owner's list (GET /calendars) and one calendar (GET /calendars/<name>, with its
// based_on chain): its rules, and the next three months with the days it excludes marked. The marks
// follow the rules as written; the scheduler decides from the same rules when it claims a job.
import { get } from "../api.js";
import { h, link, show } from "../dom.js";
import { when } from "../format.js";

const MONTHS_SHOWN = 3;
const MAX_CHAIN = 5;
const WEEKDAYS = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];

export async function calendarsView(ctx) {
  const listed = await get("/calendars");
  if (!ctx.current()) return;
  const rows = listed.items.map((c) => h("tr", { "data-calendar": c.name },
    h("td", { class: "name", "data-label": "Name" }, link(`/console/calendars/${encodeURIComponent(c.name)}`, c.name)),
    h("td", { "data-label": "Time zone" }, c.timezone), h("td", { "data-label": "Based on" }, c.based_on || "—"),
    h("td", { "data-label": "Excludes" }, summary(c)), h("td", { "data-label": "Updated" }, when(c.updated_at))));
  show(ctx.view, h("h1", {}, "Calendars"),
    rows.length
      ? h("table", { id: "calendars", class: "stack" },
        h("thead", {}, h("tr", {}, ["Name", "Time zone", "Based on", "Excludes", "Updated"].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No calendars yet: create one with PUT /calendars/{name} or `punctual calendars set`."));
}

export async function calendarView(ctx, name) {
  const chain = [await get(`/calendars/${encodeURIComponent(name)}`)];
  while (chain.length < MAX_CHAIN && chain[chain.length - 1].based_on) {
    const base = chain[chain.length - 1].based_on;
    if (chain.some((c) => c.name === base)) break;
    chain.push(await get(`/calendars/${encodeURIComponent(base)}`));
  }
  if (!ctx.current()) return;
  const [calendar] = chain;
  show(ctx.view,
    h("p", {}, link("/console/calendars", "← Calendars")),
    h("h1", { id: "calendar-name" }, calendar.name),
    calendar.description ? h("p", { class: "muted" }, calendar.description) : null,
    h("dl", { class: "facts" }, [
      ["Time zone", calendar.timezone], ["Based on", chain.slice(1).map((c) => c.name).join(" → ") || "—"],
      ["Excluded weekdays", calendar.exclude_weekdays.join(", ") || "—"],
      ["Excluded dates", calendar.exclude_dates.join(", ") || "—"],
      ["Excluded ranges", calendar.exclude_ranges.map((r) => `${r.start} to ${r.end}`).join(", ") || "—"],
      ["Only these days", calendar.include_only === null ? "—" : `${calendar.include_only.length} listed`],
      ["Version", `${calendar.version} (updated ${when(calendar.updated_at)})`],
    ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, `The next ${MONTHS_SHOWN} months (excluded days marked; dates in ${calendar.timezone})`),
    h("div", { class: "months", id: "calendar-grid" }, nextMonths().map(([y, m]) => month(y, m, chain))));
}

// Why a date is excluded by the chain (null: a business day), as the calendar's rules say.
function excluded(iso, weekday, chain) {
  for (const c of chain) {
    if (c.exclude_dates.includes(iso)) return `${c.name}: excluded date`;
    if (c.exclude_weekdays.includes(WEEKDAYS[weekday])) return `${c.name}: excluded weekday`;
    if (c.exclude_ranges.some((r) => r.start <= iso && iso <= r.end)) return `${c.name}: excluded range`;
    if (c.include_only !== null && !c.include_only.includes(iso)) return `${c.name}: not an include_only day`;
  }
  return null;
}

function month(year, monthIndex, chain) {
  const first = new Date(Date.UTC(year, monthIndex, 1));
  const days = new Date(Date.UTC(year, monthIndex + 1, 0)).getUTCDate();
  const cells = Array((first.getUTCDay() + 6) % 7).fill(null);
  for (let d = 1; d <= days; d += 1) cells.push(d);
  const weeks = [];
  for (let i = 0; i < cells.length; i += 7) weeks.push(cells.slice(i, i + 7));
  return h("div", { class: "month panel" },
    h("strong", {}, first.toISOString().slice(0, 7)),
    h("table", {}, h("thead", {}, h("tr", {}, WEEKDAYS.map((w) => h("th", {}, w.slice(0, 2))))),
      h("tbody", {}, weeks.map((week) => h("tr", {}, week.map((d, i) => {
        if (d === null) return h("td", {});
        const iso = `${first.toISOString().slice(0, 8)}${String(d).padStart(2, "0")}`;
        const why = excluded(iso, i, chain);
        return h("td", { class: why ? "excluded" : "", title: why || "business day", "data-date": iso }, String(d));
      }))))));
}

function nextMonths() {
  const now = new Date();
  return Array.from({ length: MONTHS_SHOWN }, (_, i) => {
    const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + i, 1));
    return [d.getUTCFullYear(), d.getUTCMonth()];
  });
}

function summary(c) {
  const parts = [`${c.exclude_dates.length} dates`, `${c.exclude_ranges.length} ranges`];
  if (c.exclude_weekdays.length) parts.push(c.exclude_weekdays.join(","));
  if (c.include_only !== null) parts.push(`only ${c.include_only.length} days`);
  return parts.join(" · ");
}
