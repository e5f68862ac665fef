// Driftline fleet UI: plain JavaScript over the query API, no build step.
// Views follow the UI layers of the fleet design: Layer 0 global (#/:
// status, connectivity, heat map, rollouts by policy bundle, attention),
// Layer 1 domain (#/domain/<owning_domain>: relay topology and sync-debt
// timeline beside the domain's findings and nodes), Layer 2 node
// (#/node/<id>: gate, lifecycle timeline, replay progress, desired-vs-
// actual diff, supply chain, authority, recent events) and resource
// (#/finding/<evidence_id>), and finance (#/finance). Aggregates come
// first; a tag filter (tag=) narrows the fleet views.
// Filters live in the hash query (#/domain/x?gate=warning) so every view is
// a link. Every view re-renders every REFRESH seconds (?refresh=N on the
// page URL, default 10).
// Sign-in: the API key is typed into the sign-in form and kept in this
// tab's sessionStorage (gone when the tab closes), sent only in the
// Authorization header, never in a URL. GET /v1/session names the key's
// roles; views and links the roles cannot use are not shown.
"use strict";

const API = new URL("../", document.baseURI).pathname.replace(/\/$/, "") + "/v1";
const REFRESH = Math.max(2, Number(new URLSearchParams(location.search).get("refresh")) || 10);
const MODES = ["LIVE", "DELAYED", "EDGE_CACHED", "AUTONOMOUS", "DISCONNECTED", "RETURNING", "REPLAYING"];
const MODE_COLOURS = {LIVE: "#2e7d32", DELAYED: "#7cb342", EDGE_CACHED: "#00897b", AUTONOMOUS: "#1565c0",
  DISCONNECTED: "#c62828", RETURNING: "#8e24aa", REPLAYING: "#e69500"};
const GATES = ["pass", "warning", "retry", "investigate", "block_production"];
const HEALTHS = ["OK", "DEGRADED", "FAILED", "UNKNOWN"];
// Operator actions (docs/actions.md): the node ones act on a node's finding.
const ACTIONS = ["acknowledge", "assign", "suppress", "unsuppress", "retry", "cleanup", "quarantine_node", "release_node"];
const KINDS = ["usage_not_rated", "rated_not_ledgered", "amount_mismatch", "duplicate_usage", "unknown_unit", "conflicting_usage", "window_unbalanced"];

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function when(t) { return t ? esc(t.replace("T", " ").replace("Z", "")) : '<span class="muted">—</span>'; }
function ago(sec) {
  if (sec == null) return "unknown";
  const s = Math.round(sec);
  if (Math.abs(s) < 120) return s + " s";
  if (Math.abs(s) < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}
function sev(s) { return `<span class="sev-${esc(s)}">${esc(s)}</span>`; }
function gate(g) { return `<span class="gate-${esc(g)}">${esc(g || "—")}</span>`; }
function nodeLink(id) { return `<a href="#/node/${encodeURIComponent(id)}">${esc(id)}</a>`; }
function findingLink(id) { return `<a href="#/finding/${encodeURIComponent(id)}">${esc(id)}</a>`; }
function domainLink(d) { return `<a href="#/domain/${encodeURIComponent(d)}">${esc(d || "(none)")}</a>`; }

const KEY_STORE = "driftline.apiKey";
function apiKey() { return sessionStorage.getItem(KEY_STORE) || ""; }

// SignInNeeded is thrown when there is no key or the server refused it.
class SignInNeeded extends Error {}

let session = null; // GET /v1/session of the key in use

async function api(path, params) {
  const key = apiKey();
  if (!key) throw new SignInNeeded("");
  const qs = params && [...params].length ? "?" + params : "";
  const r = await fetch(API + path + qs, {headers: {Accept: "application/json", Authorization: "Bearer " + key}});
  const body = await r.json().catch(() => ({error: r.statusText}));
  if (r.status === 401) {
    sessionStorage.removeItem(KEY_STORE);
    session = null;
    throw new SignInNeeded(body.error || r.statusText);
  }
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// can reports whether the signed-in key may call endpoint (by name).
function can(endpoint) { return !!session && session.endpoints.includes(endpoint); }

// download fetches an export or bundle with the key and saves it: a plain
// link could not carry the Authorization header.
async function download(href, name) {
  const r = await fetch(href, {headers: {Authorization: "Bearer " + apiKey()}});
  if (!r.ok) { alert("Download refused: " + r.status + " " + ((await r.json().catch(() => ({}))).error || r.statusText)); return; }
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
document.addEventListener("click", ev => {
  const a = ev.target.closest && ev.target.closest("a[data-download]");
  if (!a) return;
  ev.preventDefault();
  download(a.dataset.download, a.dataset.name);
});

function signInView(msg) {
  return `<section class="card" id="signin"><h1>Sign in</h1>
    <p class="muted">Paste your Driftline API key. It is kept in this browser tab only, until the tab closes or you sign out.</p>
    <form id="signin-form" method="post" autocomplete="off"><label>API key <input type="password" name="key" size="40" autocomplete="off"></label>
    <button type="submit">Sign in</button></form>${msg ? `<p class="error" id="signin-error">${esc(msg)}</p>` : ""}</section>`;
}

function bindSignIn() {
  const f = document.getElementById("signin-form");
  if (!f || f.dataset.bound) return;
  f.dataset.bound = "1";
  f.addEventListener("submit", ev => {
    ev.preventDefault();
    const key = f.elements.key.value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_STORE, key);
    session = null;
    render();
  });
}

function signOut() {
  sessionStorage.removeItem(KEY_STORE);
  session = null;
  render();
}

// showSession shows who is signed in and only the views the roles allow.
function showSession() {
  const who = document.getElementById("who");
  const nav = {global: can("heatmap"), finance: can("billing_mismatches")};
  for (const a of document.querySelectorAll("header nav a")) a.hidden = !session || !nav[a.dataset.nav];
  if (!session) { who.innerHTML = ""; return; }
  who.innerHTML = `<span id="actor">${esc(session.actor_id)}</span> <span class="muted" id="roles">(${esc(session.roles.join(", "))}${session.tenant_ids ? " · tenants " + esc(session.tenant_ids.join(", ")) : ""})</span> <a href="#" id="signout">sign out</a>`;
  document.getElementById("signout").onclick = ev => { ev.preventDefault(); signOut(); };
}

// post sends an action with a new Idempotency-Key (kept on the form, so a
// resubmission after a lost answer repeats the same key).
async function post(path, params, key, body) {
  const qs = params && [...params].length ? "?" + params : "";
  const headers = {Accept: "application/json", "Content-Type": "application/json", Authorization: "Bearer " + apiKey()};
  if (key) headers["Idempotency-Key"] = key;
  const r = await fetch(API + path + qs, {method: "POST", headers, body: JSON.stringify(body)});
  const answer = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw new Error((answer.reason ? answer.reason + ": " : "") + (answer.error || r.statusText));
  return answer;
}

// An action form being filled in holds the periodic re-render, which
// would wipe it; lastResult keeps the answer of the last submission.
let acting = false;
let lastResult = "";
function newKey() { return "ui-" + (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random()); }

// actionForm renders the action controls: one button per action, with
// reason, assignee and until fields; targets is a list of evidence ids
// (a select when several) or, for a batch, null.
function actionForm(id, actions, targets, batch) {
  const target = !targets ? "" : targets.length === 1
    ? `<input type="hidden" name="evidence_id" value="${esc(targets[0])}">`
    : `<label>finding<select name="evidence_id">${targets.map(t => `<option value="${esc(t)}">${esc(t)}</option>`).join("")}</select></label>`;
  return `<form class="filters act-form" id="${id}" data-batch="${batch ? 1 : 0}" data-key="${newKey()}">${target}
    <label>reason<input name="reason" size="24" placeholder="why (recorded)"></label>
    <label>assignee<input name="assignee" size="12"></label>
    <label>until (suppress)<input name="until" size="20" placeholder="2026-12-01T00:00:00Z"></label>
    ${batch ? '<label><span><input type="checkbox" name="preview" checked> preview only</span></label>' : ""}
    ${actions.map(a => `<button type="submit" name="action" value="${a}" data-action="${a}">${a.replace("_", " ")}</button>`).join("")}
    </form><div id="${id}-result" class="action-result">${lastResult}</div>`;
}

function bindActionForm(id, params) {
  const form = document.getElementById(id);
  if (!form) return;
  form.addEventListener("input", () => { acting = true; });
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const fd = new FormData(form);
    const action = ev.submitter ? ev.submitter.value : "";
    const body = {action, reason: fd.get("reason") || ""};
    if (fd.get("assignee")) body.assignee = fd.get("assignee");
    if (fd.get("until")) body.until = fd.get("until");
    const out = document.getElementById(id + "-result");
    try {
      let a;
      if (form.dataset.batch === "1") {
        body.preview = fd.get("preview") === "on";
        a = await post("/actions/batch", params, body.preview ? "" : form.dataset.key, body);
        lastResult = batchResult(a);
      } else {
        a = await post("/findings/" + encodeURIComponent(fd.get("evidence_id")) + "/actions", null, form.dataset.key, body);
        lastResult = `<p class="ok" id="action-accepted">${esc(a.action)} accepted (${esc(a.command_id)}); it shows below once the joiner applied it.</p>`;
      }
      form.dataset.key = newKey();
    } catch (e) {
      lastResult = `<p class="error" id="action-refused">${esc(e.message)}</p>`;
    }
    out.innerHTML = lastResult;
    acting = false;
  });
}

