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

// A change is sent in the header with the token (never in the address) and a JSON body
// saying it was confirmed: a form of another site can send neither.
async function postAction(path) {
  const answer = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Ganga-Token": TOKEN },
    body: JSON.stringify({ confirmed: true }),
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
