// The review page: one key per label, the span picked by selecting text in a chunk, undo before sending.
// Everything goes through the JSON API with the tab's bearer token (see app.js), so auth and limits apply.
(function () {
  "use strict";
  var TOKEN_KEY = "claimwatch.token";
  var BY_KEY = "claimwatch.by";
  var KEYS = { s: "supported", c: "contradicted", u: "unsupported", o: "overreach", t: "stale" };
  var UNDO_MS = 3000;
  var slot = null;        // the reserved slot being labelled
  var pending = null;     // {label, span, timer} waiting to be sent
  var sent = false;

  function $(id) { return document.getElementById(id); }
  function say(text, isError) {
    var box = $("action-status");
    box.textContent = text;
    box.classList.toggle("error", Boolean(isError));
  }
  function detailText(detail) {
    if (typeof detail === "string") { return detail; }
    if (Array.isArray(detail)) { return detail.map(function (d) { return (d.loc || []).join(".") + ": " + d.msg; }).join("; "); }
    return JSON.stringify(detail);
  }
  function call(method, path, body) {
    var headers = { "Accept": "application/json", "Content-Type": "application/json" };
    var token = window.sessionStorage.getItem(TOKEN_KEY);
    if (token) { headers.Authorization = "Bearer " + token; }
    return fetch(path, { method: method, headers: headers, credentials: "same-origin",
                         body: body ? JSON.stringify(body) : undefined }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (!response.ok) {
          var hint = response.status === 401 || response.status === 403 ? " Enter a token in the API token field." : "";
          throw new Error("HTTP " + response.status + ": " + detailText(data.detail) + hint);
        }
        return data;
      });
    });
  }
  // "08:05 UTC" from an ISO time: the reservation's end, as a person reads it.
  function clock(iso) {
    var t = new Date(iso);
    if (isNaN(t.getTime())) { return String(iso); }
    return ("0" + t.getUTCHours()).slice(-2) + ":" + ("0" + t.getUTCMinutes()).slice(-2) + " UTC";
  }

  function fill(table, rows, empty) {
    var body = table.tBodies[0];
    body.textContent = "";
    if (!rows.length) { rows = [[empty]]; }
    rows.forEach(function (cells) {
      var tr = document.createElement("tr");
      cells.forEach(function (text) {
        var cell = document.createElement("td");
        cell.textContent = text;
        if (cells.length === 1) { cell.colSpan = table.tHead.rows[0].cells.length; }
        tr.appendChild(cell);
      });
      body.appendChild(tr);
    });
  }

  // Progress as the labels just given move it (same cells as the server renders).
  function refreshProgress() {
    return call("GET", "/api/review/progress").then(function (p) {
      fill($("review-strata"), p.strata.map(function (s) {
        return [s.route, s.verdict, s.score_band || "—", s.issue_id || "—", String(s.claims), s.labelled + " / " + s.slots];
      }), "Nothing queued: run claimwatch review sample.");
      fill($("review-reviewers"), p.reviewers.map(function (r) { return [r.reviewer, r.role, String(r.labels)]; }),
           "No labels yet.");
    });
  }

  function reviewer() { return $("review-reviewer").value.trim(); }

  function show(next) {
    slot = next; sent = false; pending = null;
    $("review-card").hidden = false;
    $("review-revealed").hidden = true;
    $("review-revealed").textContent = "";
    $("review-pending").textContent = "Label it: s c u o t";
    $("review-meta").textContent = "route " + next.route + " · slot held until " + clock(next.expires_at);
    $("review-claim").textContent = next.claim;
    $("review-question").textContent = next.question;
    $("review-answer").textContent = next.answer_excerpt;
    var list = $("review-chunks");
    list.textContent = "";
    next.chunks.forEach(function (chunk) {
      var item = document.createElement("li");
      var id = document.createElement("span");
      id.className = "mono muted";
      id.textContent = "[" + chunk.chunk_id + "] ";
      var text = document.createElement("span");
      text.className = "chunk-text";
      text.textContent = chunk.text;
      item.appendChild(id);
      item.appendChild(text);
      list.appendChild(item);
    });
    say("");
  }

  function next() {
    if (!reviewer()) { say("Enter your name as reviewer first.", true); $("review-reviewer").focus(); return; }
    window.localStorage.setItem(BY_KEY, reviewer());
    if (pending) { return; }
    call("POST", "/api/review/next", { reviewer: reviewer() }).then(show).catch(function (err) { say(err.message, true); });
  }

  function selectedSpan() {
    var selection = window.getSelection();
    if (!selection || selection.isCollapsed) { return ""; }
    var node = selection.anchorNode && selection.anchorNode.parentElement;
    return node && node.closest("#review-chunks") ? selection.toString().trim() : "";
  }

  function choose(label) {
    if (!slot || sent) { return; }
    if (pending) { window.clearTimeout(pending.timer); }
    pending = { label: label, span: selectedSpan() };
    pending.timer = window.setTimeout(send, UNDO_MS);
    $("review-pending").textContent = label + (pending.span ? " with span “" + pending.span + "”" : "") +
      ": sending in 3 s (z undo, Enter send now)";
  }

  function undo() {
    if (!pending) { return; }
    window.clearTimeout(pending.timer);
    pending = null;
    $("review-pending").textContent = "Undone. Label it: s c u o t";
  }

  function row(list, term, value) {
    var dt = document.createElement("dt");
    dt.textContent = term;
    var dd = document.createElement("dd");
    dd.textContent = value;
    list.appendChild(dt);
    list.appendChild(dd);
  }

  function send() {
    if (!pending) { return; }
    var choice = pending;
    window.clearTimeout(choice.timer);
    pending = null;
    call("POST", "/api/review/" + encodeURIComponent(slot.slot) + "/label",
         { reviewer: reviewer(), label: choice.label, span: choice.span }).then(function (done) {
      sent = true;
      $("review-pending").textContent = "Labelled " + done.label + ". n: next claim";
      var list = $("review-revealed");
      row(list, "Verifier said", done.verifier_verdict + (done.verifier_span ? " — " + done.verifier_span : ""));
      done.others.forEach(function (o) { row(list, o.role + " " + o.reviewer, o.label); });
      row(list, "Settled", done.settled || "not yet");
      list.hidden = false;
      return Promise.all([refreshAgreement(), refreshCalibrated(), refreshPlan(), refreshProgress()]);
    }).catch(function (err) {
      $("review-pending").textContent = "Not saved. Label it again: s c u o t";
      say(err.message, true);
    });
  }

  function kappaText(f) {
    if (!f || f.value === null) { return "—"; }
    var band = f.lo !== null && !f.note ? " (" + f.lo.toFixed(2) + "–" + f.hi.toFixed(2) + " at 95%)" : "";
    return f.value.toFixed(2) + band + " over " + f.items + " claims";
  }

  function refreshAgreement() {
    return call("GET", "/api/review/agreement").then(function (report) {
      var all = report.overall;
      $("review-human-kappa").textContent = kappaText(all.human && all.human.kappa);
      $("review-verifier-kappa").textContent = kappaText(all.verifier && all.verifier.kappa);
      $("review-disputed").textContent = String(report.disagreements.length);
    });
  }

  function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"; }

  function calibratedText(c) {
    if (!c) { return "—"; }
    if (c.rate === null) { return "— (stale: " + (c.reasons[0] || "no labels") + ")"; }
    return pct(c.rate) + (c.interval ? " (" + pct(c.interval[0]) + "–" + pct(c.interval[1]) + ")" : "") +
      (c.pooled ? " pooled" : c.estimator_note ? " RG" : "") + (c.stale ? " stale" : "");
  }

  // The calibrated rates as the labels just given move them (same cells as the server renders).
  function refreshCalibrated() {
    var table = $("review-calibrated");
    return call("GET", "/api/rates?calibrated=true&window=" + encodeURIComponent(table.dataset.window)).then(function (rates) {
      var body = table.tBodies[0];
      body.textContent = "";
      rates.slice().sort(function (a, b) { return a.route < b.route ? -1 : 1; }).forEach(function (r) {
        var c = r.calibrated;
        var tr = document.createElement("tr");
        tr.dataset.route = r.route;
        var cells = [r.route, pct(r.rate), calibratedText(c),
                     c && c.sensitivity !== null ? c.sensitivity.toFixed(2) + " / " + c.specificity.toFixed(2) : "—",
                     c ? String(c.labels) : "0"];
        cells.forEach(function (text, i) {
          var cell = document.createElement(i ? "td" : "th");
          if (i) { cell.className = "num"; } else { cell.scope = "row"; }
          cell.textContent = text;
          tr.appendChild(cell);
        });
        body.appendChild(tr);
      });
    });
  }

  // The plan as the labels just given move it (same cells as the server renders).
  function refreshPlan() {
    var table = $("review-plan");
    return call("GET", "/api/review/plan?window=" + encodeURIComponent(table.dataset.window)).then(function (plans) {
      var body = table.tBodies[0];
      body.textContent = "";
      plans.forEach(function (p) {
        var tr = document.createElement("tr");
        tr.dataset.route = p.route;
        var cells = [p.route, p.width === null ? "—" : (100 * p.width).toFixed(1) + " pts",
                     p.more === null ? "—" : String(p.more), String(p.flagged), String(p.passed), p.note];
        cells.forEach(function (text, i) {
          var cell = document.createElement(i ? "td" : "th");
          if (i === 0) { cell.scope = "row"; } else if (i < 5) { cell.className = "num"; }
          cell.textContent = text;
          tr.appendChild(cell);
        });
        body.appendChild(tr);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("review-start").addEventListener("submit", function (event) { event.preventDefault(); next(); });
    document.addEventListener("keydown", function (event) {
      var target = event.target;
      if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA") ||
          event.ctrlKey || event.metaKey || event.altKey) { return; }
      var key = event.key.toLowerCase();
      if (KEYS[key]) { choose(KEYS[key]); }
      else if (key === "z") { undo(); }
      else if (key === "enter" && pending) { send(); }
      else if (key === "n") { next(); }
      else { return; }
      event.preventDefault();
    });
  });
}());