function batchResult(a) {
  const rows = a.applied_to.map(x => `<tr data-touch="${esc(x.evidence_id)}"><td>${findingLink(x.evidence_id)}</td><td>${esc(x.status)}</td><td></td></tr>`)
    .concat(a.refused.map(x => `<tr data-refused="${esc(x.evidence_id)}"><td>${findingLink(x.evidence_id)}</td><td>refused</td><td>${esc(x.reason)}</td></tr>`))
    .concat((a.skipped || []).map(x => `<tr data-skipped="${esc(x.evidence_id)}"><td>${findingLink(x.evidence_id)}</td><td>skipped</td><td>${esc(x.reason)}: ${esc(x.detail)}</td></tr>`));
  return `<p id="batch-summary">${a.preview ? "Preview: would apply" : "Applied"} ${esc(a.action)} to ${a.count} finding(s), ${a.refused.length} refused, ${(a.skipped || []).length} skipped (outside this key's authority).</p>
    ${rows.length ? `<table><tr><th>finding</th><th>result</th><th>reason</th></tr>${rows.join("")}</table>` : ""}`;
}

// operatorState lists a finding's operator columns.
function operatorState(f) {
  return `<table id="operator-state">${[["acknowledged_by", f.acknowledged_by], ["assignee", f.assignee], ["suppressed_until", f.suppressed_until],
    ["action_state", f.action_state], ["last_action_id", f.last_action_id]].map(([k, v]) =>
    `<tr><th>${k}</th><td>${v ? esc(v) : '<span class="muted">—</span>'}</td></tr>`).join("")}</table>`;
}

// route parses the hash: "#/domain/x?gate=warning" -> ["domain","x"], params.
function route() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, query] = h.split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return {parts, params: new URLSearchParams(query || "")};
}

function setFilters(params) {
  const {parts} = route();
  const base = "#/" + parts.map(encodeURIComponent).join("/");
  const q = params.toString();
  location.hash = q ? base + "?" + q : base;
}

// filterForm renders selects whose change rewrites the hash query.
function filterForm(id, params, fields) {
  const sel = fields.map(f => {
    if (f.options) {
      const opts = ['<option value="">any</option>'].concat(f.options.map(o =>
        `<option value="${esc(o)}"${params.get(f.name) === o ? " selected" : ""}>${esc(o)}</option>`));
      return `<label>${esc(f.label)}<select name="${esc(f.name)}">${opts.join("")}</select></label>`;
    }
    return `<label>${esc(f.label)}<input name="${esc(f.name)}" value="${esc(params.get(f.name) || "")}" size="12"></label>`;
  }).join("");
  return `<form class="filters" id="${id}">${sel}<button type="submit">Apply</button></form>`;
}
function bindForm(id) {
  const f = document.getElementById(id);
  if (!f) return;
  const apply = ev => {
    ev && ev.preventDefault();
    const p = new URLSearchParams();
    for (const el of f.elements) if (el.name && el.value) p.set(el.name, el.value);
    setFilters(p);
  };
  f.addEventListener("submit", apply);
  for (const el of f.querySelectorAll("select")) el.addEventListener("change", apply);
}

