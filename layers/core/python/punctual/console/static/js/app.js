// The console's router: /console/ (jobs), /console/jobs/<id>, /console/runs/<id>, /console/ops,
// /console/calendars and /console/calendars/<name>.
// Navigation keeps the URL fragment (the credential) and re-renders the view in place.
import { credentialState, signedIn } from "./api.js";
import { disposeAll } from "./charts.js";
import { errorBox, h, show } from "./dom.js";
import { stop } from "./live.js";
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
  stop();
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
    if (error.status === 401) show(view, signInHelp());
    else show(view, errorBox(error));
  }
}

// A 401: say whether the link carried no key or a key the API refused, and how to get the right link.
function signInHelp() {
  const refused = signedIn;
  return h("div", { class: "error", role: "alert", id: "sign-in-help" },
    h("strong", {}, refused ? "The key in this link was refused." : "This link carries no key."),
    h("p", {}, refused
      ? "The API did not accept it: it may be from an earlier run of `punctual dev` (each run makes a new key),"
        + " or the link was cut short when it was copied."
      : "The console signs its API calls with the key in the link's #key=… part, which stays in your browser."),
    h("p", {}, "Open the `Console:` link that `punctual dev` (or `punctual api`) printed when it started;"
      + " for a deployed stack, run `punctual console --api-url <your API URL>` and open the link it prints."));
}

const who = document.getElementById("who");
function sayWho() {
  const state = credentialState();
  who.dataset.state = !signedIn ? "none" : state;
  who.textContent = !signedIn ? "not signed in" : state === "refused" ? "key refused" : state === "accepted" ? "signed in" : "signing in…";
}
window.addEventListener("punctual:auth", sayWho);

document.addEventListener("click", (event) => {
  const anchor = event.target.closest("a[data-nav]");
  if (!anchor || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  navigate(anchor.getAttribute("href").split("#")[0]);
});
// A new link pasted into the same tab may differ only in its fragment (the key): browsers do not
// load the page again for that, and the key is read once, so reload to sign in with the new one.
const signedWith = location.hash;
window.addEventListener("popstate", () => (location.hash === signedWith ? render() : location.reload()));
window.addEventListener("hashchange", () => location.hash === signedWith || location.reload());
sayWho();
render();
