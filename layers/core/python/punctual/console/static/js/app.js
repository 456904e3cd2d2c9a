// The console's router: /console/ (jobs), /console/jobs/<id>, /console/runs/<id>, /console/ops,
// /console/calendars and /console/calendars/<name>.
// Navigation keeps the URL fragment (the credential) and re-renders the view in place.
import { signedIn } from "./api.js";
import { disposeAll } from "./charts.js";
import { errorBox, h, show } from "./dom.js";
import { calendarsView, calendarView } from "./views/calendars.js";
import { jobView } from "./views/job.js";
import { jobsView } from "./views/jobs.js";
import { opsView } from "./views/ops.js";
import { runView } from "./views/run.js";

const view = document.getElementById("view");
let rendering = 0;

export function navigate(path) {
  history.pushState(null, "", path + location.hash);
  render();
}

async function render() {
  const ticket = (rendering += 1);
  disposeAll();
  const path = location.pathname.replace(/^\/console/, "").replace(/\/+$/, "") || "/";
  const params = new URLSearchParams(location.search);
  const match = (re) => path.match(re);
  const ctx = { view, params, navigate, rerender: render, current: () => ticket === rendering };
  show(view, h("p", { class: "muted" }, "Loading…"));
  try {
    let m;
    if (path === "/") await jobsView(ctx);
    else if ((m = match(/^\/jobs\/([^/]+)$/))) await jobView(ctx, decodeURIComponent(m[1]));
    else if ((m = match(/^\/runs\/([^/]+)$/))) await runView(ctx, decodeURIComponent(m[1]));
    else if (path === "/ops") await opsView(ctx);
    else if (path === "/calendars") await calendarsView(ctx);
    else if ((m = match(/^\/calendars\/([^/]+)$/))) await calendarView(ctx, decodeURIComponent(m[1]));
    else show(view, h("h1", {}, "Not found"), h("p", {}, "No such page in the console."));
    document.body.dataset.view = path === "/" ? "jobs" : path.split("/")[1];
  } catch (error) {
    if (ticket !== rendering) return;
    const hint = error.status === 401 && !signedIn
      ? h("div", { class: "notice" }, "Open the console with the link `punctual dev` or `punctual console` printed (it carries the key).")
      : null;
    show(view, errorBox(error), hint);
  }
}

document.addEventListener("click", (event) => {
  const anchor = event.target.closest("a[data-nav]");
  if (!anchor || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  navigate(anchor.getAttribute("href").split("#")[0]);
});
window.addEventListener("popstate", render);
document.getElementById("who").textContent = signedIn ? "signed in" : "not signed in";
render();
