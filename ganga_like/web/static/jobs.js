// The jobs page: the table of `ganga jobs`, kept up to date.
"use strict";

const SHOWN = ["fqid", "status", "name", "subjobs", "application", "backend"];

function statusCell(label) {
  const cell = element("td", label, "status status-" + label);
  return cell;
}

function drawJobs(rows) {
  const table = document.getElementById("jobs");
  const head = table.tHead;
  const columns = SHOWN.filter((name) => rows.length === 0 || name in rows[0]);
  head.replaceChildren();
  const titles = head.insertRow();
  for (const name of columns) titles.appendChild(element("th", name));
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const line = body.insertRow();
    line.dataset.fqid = row.fqid;
    for (const name of columns) {
      if (name === "status") { line.appendChild(statusCell(row.status)); continue; }
      const cell = element("td");
      if (name === "fqid" && row.id !== undefined) {
        const link = element("a", row.fqid);
        link.href = withToken("/job/" + row.id);
        cell.appendChild(link);
      } else {
        cell.textContent = row[name] || "";
      }
      line.appendChild(cell);
    }
  }
  document.getElementById("empty").hidden = rows.length > 0;
}

followChanges(async () => drawJobs(await getJSON("/api/jobs")), document.getElementById("live"));
