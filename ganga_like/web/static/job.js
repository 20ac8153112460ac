// A job's page: its facts and stats, the subjob grid, failures by cause, and the kill and
// resubmit actions behind a confirmation. Kept up to date as the job progresses.
"use strict";

const JOB_ID = Number(location.pathname.split("/").pop());
const grid = new SubjobGrid(
  document.getElementById("grid"), document.getElementById("tip"), document.getElementById("peek"));
let lastSummary = null;

function fact(table, name, value) {
  const row = table.insertRow();
  row.appendChild(element("th", name));
  row.appendChild(element("td", value));
  return row;
}

function spread(d) {
  if (!d || !d.count) return "-";
  return `p50 ${seconds(d.p50)}, p90 ${seconds(d.p90)}, max ${seconds(d.max)} (${d.count})`;
}

function drawSummary(summary) {
  lastSummary = summary;
  const { row, stats } = summary;
  document.title = "ganga: job " + row.fqid;
  document.getElementById("title").textContent = `job ${row.fqid} ${row.name || ""}`;
  const facts = document.getElementById("facts");
  facts.replaceChildren();
  fact(facts, "status", row.status).cells[1].className = "status status-" + row.status;
  fact(facts, "backend", row.backend || "-");
  fact(facts, "application", row.application || "-");
  fact(facts, stats.unit, stats.total);
  fact(facts, "counts", Object.entries(stats.counts).map(([s, n]) => `${s} ${n}`).join(", ") || "-");
  fact(facts, "time left", stats.time_left === null ? "-" : seconds(stats.time_left));
  fact(facts, "queue wait", spread(stats.queue_wait));
  fact(facts, "run time", spread(stats.run_time));
  fact(facts, "slowest", stats.slowest.map((s) => `${s.fqid} ${seconds(s.seconds)}`).join(", ") || "-");
  const used = stats.resources;
  if (used.measured) {
    const mib = (used.max_rss / 1048576).toFixed(1);
    fact(facts, "resources", `cpu ${seconds(used.user_cpu + used.system_cpu)}, peak memory ${mib} MiB (${used.max_rss_fqid}), measured ${used.measured}`);
  }
  drawFailures(stats.failures);
  drawPlots(summary.figures || []);
}

function drawFailures(groups) {
  const table = document.getElementById("failure-groups");
  table.replaceChildren();
  document.getElementById("failures").hidden = groups.length === 0;
  const head = table.insertRow();
  for (const name of ["count", "exit code", "reason", "subjobs"]) head.appendChild(element("th", name));
  for (const group of groups) {
    const line = table.insertRow();
    line.appendChild(element("td", group.count));
    line.appendChild(element("td", group.exit_code === null ? "-" : group.exit_code));
    line.appendChild(element("td", group.reason));
    const more = group.fqids.length > 20 ? `, … (${group.fqids.length - 20} more)` : "";
    line.appendChild(element("td", group.fqids.slice(0, 20).join(", ") + more));
  }
}

// Figures made on the server (Plotly's JSON), drawn by plotly.js when the page has it.
function drawPlots(figures) {
  const box = document.getElementById("plots");
  if (!figures.length || typeof Plotly === "undefined") { box.hidden = true; return; }
  box.hidden = false;
  figures.forEach((figure, index) => {
    let holder = document.getElementById("plot-" + index);
    if (!holder) { holder = element("div", null, "plot"); holder.id = "plot-" + index; box.appendChild(holder); }
    Plotly.react(holder, figure.data, figure.layout, { displaylogo: false, responsive: true });
  });
}

function drawLegend(data) {
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  const counts = new Map();
  for (const code of grid.codes) counts.set(code, (counts.get(code) || 0) + 1);
  for (const [code, count] of [...counts.entries()].sort((a, b) => a[0] - b[0])) {
    const item = element("span", null, "legend-item");
    const swatch = element("span", null, "swatch");
    swatch.style.background = code < data.colours.length ? data.colours[code] : "#000";
    item.append(swatch, `${code < data.labels.length ? data.labels[code] : "unknown"} ${count}`);
    legend.appendChild(item);
  }
}

// The stats read every subjob: fetched at most once a second from here, and again a
// second later when the server answered with stats older than the last commit (it
// spaces their computation for large jobs): the page ends showing the latest.
let summaryAt = 0;
let summaryTimer = null;
async function refreshSummary() {
  summaryTimer = null;
  const wait = 1000 - (Date.now() - summaryAt);
  if (wait > 0) { summaryTimer = setTimeout(refreshSummary, wait); return; }
  summaryAt = Date.now();
  const summary = await getJSON(`/api/jobs/${JOB_ID}`);
  drawSummary(summary);
  if (summary.stale && !summaryTimer) summaryTimer = setTimeout(refreshSummary, 1000);
}

async function refresh() {
  const data = await getJSON(`/api/jobs/${JOB_ID}/grid`);
  grid.draw(data);
  drawLegend(data);
  if (!summaryTimer) await refreshSummary();
}

// An action is asked for in a dialog first; only "Yes" sends it. A kill of a job others
// wait for asks too what becomes of them: skipped, or kept waiting for a resubmission.
function confirmThen(verb) {
  const dialog = document.getElementById("confirm");
  const total = lastSummary ? lastSummary.stats.total : 0;
  const what = total > 1 ? ` and its ${total} subjobs` : "";
  document.getElementById("confirm-text").textContent = `${verb} job ${JOB_ID}${what}?`;
  const waiting = verb === "Kill" && lastSummary ? lastSummary.dependents || [] : [];
  const choice = document.getElementById("confirm-dependents");
  choice.hidden = waiting.length === 0;
  document.getElementById("confirm-dependents-text").textContent =
    `job(s) ${waiting.join(", ")} wait for it:`;
  const yes = document.getElementById("confirm-yes");
  yes.textContent = verb;
  yes.onclick = async () => {
    dialog.close();
    const message = document.getElementById("message");
    message.textContent = verb + "…";
    const options = {};
    if (waiting.length) options.dependents = choice.querySelector("input:checked").value;
    try {
      message.textContent = (await postAction(`/api/${verb.toLowerCase()}/${JOB_ID}`, options)).done;
    } catch (error) {
      message.textContent = error.message;
    }
  };
  document.getElementById("confirm-no").onclick = () => {
    dialog.close();
    document.getElementById("message").textContent = verb + " cancelled; nothing done";
  };
  dialog.showModal();
}

document.getElementById("kill").onclick = () => confirmThen("Kill");
document.getElementById("resubmit").onclick = () => confirmThen("Resubmit");
followChanges(refresh, document.getElementById("live"));