function statusCard(st) {
  const f = st.findings;
  const lag = st.lag.state === "ok"
    ? st.lag.groups.map(g => `${esc(g.group)}: ${g.total}`).join(", ")
    : `<span class="muted">${esc(st.lag.state)}</span>`;
  return `<section class="card" id="status"><h2>Reconciliation status</h2><div class="kpis">
    <div class="kpi"><b id="kpi-open">${f.open}</b>open findings</div>
    <div class="kpi"><b class="sev-critical" id="kpi-critical">${f.critical_open}</b>critical</div>
    <div class="kpi"><b>${f.blocked_admissions}</b>blocked admissions</div>
    <div class="kpi"><b>${f.resolved}</b>resolved</div>
    <div class="kpi"><b>${ago(st.watermark_age_seconds)}</b>watermark age</div>
    <div class="kpi"><b>${when(st.last_run)}</b>last run</div>
    <div class="kpi"><b>${lag}</b>consumer lag</div></div>${producersTable(st.producers || [])}</section>`;
}

// producersTable lists the producers whose records a consumer did not
// apply (clock ahead of the log, late, ids reused with other content).
function producersTable(rows) {
  if (!rows.length) return "";
  return `<h3>Records not applied, by producer</h3><table id="producer-rejections"><tr><th>producer</th><th>reason</th>
    <th>consumer</th><th class="num">records</th><th>latest</th></tr>${rows.map(r =>
    `<tr><td>${esc(r.producer)}</td><td>${esc(r.reason)}</td><td>${esc(r.consumer)}</td><td class="num">${r.events}</td>
    <td>${when(r.last_at)}</td></tr>`).join("")}</table>`;
}

