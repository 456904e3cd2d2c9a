// Live refresh: the open view's refresh() is polled, one call at a time, every `everyMs` while the
// tab is visible. A failed refresh backs off (doubling up to MAX_BACKOFF_MS); a hidden tab polls
// nothing and refreshes at once when it is shown again. The header's #live indicator says which
// of these holds: "Live" (with the time of the last update), "Paused" or "Retrying".
// Polling rather than SSE: the console adds no endpoint of its own, and API Gateway's REST APIs
// do not stream; a 5-10 s poll of the same public routes costs the API a few requests a minute.

const MAX_BACKOFF_MS = 60_000;
let current = null; // { refresh, everyMs, delay, timer, running }

const indicator = () => document.getElementById("live");

function say(state, text) {
  const el = indicator();
  if (!el) return;
  el.hidden = false;
  el.dataset.state = state;
  el.textContent = text;
}

function clock(date) {
  return date.toISOString().slice(11, 19);
}

// Poll `refresh` (an async function) for the view just rendered, every `every` ms (a number, or a
// function asked before each wait: a list that grows may poll less often); replaces any earlier poll.
export function live(refresh, every) {
  stop();
  const everyMs = typeof every === "function" ? every : () => every;
  current = { refresh, everyMs, delay: everyMs(), timer: null, running: false };
  if (document.hidden) say("paused", "Paused (tab hidden)");
  else say("live", `Live · ${clock(new Date())} UTC`);
  schedule();
}

// Stop polling (a view without live data, or the view is being replaced).
export function stop() {
  if (current && current.timer) clearTimeout(current.timer);
  current = null;
  const el = indicator();
  if (el) {
    el.hidden = true;
    el.dataset.state = "off";
  }
}

function schedule() {
  const poll = current;
  if (!poll || document.hidden) return;
  if (poll.timer) clearTimeout(poll.timer);
  poll.timer = setTimeout(() => tick(poll), poll.delay);
}

async function tick(poll) {
  poll.timer = null;
  if (poll !== current || document.hidden || poll.running) return;
  poll.running = true;
  try {
    await poll.refresh();
    if (poll !== current) return;
    poll.delay = poll.everyMs();
    say("live", `Live · ${clock(new Date())} UTC`);
  } catch (error) {
    if (poll !== current) return;
    poll.delay = Math.min(MAX_BACKOFF_MS, poll.delay * 2);
    say("retrying", `Retrying in ${Math.round(poll.delay / 1000)} s`);
    console.warn("live refresh failed:", error && error.message);
  } finally {
    poll.running = false;
  }
  if (poll === current) schedule();
}

document.addEventListener("visibilitychange", () => {
  if (!current) return;
  if (document.hidden) {
    if (current.timer) clearTimeout(current.timer);
    current.timer = null;
    say("paused", "Paused (tab hidden)");
  } else {
    current.delay = current.everyMs();
    tick(current); // shown again: refresh now, then poll as before
  }
});
