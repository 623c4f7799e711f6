// tickwork dashboard: progressive enhancement only. Every page works without this file.
const GLYPHS = {pending: "○", scheduled: "◷", queued: "≡", running: "▶", up_for_retry: "↻",
  success: "✓", failed: "✗", upstream_failed: "⤒", skipped: "»", cancelled: "⊘"};
const STATES = Object.keys(GLYPHS);

// Times: the server writes UTC; show the viewer's zone, keep UTC in the title (hover).
const fmt = new Intl.DateTimeFormat(undefined, {year: "numeric", month: "2-digit", day: "2-digit",
  hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"});
function localTimes(root) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const when = new Date(el.getAttribute("datetime"));
    if (!isNaN(when)) el.textContent = fmt.format(when);
  }
}

function setState(el, state) {
  for (const s of STATES) el.classList.remove("st-" + s);
  el.classList.add("st-" + state);
  el.dataset.state = state;
}

function badge(state) {
  const span = document.createElement("span");
  span.className = "st st-" + state;
  span.dataset.state = state;
  const g = document.createElement("span");
  g.className = "g"; g.setAttribute("aria-hidden", "true"); g.textContent = GLYPHS[state] || "•";
  span.append(g, " " + state.replaceAll("_", " "));
  return span;
}

function onState(data) {
  const runState = document.getElementById("run-state");
  if (runState && runState.firstElementChild?.dataset.state !== data.run) {
    runState.replaceChildren(badge(data.run));
  }
  for (const [task, [state, attempt]] of Object.entries(data.tasks)) {
    for (const el of document.querySelectorAll(`svg [data-task="${CSS.escape(task)}"]`)) {
      if (el.dataset.state !== state) {
        setState(el, state);
        const g = el.querySelector("text.g");
        if (g) g.textContent = GLYPHS[state] || "";
        const title = el.querySelector("title");
        if (title) title.textContent = `${task}, attempt ${attempt}, ${state.replaceAll("_", " ")}`;
      }
    }
    const row = document.querySelector(`#tasks tr[data-task="${CSS.escape(task)}"]`);
    if (row) {
      const cell = row.querySelector(".state-cell");
      if (cell && cell.firstElementChild?.dataset.state !== state) cell.replaceChildren(badge(state));
      const att = row.querySelector(".attempt");
      if (att) att.textContent = attempt;
    }
  }
}

function onLog(lines) {
  const pre = document.getElementById("log-lines");
  if (!pre) return;
  const search = (document.getElementById("log-search")?.value || "").toLowerCase();
  const frag = document.createDocumentFragment();
  for (const [, stream, text] of lines) {
    const span = document.createElement("span");
    span.className = "ln " + stream;
    span.textContent = text;
    if (search && !text.toLowerCase().includes(search)) span.classList.add("hidden");
    frag.append(span, "\n");
  }
  pre.append(frag);
  if (document.getElementById("follow")?.checked) pre.scrollTop = pre.scrollHeight;
}

// List pages: when the server says something changed, fetch the page again and swap <main>,
// unless the visitor is typing or has selected something there.
let refreshing = null;
function refreshMain() {
  if (refreshing) return;
  refreshing = setTimeout(async () => {
    refreshing = null;
    const main = document.getElementById("main");
    const active = document.activeElement;
    if (main.contains(active) && active.matches("input, select, textarea")) return;
    if (main.querySelector("input[type=checkbox]:checked")) return;
    const response = await fetch(location.href, {headers: {Accept: "text/html"}});
    if (!response.ok) return;
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById("main");
    if (fresh) { main.replaceChildren(...fresh.childNodes); enhance(main); }
  }, 250);
}

function live() {
  const url = document.body.dataset.live;
  const status = document.getElementById("live");
  if (!url || !window.EventSource) return;
  let source = null;
  const open = () => {
    source = new EventSource(url);
    source.onopen = () => { status.textContent = "live"; status.classList.add("on"); };
    source.onerror = () => { status.textContent = "live: reconnecting"; status.classList.remove("on"); };
    source.addEventListener("changed", refreshMain);
    source.addEventListener("state", (e) => onState(JSON.parse(e.data)));
    source.addEventListener("log", (e) => onLog(JSON.parse(e.data)));
    source.addEventListener("reset", () => location.reload());
  };
  open();
  // A hidden tab lets go of its stream after a minute and catches up when shown again.
  let hiddenTimer = null;
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      hiddenTimer = setTimeout(() => { source.close(); status.textContent = "live: paused"; }, 60000);
    } else {
      clearTimeout(hiddenTimer);
      if (source.readyState === EventSource.CLOSED) { open(); refreshMain(); }
    }
  });
}

function logSearch() {
  const input = document.getElementById("log-search");
  const pre = document.getElementById("log-lines");
  if (!input || !pre) return;
  input.addEventListener("input", () => {
    const q = input.value.toLowerCase();
    for (const ln of pre.querySelectorAll(".ln")) {
      ln.classList.toggle("hidden", q !== "" && !ln.textContent.toLowerCase().includes(q));
    }
  });
  pre.scrollTop = pre.scrollHeight;
}

function enhance(root) {
  localTimes(root);
  for (const form of root.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (e) => { if (!confirm(form.dataset.confirm)) e.preventDefault(); });
  }
  const all = root.querySelector("#select-all");
  if (all) all.addEventListener("change", () => {
    for (const box of root.querySelectorAll("input[name=task_run_id]")) box.checked = all.checked;
  });
}

function theme() {
  const button = document.getElementById("theme");
  if (!button) return;
  button.hidden = false;
  button.addEventListener("click", () => {
    const html = document.documentElement;
    const dark = html.dataset.theme ? html.dataset.theme === "dark"
      : matchMedia("(prefers-color-scheme: dark)").matches;
    html.dataset.theme = dark ? "light" : "dark";
    document.cookie = `tw_theme=${html.dataset.theme}; path=/; max-age=31536000; samesite=strict`;
  });
}

// Keys: "/" search, "g" then o/j/r/c/d/w/p/a to go to a page, arrows in the grid.
const GO = {o: "/", j: "/jobs", r: "/runs", c: "/calendar", d: "/dead-letters", w: "/workers",
  p: "/pools", a: "/audit"};
let pendingG = false;
function keys() {
  document.addEventListener("keydown", (e) => {
    if (e.target.matches("input, select, textarea") || e.ctrlKey || e.metaKey || e.altKey) return;
    if (pendingG && GO[e.key]) { location.href = GO[e.key]; return; }
    pendingG = e.key === "g";
    if (e.key === "/") {
      const field = document.querySelector("main input[type=search], main .filters input:not([type=hidden])");
      if (field) { e.preventDefault(); field.focus(); }
    }
    if (e.key === "t") document.getElementById("theme")?.click();
    const cell = e.target.closest?.("table.grid a.cell");
    if (cell && ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"].includes(e.key)) {
      e.preventDefault();
      moveInGrid(cell, e.key);
    }
  });
}

function moveInGrid(cell, key) {
  const td = cell.closest("td");
  const tr = td.parentElement;
  const col = [...tr.children].indexOf(td);
  let target = null;
  if (key === "ArrowLeft") target = td.previousElementSibling;
  if (key === "ArrowRight") target = td.nextElementSibling;
  if (key === "ArrowUp") target = tr.previousElementSibling?.children[col];
  if (key === "ArrowDown") target = tr.nextElementSibling?.children[col];
  target?.querySelector("a.cell")?.focus();
}

enhance(document);
theme();
keys();
logSearch();
live();