function spectrumBar(modes, total) {
  if (!total) return '<p class="muted">No node-agent status yet.</p>';
  return `<div class="spectrum">${modes.filter(m => m.count).map(m =>
    `<div style="flex:${m.count};background:${MODE_COLOURS[m.mode] || "#888"}" title="${esc(m.mode)}: ${m.count}">${m.count}</div>`).join("")}</div>
    <div class="legend">${modes.map(m => `<span style="--c:${MODE_COLOURS[m.mode] || "#888"}" data-mode="${esc(m.mode)}">${esc(m.mode)} ${m.count}</span>`).join("")}</div>`;
}

function connectivityCard(c) {
  const rows = c.domains.map(d => `<tr><td>${domainLink(d.owning_domain)}</td><td class="num">${d.total}</td>
    <td style="width:60%">${spectrumBar(d.modes, d.total).split('<div class="legend">')[0]}</td></tr>`).join("");
  return `<section class="card" id="connectivity"><h2>Connectivity spectrum · ${c.total} nodes</h2>${spectrumBar(c.modes, c.total)}
    ${rows ? `<table><tr><th>domain</th><th class="num">nodes</th><th>spectrum</th></tr>${rows}</table>` : ""}</section>`;
}

// heatColour: hue by the cell's worst severity, strength by its count
// relative to the largest cell.
function heatColour(cell, max) {
  if (!cell) return "transparent";
  const a = 0.15 + 0.85 * Math.log1p(cell.count) / Math.log1p(max);
  return cell.max_severity === "critical" ? `rgba(198,40,40,${a.toFixed(2)})` : `rgba(230,149,0,${a.toFixed(2)})`;
}

function heatmapCard(h, title) {
  const cells = {};
  let max = 1;
  for (const c of h.cells) { cells[c.owning_domain + "\u0000" + c.classification] = c; max = Math.max(max, c.count); }
  const head = h.classifications.map(c => `<th title="${esc(c)}">${esc(c.replace(/_/g, " "))}</th>`).join("");
  const rows = h.domains.map(d => `<tr><td>${domainLink(d)}</td>${h.classifications.map(c => {
    const cell = cells[d + "\u0000" + c];
    const q = new URLSearchParams({owning_domain: d, classification: c});
    return `<td class="cell" data-domain="${esc(d)}" data-class="${esc(c)}" style="background:${heatColour(cell, max)}">${cell
      ? `<a href="#/domain/${encodeURIComponent(d)}?classification=${encodeURIComponent(c)}" title="${cell.critical} critical">${cell.count}</a>` : ""}</td>`;
  }).join("")}</tr>`).join("");
  return `<section class="card heat" id="heatmap"><h2>${esc(title || "Drift heat map")} <span class="muted">(open findings; red: critical, amber: warning)</span></h2>
    ${h.domains.length ? `<table><tr><th>domain</th>${head}</tr>${rows}</table>` : '<p class="muted">No open findings.</p>'}</section>`;
}

function attentionRows(items) {
  if (!items.length) return '<p class="muted">Nothing needs attention.</p>';
  return `<table><tr><th class="num">score</th><th>item</th><th>domain</th><th>what</th><th>since</th></tr>${items.map(it => {
    if (it.kind === "node") {
      const n = it.node;
      return `<tr data-kind="node" data-id="${esc(n.node_id)}"><td class="num">${it.attention_score.toFixed(1)}</td><td>node ${nodeLink(n.node_id)}</td>
        <td>${domainLink(n.owning_domain)}</td><td>${gate(n.gate)} · ${esc(n.connectivity_mode)} · ${esc(n.health)}${n.node_agent_reason ? " · " + esc(n.node_agent_reason) : ""}</td><td>${when(n.last_seen_at)}</td></tr>`;
    }
    const f = it.finding;
    return `<tr data-kind="finding" data-id="${esc(f.evidence_id)}"><td class="num">${it.attention_score.toFixed(1)}</td><td>${findingLink(f.evidence_id)}</td>
      <td>${domainLink(f.owning_domain)}</td><td>${sev(f.severity)} ${esc(f.classification)} · ${esc(f.posture)}</td><td>${when(f.first_seen_at)}</td></tr>`;
  }).join("")}</table>`;
}


// Rollout categories of the rollout answer, in the order a node moves
// through them, with their colours.
const ROLLOUT_PARTS = [["at_target", "#2e7d32"], ["updating", "#1565c0"], ["pending", "#9e9e9e"], ["behind", "#e69500"], ["failed", "#c62828"]];

function stackBar(counts) {
  if (!counts.nodes) return '<span class="muted">no nodes</span>';
  return `<div class="spectrum">${ROLLOUT_PARTS.filter(([k]) => counts[k]).map(([k, c]) =>
    `<div style="flex:${counts[k]};background:${c}" title="${k}: ${counts[k]}">${counts[k]}</div>`).join("")}</div>`;
}

function rolloutCard(ro) {
  const head = ROLLOUT_PARTS.map(([k, c]) => `<th class="num"><span class="legend"><span style="--c:${c}">${k.replace("_", " ")}</span></span></th>`).join("");
  const rows = ro.rollouts.map(r => `<tr data-bundle="${esc(r.policy_bundle_id)}"><td>${esc(r.policy_bundle_id)}</td><td>${esc(r.target_version)}</td>
    <td>${when(r.deadline)}</td><td class="num">${r.nodes}</td>${ROLLOUT_PARTS.map(([k]) => `<td class="num" data-count="${k}">${r[k]}</td>`).join("")}
    <td style="width:25%">${stackBar(r)}</td><td class="muted">${r.domains.map(d => esc(d.domain_id) + " " + d.at_target + "/" + d.nodes).join(", ")}</td></tr>`).join("");
  return `<section class="card" id="rollouts"><h2>Rollout status by policy bundle</h2>
    ${rows ? `<table><tr><th>bundle</th><th>target</th><th>deadline</th><th class="num">nodes</th>${head}<th>progress</th><th>domains (at target / nodes)</th></tr>${rows}</table>`
      : '<p class="muted">No policy bundle is rolling out.</p>'}</section>`;
}

function relayName(id) { return id ? esc(id) : '<span class="muted">(direct)</span>'; }

function relayCard(rl) {
  if (!rl.domains.length) return '<section class="card" id="relays"><h2>Relay topology</h2><p class="muted">No node of this domain has reported yet.</p></section>';
  const worst = Math.max(1, ...rl.domains.map(d => d.max_seconds_behind));
  const rows = rl.domains.map(d => `<tr class="relay-domain" data-domain-id="${esc(d.domain_id)}"><th>${esc(d.domain_id)}</th><th class="num">${d.nodes}</th>
    <th class="num">${d.max_seconds_behind}</th><th class="num">${d.backlog_messages}</th><th>${d.relays.length} relay(s)</th></tr>` +
    d.relays.map(r => `<tr data-relay="${esc(r.relay_id)}"><td>↳ ${relayName(r.relay_id)}</td><td class="num">${r.nodes}</td>
      <td class="num">${r.max_seconds_behind}</td><td class="num">${r.backlog_messages}</td>
      <td style="width:35%"><div class="bar" style="width:${Math.round(100 * r.max_seconds_behind / worst)}%"></div></td></tr>`).join("")).join("");
  return `<section class="card" id="relays"><h2>Relay topology · worst sync debt</h2>
    <table><tr><th>domain / relay</th><th class="num">nodes</th><th class="num">max s behind</th><th class="num">backlog</th><th>debt</th></tr>${rows}</table></section>`;
}

const SERIES_COLOURS = ["#1565c0", "#c62828", "#2e7d32", "#e69500", "#8e24aa", "#00897b", "#6d4c41", "#546e7a"];

// syncDebtChart draws max seconds behind per minute, one line per
// (domain, relay), as inline SVG.
function syncDebtChart(sd) {
  const pts = sd.series.flatMap(s => s.points);
  if (!pts.length) return '<section class="card" id="syncdebt"><h2>Sync-debt timeline</h2><p class="muted">No sync debt recorded.</p></section>';
  const W = 640, H = 140, P = 30;
  const t = pts.map(p => Date.parse(p.minute));
  const t0 = Math.min(...t), t1 = Math.max(...t, t0 + 60000);
  const ymax = Math.max(1, ...pts.map(p => p.max_seconds_behind));
  const x = m => P + (W - 2 * P) * (Date.parse(m) - t0) / (t1 - t0);
  const y = v => H - P + (2 * P - H) * v / ymax;
  const lines = sd.series.map((s, i) => {
    const c = SERIES_COLOURS[i % SERIES_COLOURS.length];
    const d = s.points.map(p => `${x(p.minute).toFixed(1)},${y(p.max_seconds_behind).toFixed(1)}`).join(" ");
    const dots = s.points.map(p => `<circle cx="${x(p.minute).toFixed(1)}" cy="${y(p.max_seconds_behind).toFixed(1)}" r="2.5" fill="${c}"><title>${esc(p.minute)}: ${p.max_seconds_behind} s behind, ${p.nodes} nodes, backlog ${p.backlog_messages}</title></circle>`).join("");
    return `<polyline data-series="${esc(s.domain_id + "/" + s.relay_id)}" fill="none" stroke="${c}" stroke-width="2" points="${d}"><title>${esc(s.domain_id)} ${esc(s.relay_id || "(direct)")}</title></polyline>${dots}`;
  }).join("");
  const legend = sd.series.map((s, i) => `<span style="--c:${SERIES_COLOURS[i % SERIES_COLOURS.length]}">${esc(s.domain_id)} ${esc(s.relay_id || "(direct)")}</span>`).join("");
  return `<section class="card" id="syncdebt"><h2>Sync-debt timeline <span class="muted">(max seconds behind per minute${sd.truncated ? ", cut at the limit" : ""})</span></h2>
    <svg viewBox="0 0 ${W} ${H}" width="100%" height="${H}" role="img" aria-label="sync debt per minute">
      <line x1="${P}" y1="${H - P}" x2="${W - P}" y2="${H - P}" stroke="#dde1e8"/><line x1="${P}" y1="${P}" x2="${P}" y2="${H - P}" stroke="#dde1e8"/>
      <text x="2" y="${P + 4}" font-size="10" fill="#6b7385">${ymax}s</text><text x="2" y="${H - P}" font-size="10" fill="#6b7385">0</text>
      <text x="${P}" y="${H - 8}" font-size="10" fill="#6b7385">${esc(new Date(t0).toISOString().slice(11, 16))}</text>
      <text x="${W - P - 30}" y="${H - 8}" font-size="10" fill="#6b7385">${esc(new Date(t1).toISOString().slice(11, 16))}</text>${lines}</svg>
    <div class="legend">${legend}</div></section>`;
}

// withTag copies the tag filter of params into q.
function withTag(q, params) {
  for (const t of params.getAll("tag")) if (t) q.append("tag", t);
  return q;
}

async function viewGlobal(params) {
  const [st, conn, heat, att, ro] = await Promise.all([api("/status"), api("/connectivity", withTag(new URLSearchParams(), params)),
    api("/heatmap", withTag(new URLSearchParams(), params)), api("/attention", withTag(new URLSearchParams({n: "20"}), params)),
    can("rollouts") ? api("/rollouts") : {rollouts: []}]);
  return `<h1>Global fleet overview</h1>${statusCard(st)}
    ${filterForm("global-filters", params, [{name: "tag", label: "tag (heat map, attention, connectivity)"}])}
    <div class="row">${connectivityCard(conn)}</div>${heatmapCard(heat)}${rolloutCard(ro)}
    <section class="card" id="attention"><h2>Attention queue · top ${att.n}</h2>${attentionRows(att.global)}</section>`;
}

async function viewDomain(domain, params) {
  const nodeQ = new URLSearchParams({owning_domain: domain, limit: "200", sort: "attention_score"});
  for (const k of ["gate", "connectivity_mode", "health"]) if (params.get(k)) nodeQ.set(k, params.get(k));
  const driftQ = new URLSearchParams({owning_domain: domain, limit: "200", sort: "attention_score"});
  for (const k of ["classification", "severity"]) if (params.get(k)) driftQ.set(k, params.get(k));
  withTag(nodeQ, params);
  withTag(driftQ, params);
  // ?preview=<action> previews a batch action on the filtered findings
  // (a read: it writes nothing), so a preview is a link.
  if (ACTIONS.includes(params.get("preview"))) {
    const bq = new URLSearchParams({owning_domain: domain});
    for (const k of ["classification", "severity"]) if (params.get(k)) bq.set(k, params.get(k));
    try {
      lastResult = batchResult(await post("/actions/batch", bq, "", {action: params.get("preview"), reason: "", preview: true}));
    } catch (e) {
      lastResult = `<p class="error" id="action-refused">${esc(e.message)}</p>`;
    }
  }
  const [heat, att, nodes, drift, conn, relays] = await Promise.all([
    api("/heatmap", withTag(new URLSearchParams({owning_domain: domain}), params)),
    api("/attention", withTag(new URLSearchParams({owning_domain: domain, n: "10"}), params)),
    api("/nodes", nodeQ), api("/drift", driftQ),
    api("/connectivity", withTag(new URLSearchParams({owning_domain: domain}), params)),
    api("/relays", withTag(new URLSearchParams({owning_domain: domain}), params))]);
  // The sync-debt timeline of the domain ids this domain's nodes are in:
  // the last two hours of event time the joiner wrote.
  const ids = relays.domains.map(d => d.domain_id);
  const debt = ids.length ? await api("/syncdebt", new URLSearchParams({domain_id: ids.join(","), last: "2h"})) : {series: [], points: 0};
  const nodeRows = nodes.nodes.map(n => `<tr data-node="${esc(n.node_id)}"><td>${nodeLink(n.node_id)}</td><td>${gate(n.gate)}</td>
    <td>${esc(n.connectivity_mode)}</td><td>${esc(n.health)}</td><td>${esc(n.node_agent_state)}</td>
    <td class="${n.expected_agent_version && n.observed_agent_version && n.expected_agent_version !== n.observed_agent_version ? "bad" : ""}">${esc(n.observed_agent_version)} / ${esc(n.expected_agent_version)}</td>
    <td class="num">${n.seconds_behind}</td><td class="num">${n.backlog_messages}</td><td class="num">${n.attention_score.toFixed(1)}</td><td>${when(n.last_seen_at)}</td></tr>`).join("");
  const findingRows = drift.findings.map(f => `<tr data-finding="${esc(f.evidence_id)}"><td>${findingLink(f.evidence_id)}</td><td>${sev(f.severity)}</td>
    <td>${esc(f.classification)}</td><td>${esc(f.expected_state)} → ${esc(f.observed_state || "∅")}</td><td>${esc(f.posture)}</td><td>${when(f.first_seen_at)}</td></tr>`).join("");
  return `<h1>Domain ${esc(domain)}</h1><p><a href="#/">← global</a></p>${heatmapCard(heat, "Heat map row")}
    <div class="row"><section class="card" id="attention"><h2>Attention queue · top ${att.n}</h2>${attentionRows(att.global)}</section>
    ${connectivityCard(conn)}</div>
    <div class="row">${relayCard(relays)}${syncDebtChart(debt)}</div>
    <section class="card" id="nodes"><h2>Nodes (${nodes.count}${nodes.next_cursor ? "+" : ""})</h2>
    ${filterForm("node-filters", params, [{name: "gate", label: "gate", options: GATES},
      {name: "connectivity_mode", label: "connectivity", options: MODES}, {name: "health", label: "health", options: HEALTHS},
      {name: "classification", label: "finding class", options: heat.classifications},
      {name: "severity", label: "severity", options: ["critical", "warning"]}, {name: "tag", label: "tag"}])}
    ${nodeRows ? `<table><tr><th>node</th><th>gate</th><th>connectivity</th><th>health</th><th>agent state</th><th>agent observed / expected</th>
      <th class="num">s behind</th><th class="num">backlog</th><th class="num">score</th><th>last seen</th></tr>${nodeRows}</table>` : '<p class="muted">No node matches.</p>'}</section>
    ${can("actions_batch") ? `<section class="card" id="batch"><h2>Act on these findings</h2>
      <p class="muted">Applies to the open findings of ${esc(domain)} the filters above select (classification, severity); preview first.</p>
      ${actionForm("batch-form", ACTIONS, null, true)}</section>` : ""}
    <section class="card" id="findings"><h2>Open findings (${drift.count}${drift.next_cursor ? "+" : ""})</h2>
    ${findingRows ? `<table><tr><th>evidence</th><th>severity</th><th>classification</th><th>expected → observed</th><th>posture</th><th>since</th></tr>${findingRows}</table>` : '<p class="muted">No finding matches.</p>'}</section>`;
}

function sideBySide(rows) {
  return `<div class="side"><div class="h">field</div><div class="h">desired (platform record)</div><div class="h">actual (observed)</div>${rows.map(r =>
    `<div>${esc(r.field)}</div><div class="${r.match ? "" : "mismatch"}">${esc(r.desired) || '<span class="muted">—</span>'}</div><div class="${r.match ? "" : "mismatch"}">${esc(r.observed) || '<span class="muted">—</span>'}</div>`).join("")}</div>`;
}

function timeline(entries) {
  if (!entries.length) return '<p class="muted">No transitions recorded.</p>';
  return `<ul class="timeline">${entries.map(e => `<li${e.action ? ` data-action-row="${esc(e.action)}"` : ""}>${when(e.at)} <b>${esc(e.transition)}</b> ${e.id ? findingLink(e.id) : ""}
    ${e.action ? `<b>${esc(e.action)}</b> by ${esc(e.actor_id)}${e.reason ? ` “${esc(e.reason)}”` : ""}${e.refusal ? ` <span class="bad">refused: ${esc(e.refusal)}</span>` : ""} · ` : ""}${esc(e.status)} · ${esc(e.posture)} · observed ${esc(e.observed_state || "∅")}${e.retry_count ? " · retry " + e.retry_count : ""}${e.action_state ? " · request " + esc(e.action_state) : ""}</li>`).join("")}</ul>`;
}


function kv(id, rows) {
  return `<table id="${id}">${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v === "" || v == null ? '<span class="muted">—</span>' : esc(v)}</td></tr>`).join("")}</table>`;
}

