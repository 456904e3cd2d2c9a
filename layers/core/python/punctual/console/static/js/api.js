// The public HTTP API, called from this origin. The credential comes from the URL fragment
// (#key=...), which browsers never send to a server; it is kept in memory only (no cookie, no
// storage), and the fragment is carried along on navigation so a reload keeps working.
// Locally it is the API key; behind `punctual console` it is the signing proxy's session token.

const fragment = new URLSearchParams(location.hash.slice(1));
const key = fragment.get("key");

export const signedIn = Boolean(key);

// What the API made of the credential: "unknown" until an answer, then "accepted" or "refused"
// (a 401: a key from an earlier `punctual dev`, a mistyped link). Announced as a "punctual:auth"
// event on window so the header can say it.
let credential = "unknown";
export const credentialState = () => credential;

function judged(state) {
  if (state === credential) return;
  credential = state;
  window.dispatchEvent(new CustomEvent("punctual:auth", { detail: state }));
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(method, path, body, extraHeaders = {}) {
  const headers = { ...extraHeaders, Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) judged("refused");
  else if (response.status < 500 && !path.startsWith("/openapi.json")) judged("accepted");
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = data && data.message ? data.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, `${message} (${method} ${path.split("?")[0]})`);
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path) => api("POST", path);
export const del = (path) => api("DELETE", path);

// Every page of a listing, up to maxItems (the API pages at most 100 items).
export async function pages(path, maxItems) {
  const items = [];
  let cursor = null;
  while (items.length < maxItems) {
    const sep = path.includes("?") ? "&" : "?";
    const limit = Math.min(100, maxItems - items.length);
    const page = await get(`${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    items.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return items;
}

export function fragmentSuffix() {
  return location.hash;
}

// Which optional routes this API offers (GET /limits, GET /jobs/{id}/graph), from its public
// OpenAPI document: asked once, so the console never probes routes that are not there.
let documentPaths = null;
export async function offers(template) {
  if (documentPaths === null) {
    documentPaths = get("/openapi.json").then((doc) => new Set(Object.keys(doc.paths || {}))).catch(() => new Set());
  }
  return (await documentPaths).has(template);
}
