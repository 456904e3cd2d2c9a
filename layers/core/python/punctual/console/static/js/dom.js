// Building the page with DOM calls only: text goes in as text nodes (never parsed as HTML), so a job
// name or a response excerpt can never become markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function link(path, ...children) {
  return h("a", { href: path + location.hash, "data-nav": "" }, ...children);
}

export function state(value) {
  return h("span", { class: `state ${String(value).replace(/[^a-z_]/g, "")}` }, value);
}

export function card(label, value, testid) {
  return h("div", { class: "card", "data-testid": testid }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value));
}

export function show(view, ...children) {
  view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

export function errorBox(error) {
  return h("div", { class: "error", role: "alert" }, String(error.message || error));
}

const dialog = () => document.getElementById("confirm");

// A modal confirmation (a <dialog>, not window.confirm, so that the page stays scriptable).
export function confirmAction(text) {
  const box = dialog();
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const yes = document.getElementById("confirm-yes");
    const no = document.getElementById("confirm-no");
    const done = (answer) => {
      yes.removeEventListener("click", onYes);
      no.removeEventListener("click", onNo);
      box.close();
      resolve(answer);
    };
    const onYes = () => done(true);
    const onNo = () => done(false);
    yes.addEventListener("click", onYes);
    no.addEventListener("click", onNo);
    box.showModal();
  });
}