function lifecycleCard(l) {
  const pos = (p, st) => p ? esc(p) + (st && st !== p ? ` / ${esc(st)}` : "") : '<span class="muted">(none)</span>';
  const items = l.recent.map(x => `<li data-seq="${x.seq}">${when(x.at)} ${pos(x.from_phase, x.from_state)} → <b>${pos(x.to_phase, x.to_state)}</b>
    · ${esc(x.reason)}${x.correlation_id ? ` · <span class="muted">${esc(x.correlation_id)}</span>` : ""}</li>`).join("");
  return `<section class="card" id="lifecycle"><h2>Lifecycle: <span id="phase">${esc(l.phase || "—")}</span> <span class="muted" id="state">${esc(l.state)}</span></h2>
    <p>since ${when(l.since)} · ${l.transitions} transition(s) · intent ${esc(l.intent || "ACTIVE")}${l.node_kind ? " · " + esc(l.node_kind) : ""}</p>
    ${items ? `<ul class="timeline" id="lifecycle-timeline">${items}</ul>` : '<p class="muted">No transition recorded.</p>'}</section>`;
}

function replayCard(r) {
  const caught = !r.replay_required && !r.backlog_messages;
  return `<section class="card" id="replay"><h2>Replay progress</h2>
    <p>${esc(r.connectivity_mode || "—")} · ${caught ? '<span class="ok">caught up</span>' : `<span class="sev-warning">replaying</span>`}</p>
    ${kv("replay-table", [["replay required", r.replay_required ? "yes" : "no"], ["backlog messages", r.backlog_messages], ["seconds behind", r.seconds_behind]])}</section>`;
}

