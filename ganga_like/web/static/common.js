// What both pages share: the token every request carries, JSON reads, actions, and the
// server's "change" events.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";

function withToken(path) {
  const sep = path.includes("?") ? "&" : "?";
  return path + sep + "token=" + encodeURIComponent(TOKEN);
}

async function getJSON(path) {
  const answer = await fetch(withToken(path), { cache: "no-store" });
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || answer.statusText);
  return body;
}

// A change is sent with the token in the header (never in the address), which a form
// of another site cannot send, and a JSON body saying it was confirmed (with the
// action's options, such as "dependents" of a kill).
async function postAction(path, options) {
  const answer = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Ganga-Token": TOKEN },
    body: JSON.stringify({ confirmed: true, ...(options || {}) }),
  });
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || answer.statusText);
  return body;
}

// Calls refresh() at once and after every commit the server reports, one at a time:
// changes that come while a refresh runs make one more refresh after it.
function followChanges(refresh, statusElement) {
  let running = false;
  let again = false;
  async function run() {
    if (running) { again = true; return; }
    running = true;
    try {
      do { again = false; await refresh(); } while (again);
      if (statusElement) statusElement.textContent = "live, updated " + new Date().toLocaleTimeString();
    } catch (error) {
      if (statusElement) statusElement.textContent = "error: " + error.message;
    } finally {
      running = false;
    }
  }
  const events = new EventSource(withToken("/api/events"));
  events.addEventListener("change", run);
  events.onerror = () => { if (statusElement) statusElement.textContent = "server not reachable"; };
  run();
  return events;
}

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined && text !== null) made.textContent = String(text);
  if (className) made.className = className;
  return made;
}

function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value < 120) return value.toFixed(value < 10 ? 2 : 1) + " s";
  if (value < 7200) return (value / 60).toFixed(1) + " min";
  return (value / 3600).toFixed(1) + " h";
}
