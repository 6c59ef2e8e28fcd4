// The web view's script: it fetches the server-rendered fragments under
// /ui/f/ with the token (kept in this tab's session storage), puts them in
// the page, turns times into relative ones, and sends cancellations and a
// queue's pause or resume through the API. Fragments are escaped by the server; nothing here builds HTML
// from data.
"use strict";

const tokenKey = "execstore.token";

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  const t = sessionStorage.getItem(tokenKey);
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}

// fragmentURL maps the page's address to its fragment: /ui/ and /ui/?q to
// /ui/f/executions?q, /ui/executions/ID to /ui/f/executions/ID.
function fragmentURL() {
  let path = location.pathname.replace(/^\/ui/, "");
  if (path === "" || path === "/") path = "/executions";
  return "/ui/f" + path + location.search;
}

async function fetchFragment(url) {
  const resp = await fetch(url, { headers: authHeaders(), cache: "no-store" });
  if (resp.status === 401) throw new Unauthorized();
  return resp.text();
}

class Unauthorized extends Error {}

async function load() {
  const main = document.getElementById("main");
  const overview = document.getElementById("overview");
  try {
    const [o, m] = await Promise.all([fetchFragment("/ui/f/overview"), fetchFragment(fragmentURL())]);
    overview.innerHTML = o;
    main.innerHTML = m;
  } catch (e) {
    if (e instanceof Unauthorized) {
      askToken(sessionStorage.getItem(tokenKey) !== null);
      return;
    }
    main.textContent = "The store could not be reached: " + e.message;
    return;
  }
  const page = main.querySelector("[data-now]");
  if (page) {
    const now = new Date(page.dataset.now);
    document.getElementById("store-time").textContent = "store time " + now.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    relativeTimes(document, now);
    document.title = (page.dataset.title ? page.dataset.title + " · " : "") + "execstore";
  }
  main.dataset.loaded = location.pathname + location.search;
}

// relativeTimes shows each <time> as "3 min ago" or "in 5 s" from the
// store's time, keeping the exact time as its tooltip.
function relativeTimes(root, now) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const t = new Date(el.getAttribute("datetime"));
    if (isNaN(t)) continue;
    el.textContent = relative((t - now) / 1000);
  }
}

function relative(s) {
  const a = Math.abs(s);
  let text;
  if (a < 1) return "now";
  if (a < 60) text = Math.round(a) + " s";
  else if (a < 3600) text = Math.round(a / 60) + " min";
  else if (a < 48 * 3600) text = Math.round(a / 3600) + " h";
  else text = Math.round(a / 86400) + " days";
  return s < 0 ? text + " ago" : "in " + text;
}

function navigate(href) {
  history.pushState(null, "", href);
  load();
}

function askToken(refused) {
  const dlg = document.getElementById("login");
  document.getElementById("login-error").hidden = !refused;
  if (!dlg.open) dlg.showModal();
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-nav]");
  if (a && !ev.metaKey && !ev.ctrlKey && !ev.shiftKey && ev.button === 0) {
    ev.preventDefault();
    navigate(a.getAttribute("href"));
    return;
  }
  const c = ev.target.closest("button[data-cancel]");
  if (c) {
    const dlg = document.getElementById("confirm-cancel");
    document.getElementById("cancel-id").textContent = c.dataset.cancel;
    document.getElementById("cancel-error").hidden = true;
    dlg.dataset.id = c.dataset.cancel;
    dlg.showModal();
    return;
  }
  const q = ev.target.closest("button[data-queue-pause]");
  if (q) {
    const dlg = document.getElementById("confirm-queue");
    const pause = q.dataset.queuePause === "true";
    document.getElementById("queue-name").textContent = q.dataset.name;
    document.getElementById("queue-verb").textContent = pause ? "Pause" : "Resume";
    document.getElementById("queue-confirm").textContent = pause ? "Pause queue" : "Resume queue";
    document.getElementById("queue-pause-text").hidden = !pause;
    document.getElementById("queue-resume-text").hidden = pause;
    document.getElementById("queue-error").hidden = true;
    Object.assign(dlg.dataset, { name: q.dataset.name, pause: q.dataset.queuePause });
    dlg.showModal();
  }
});

// refused shows an API's refusal in a dialog's error line.
async function refused(resp, id) {
  const err = document.getElementById(id);
  let msg = resp.status + "";
  try { const b = await resp.json(); msg = b.code + ": " + b.message; } catch (e) { /* not JSON */ }
  err.textContent = "Refused: " + msg;
  err.hidden = false;
}

document.addEventListener("submit", async (ev) => {
  const form = ev.target;
  if (form.id === "filters") {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "" && !(k === "order" && v === "newest")) q.set(k, v);
    const s = q.toString();
    navigate("/ui/" + (s ? "?" + s : ""));
  } else if (form.id === "login-form") {
    sessionStorage.setItem(tokenKey, document.getElementById("login-token").value.trim());
    load();
  } else if (form.id === "cancel-form") {
    ev.preventDefault();
    const dlg = document.getElementById("confirm-cancel");
    const resp = await fetch("/v1/executions/" + encodeURIComponent(dlg.dataset.id) + "/cancel", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ reason: document.getElementById("cancel-reason").value }),
    });
    if (!resp.ok) {
      await refused(resp, "cancel-error");
      return;
    }
    dlg.close();
    load();
  } else if (form.id === "queue-form") {
    // A put replaces every setting: the queue's limits, read again just
    // before (another operator may have changed them since the page was
    // drawn), go back with the pause.
    ev.preventDefault();
    const d = document.getElementById("confirm-queue").dataset;
    const url = "/v1/queues/" + encodeURIComponent(d.name);
    const now = await fetch(url, { headers: authHeaders(), cache: "no-store" });
    if (!now.ok) {
      await refused(now, "queue-error");
      return;
    }
    const q = await now.json();
    const body = { concurrency: q.concurrency, paused: d.pause === "true" };
    if (q.rate > 0) Object.assign(body, { rate: q.rate, ratePeriodMs: q.ratePeriodMs });
    if (q.keyLimit > 0) Object.assign(body, { keyLimit: q.keyLimit, keyMode: q.keyMode });
    const resp = await fetch(url, {
      method: "PUT",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(body),
    });
    if (!resp.ok) {
      await refused(resp, "queue-error");
      return;
    }
    document.getElementById("confirm-queue").close();
    load();
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("cancel-keep").addEventListener("click", () => document.getElementById("confirm-cancel").close());
  document.getElementById("queue-keep").addEventListener("click", () => document.getElementById("confirm-queue").close());
  window.addEventListener("popstate", load);
  load();
});