function diffCard(diff) {
  const rows = diff.map(f => `<tr data-field="${esc(f.field)}" class="${f.known && !f.equal ? "mismatch" : ""}"><td>${esc(f.field)}</td>
    <td>${esc(f.desired) || '<span class="muted">—</span>'}</td><td>${esc(f.actual) || '<span class="muted">—</span>'}</td>
    <td>${!f.known ? '<span class="muted">unknown</span>' : f.equal ? '<span class="ok">equal</span>' : '<span class="bad">differs</span>'}</td>
    <td class="muted">${esc(f.note || "")}</td></tr>`).join("");
  return `<section class="card" id="fleet-diff"><h2>Desired vs actual, field by field</h2>
    <table><tr><th>field</th><th>desired</th><th>actual</th><th></th><th></th></tr>${rows}</table></section>`;
}

function supplyChainCard(sc, a) {
  const reg = sc.registry;
  const state = sc.state && sc.state !== "ok" ? `<span class="bad">${esc(sc.state)}</span>` : esc(sc.state || "no evidence");
  return `<section class="card" id="supply-chain"><h2>Supply chain: ${state}</h2>
    ${sc.artifact_id ? kv("supply-chain-table", [["artifact", sc.artifact_id], ["reported digest", sc.reported_digest],
      ["registry digest", reg ? reg.digest : "(not in the registry)"], ["version", reg && reg.version], ["signed by", reg && reg.signed_by],
      ["SBOM", reg && reg.sbom_ref], ["provenance", reg && reg.provenance_ref], ["revoked", reg ? (reg.revoked ? "REVOKED" : "no") : ""]])
      : '<p class="muted">The node has not reported an artifact.</p>'}
    <h2>Authority: ${a.state && a.state !== "ok" ? `<span class="bad">${esc(a.state)}</span>` : esc(a.state || "no evidence")}</h2>
    ${kv("authority-table", [["master of record", a.master_of_record], ["record's controllers", a.controller_ids.join(", ")], ["obeys", a.controller_id]])}</section>`;
}

function observationsCard(obs) {
  const items = obs.map(o => `<li data-observation="${esc(o.status)}"><span class="muted">${esc(o.coordinate)}</span> ·
    ${o.status === "fetched" ? `${when(o.occurred_at)} <b>${esc(o.event_type)}</b> by ${esc(o.producer)} · ${esc(o.summary)}`
      : `<span class="${o.status === "expired" ? "muted" : "sev-warning"}">${esc(o.status)}</span>${o.error ? " · " + esc(o.error) : ""}`}</li>`).join("");
  return `<section class="card" id="observations"><h2>Observations timeline <span class="muted">(recent events, newest first)</span></h2>
    ${items ? `<ul class="timeline">${items}</ul>` : '<p class="muted">No recent event recorded.</p>'}</section>`;
}

async function viewNode(id) {
  const d = await api("/nodes/" + encodeURIComponent(id));
  const n = d.node;
  const events = [];
  for (const f of d.findings) for (const h of f.history) events.push({...h, id: f.finding.evidence_id});
  events.sort((a, b) => a.at.localeCompare(b.at));
  const evidence = n ? [["tags", (n.tags || []).join(", ")], ["relay", n.relay_id || "(direct)"], ["node_agent_state", n.node_agent_state], ["node_agent_reason", n.node_agent_reason], ["update_path", n.update_path],
    ["terminal_stream_probe", n.terminal_stream_probe], ["workload_impact", n.workload_impact], ["health", n.health],
    ["connectivity_mode", n.connectivity_mode], ["cert_issuer_fingerprint", n.cert_issuer_fingerprint],
    ["ingress_trust_fingerprint", n.ingress_trust_fingerprint], ["host_fingerprint", n.host_fingerprint],
    ["rtt_ms / loss_pct / kbps", `${n.rtt_ms} / ${n.loss_pct} / ${n.bandwidth_kbps}`],
    ["sync debt", `${n.seconds_behind} s behind, ${n.backlog_messages} messages${n.replay_required ? ", replay required" : ""}`],
    ["last_seen_at", n.last_seen_at]] : [];
  return `<h1>Node ${esc(id)}</h1><p>${n ? domainLink(n.owning_domain) + " · " + esc(n.domain_id) : ""} · <a href="#/">global</a></p>
    <div class="row"><section class="card" id="gate"><h2>Gate: ${gate(d.gate.gate)}</h2><p>${esc(d.gate.summary)}</p>
      ${d.gate.blocking ? '<p class="bad">Blocks production releases.</p>' : ""}</section>
    <section class="card" id="desired-actual"><h2>Desired vs actual</h2>${sideBySide(d.comparison)}</section></div>
    ${d.lifecycle ? `<div class="row">${lifecycleCard(d.lifecycle)}${replayCard(d.replay)}</div>
    <div class="row">${diffCard(d.diff)}${supplyChainCard(d.supply_chain, d.authority)}</div>${observationsCard(d.observations)}` : ""}
    <div class="row"><section class="card" id="evidence"><h2>Node-agent evidence</h2><table>${evidence.map(([k, v]) =>
      `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("")}</table></section>
    <section class="card" id="timeline"><h2>Finding timeline</h2>${timeline(events)}</section></div>
    ${d.findings.length && can("finding_actions") ? `<section class="card" id="node-actions"><h2>Act on this node</h2>
      ${actionForm("action-form", ["quarantine_node", "release_node", "acknowledge", "assign", "retry"], d.findings.map(f => f.finding.evidence_id), false)}</section>` : ""}
    <section class="card" id="node-findings"><h2>Findings (${d.findings.length})</h2>${d.findings.length ? `<table><tr><th>evidence</th><th>status</th><th>severity</th><th>posture</th><th>action</th></tr>${d.findings.map(f =>
      `<tr><td>${findingLink(f.finding.evidence_id)}</td><td>${esc(f.finding.status)}</td><td>${sev(f.finding.severity)}</td><td>${esc(f.finding.posture)}</td><td>${esc(f.action.summary)}</td></tr>`).join("")}</table>` : '<p class="muted">None.</p>'}</section>`;
}

async function viewFinding(id) {
  const d = await api("/drift/" + encodeURIComponent(id));
  const f = d.finding;
  const cmp = [["state", f.expected_state, f.observed_state], ["version", f.expected_version, f.observed_version]]
    .map(([field, desired, observed]) => ({field, desired, observed, match: !desired || !observed || desired === observed}));
  const node = f.provider === "maas" ? ` · node ${nodeLink(f.provider_id)}` : "";
  return `<h1>${esc(f.classification)} · ${esc(f.provider)}/${esc(f.provider_id)}</h1>
    <p>${sev(f.severity)} · ${esc(f.status)} · ${domainLink(f.owning_domain)}${node} · record ${esc(f.record_type)}/${esc(f.record_id)}</p>
    <div class="row"><section class="card" id="desired-actual"><h2>Desired vs actual</h2>${sideBySide(cmp)}
      <p class="muted">observed at ${when(f.observed_at)}</p></section>
    <section class="card" id="action"><h2>Recommended action</h2><p>${esc(d.action.summary)}</p>
      <p>posture <b>${esc(d.action.posture)}</b>${d.action.runbook ? ` · runbook ${esc(d.action.runbook)}` : ""}${d.action.next_attempt_at ? ` · next attempt ${when(d.action.next_attempt_at)}` : ""}</p>
      <p><a href="#" data-download="${API}/bundle?evidence_id=${encodeURIComponent(f.evidence_id)}" data-name="evidence-bundle.arrow">evidence bundle (Arrow)</a> ·
         <a href="#" data-download="${API}/bundle?evidence_id=${encodeURIComponent(f.evidence_id)}&format=parquet" data-name="evidence-bundle.parquet">Parquet</a></p></section></div>
    <div class="row"><section class="card" id="operator"><h2>Operator</h2>${operatorState(f)}</section>
    ${can("finding_actions") ? `<section class="card" id="actions"><h2>Actions</h2>${actionForm("action-form", ACTIONS, [f.evidence_id], false)}</section>` : ""}</div>
    <section class="card" id="timeline"><h2>Timeline and action history</h2>${timeline(d.history)}</section>`;
}

async function viewFinance(params) {
  const q = new URLSearchParams({limit: "200", sort: "first_seen_at"});
  for (const k of ["kind", "tenant", "product", "unit", "status", "day"]) if (params.get(k)) q.set(k, params.get(k));
  const [p, rated] = await Promise.all([api("/billing/mismatches", q), api("/billing/rated", new URLSearchParams({group_by: "tenant"}))]);
  const cur = p.totals.by_currency.map(t => `<tr><td>${esc(t.currency || "(unpriced)")}</td><td class="num">${t.count}</td>
    <td class="num risk">${esc(t.amount_at_risk)}</td><td class="num">${esc(t.rated_amount)}</td><td class="num">${esc(t.ledger_amount)}</td><td class="num">${t.unpriced}</td></tr>`).join("");
  const kinds = p.totals.by_kind.map(t => `<tr><td>${esc(t.kind)}</td><td>${esc(t.currency)}</td><td class="num">${t.count}</td><td class="num">${esc(t.amount_at_risk)}</td></tr>`).join("");
  const rows = p.mismatches.map(m => `<tr data-mismatch="${esc(m.mismatch_id)}"><td>${esc(m.mismatch_id)}</td><td>${esc(m.kind)}</td><td>${esc(m.tenant_id)}</td>
    <td>${esc(m.product_id)}</td><td>${esc(m.unit_id)}</td><td class="num">${esc(m.quantity)}</td><td class="num conflict">${esc(m.conflict_quantity || "")}</td><td class="num">${esc(m.rated_amount)}</td>
    <td class="num">${esc(m.ledger_amount)}</td><td class="num">${esc(m.amount_at_risk)}</td><td>${esc(m.currency)}</td><td>${esc(m.status)}</td><td>${when(m.first_seen_at)}</td></tr>`).join("");
  const csv = new URLSearchParams(q); csv.delete("limit"); csv.set("format", "csv");
  const ratedRows = rated.totals.map(t => `<tr><td>${esc(t.tenant_id)}</td><td>${esc(t.currency)}</td><td class="num">${t.lines}</td><td class="num">${esc(t.amount)}</td></tr>`).join("");
  return `<h1>Finance: billing mismatches</h1>
    <section class="card" id="totals"><h2>Amount at risk · ${p.totals.count} mismatches</h2>
      <table><tr><th>currency</th><th class="num">count</th><th class="num">at risk</th><th class="num">rated</th><th class="num">ledger</th><th class="num">unpriced</th></tr>${cur}</table></section>
    <div class="row"><section class="card" id="by-kind"><h2>By kind</h2><table><tr><th>kind</th><th>currency</th><th class="num">count</th><th class="num">at risk</th></tr>${kinds}</table></section>
    <section class="card" id="rated"><h2>Rated totals by tenant</h2><table><tr><th>tenant</th><th>currency</th><th class="num">lines</th><th class="num">amount</th></tr>${ratedRows}</table></section></div>
    <section class="card" id="mismatches"><h2>Mismatches (${p.count}${p.next_cursor ? "+" : ""}) · <a href="#" data-download="${API}/billing/mismatches?${csv}" data-name="billing-mismatches.csv">CSV</a></h2>
    ${filterForm("billing-filters", params, [{name: "kind", label: "kind", options: KINDS}, {name: "status", label: "status", options: ["open", "resolved", "all"]},
      {name: "tenant", label: "tenant"}, {name: "product", label: "product"}, {name: "unit", label: "unit"}, {name: "day", label: "day (YYYY-MM-DD)"}])}
    ${rows ? `<table><tr><th>mismatch</th><th>kind</th><th>tenant</th><th>product</th><th>unit</th><th class="num">qty</th><th class="num" title="conflicting_usage: the quantity of the usage that repeated the usage_id with other content (qty is the first one's, the one rated)">conflicting qty</th><th class="num">rated</th><th class="num">ledger</th>
      <th class="num">at risk</th><th>cur</th><th>status</th><th>first seen</th></tr>${rows}</table>` : '<p class="muted">No mismatch matches.</p>'}</section>`;
}

function forbidden(what) {
  return `<p class="muted" id="forbidden">This key's roles (${esc(session.roles.join(", ") || "none")}) do not include the ${esc(what)} view.</p>`;
}

let rendering = false;
async function render() {
  if (rendering || acting) return;
  rendering = true;
  const {parts, params} = route();
  const view = document.getElementById("view");
  let name = "global";
  try {
    if (!session) session = await api("/session");
    showSession();
    let html;
    const fleet = can("heatmap");
    if (parts[0] === "finance" || (!fleet && parts.length === 0 && can("billing_mismatches"))) {
      name = "finance";
      html = can("billing_mismatches") ? await viewFinance(params) : forbidden("finance");
    } else if (!fleet) html = forbidden("fleet");
    else if (parts[0] === "domain" && parts[1] !== undefined) { name = "domain"; html = await viewDomain(parts[1], params); }
    else if (parts[0] === "node" && parts[1]) { name = "node"; html = await viewNode(parts.slice(1).join("/")); }
    else if (parts[0] === "finding" && parts[1]) { name = "finding"; html = await viewFinding(parts.slice(1).join("/")); }
    else html = await viewGlobal(params);
    // Keep a focused filter control across refreshes.
    const focused = document.activeElement && document.activeElement.name;
    view.innerHTML = html;
    bindForm("node-filters");
    bindForm("global-filters");
    bindForm("billing-filters");
    const batchQ = new URLSearchParams();
    if (name === "domain") {
      batchQ.set("owning_domain", parts[1]);
      for (const k of ["classification", "severity"]) if (params.get(k)) batchQ.set(k, params.get(k));
    }
    bindActionForm("action-form", null);
    bindActionForm("batch-form", batchQ);
    if (focused) { const el = view.querySelector(`[name="${focused}"]`); if (el) el.focus(); }
    document.body.dataset.view = name;
    document.body.dataset.ready = "1";
    document.getElementById("refresh").textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC · every " + REFRESH + " s";
  } catch (e) {
    if (e instanceof SignInNeeded) {
      showSession();
      if (!document.getElementById("signin-form")) view.innerHTML = signInView(e.message);
      bindSignIn();
      document.body.dataset.view = "signin";
      document.body.dataset.ready = "signin";
    } else {
      view.innerHTML = `<p class="error" id="error">Could not load: ${esc(e.message)}</p>`;
      document.body.dataset.ready = "error";
    }
  } finally {
    rendering = false;
  }
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === name);
}

window.addEventListener("hashchange", () => { lastResult = ""; acting = false; render(); });
render();
setInterval(render, REFRESH * 1000);
