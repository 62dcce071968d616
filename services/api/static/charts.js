// Charts drawn with the plotly.js bundle served from /static/plotly.min.js (no CDN).
// Data comes from the JSON API named in each chart's data-src attribute.
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var FIRING = "rgba(180, 35, 24, 0.13)";
  var PENDING = "rgba(154, 103, 0, 0.10)";

  function layout(extra) {
    var base = { autosize: true, margin: { l: 48, r: 12, t: 12, b: 40 }, legend: { orientation: "h", y: -0.2 },
                 font: { size: 12 }, hovermode: "closest" };
    Object.keys(extra || {}).forEach(function (k) { base[k] = extra[k]; });
    return base;
  }

  // Plotly reads a few HTML-like tags in labels; show trace text literally instead.
  function inert(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function fail(el, text) {
    el.textContent = text;
    el.classList.add("muted");
  }

  function load(el, draw) {
    fetch(el.getAttribute("data-src"), { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (data) { draw(el, data); })
      .catch(function (err) { fail(el, "Chart unavailable: " + err.message); });
  }

  function drawRoute(el, d) {
    var xs = d.series.map(function (p) { return p.minute; });
    var traces = [
      { x: xs, y: d.series.map(function (p) { return p.hi; }), type: "scatter", mode: "lines",
        line: { width: 0 }, hoverinfo: "skip", showlegend: false },
      { x: xs, y: d.series.map(function (p) { return p.lo; }), type: "scatter", mode: "lines", fill: "tonexty",
        fillcolor: "rgba(11, 92, 173, 0.18)", line: { width: 0 }, name: "95% interval", hoverinfo: "skip" },
      { x: xs, y: d.series.map(function (p) { return p.rate; }), type: "scatter", mode: "lines",
        line: { color: "#0b5cad", width: 2 }, name: "rate",
        customdata: d.series.map(function (p) { return [p.failed, p.claims]; }),
        hovertemplate: "%{y:.1%} (%{customdata[0]}/%{customdata[1]} claims)<extra></extra>" }
    ];
    var shapes = [];
    var annotations = [];
    if (d.baseline && d.baseline.rate !== null) {
      traces.push({ x: [d.start, d.end], y: [d.baseline.rate, d.baseline.rate], type: "scatter", mode: "lines",
                    line: { color: "#59636e", dash: "dash", width: 1.5 }, name: "baseline", hoverinfo: "y" });
    }
    d.alerts.forEach(function (a) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: a.start, x1: a.end || d.end, y0: 0, y1: 1,
                    fillcolor: a.firing_at ? FIRING : PENDING, line: { width: 0 }, layer: "below" });
    });
    var first = d.series.length ? Date.parse(d.series[0].minute) : Date.parse(d.start);
    var seen = d.versions.map(function (v) { return Date.parse(v.first_seen); });
    // the route's first events carried these (every value is listed, so the earliest is the route's first)
    var original = d.versions_seen === d.versions.length ? Math.min.apply(null, seen) : null;
    d.versions.forEach(function (v, i) {
      if (seen[i] <= first || seen[i] === original) { return; }  // there from the start: not a change
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: v.first_seen, x1: v.first_seen, y0: 0, y1: 1,
                    line: { color: "#9a6700", width: 1, dash: "dot" } });
      annotations.push({ x: v.first_seen, y: 1, xref: "x", yref: "paper", text: inert(v.key + "=" + v.value),
                         showarrow: false, xanchor: "left", yanchor: "top", font: { size: 10, color: "#9a6700" } });
    });
    // an alert's own page: what it expected while open, and its estimated onset
    if (el.dataset.expected) {
      var expected = Number(el.dataset.expected);
      traces.push({ x: [el.dataset.expectedFrom, el.dataset.expectedTo], y: [expected, expected], type: "scatter",
                    mode: "lines", line: { color: "#b42318", dash: "dash", width: 2 }, name: "expected (this alert)",
                    hoverinfo: "y" });
    }
    if (el.dataset.onset) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: el.dataset.onset, x1: el.dataset.onset, y0: 0, y1: 1,
                    line: { color: "#b42318", width: 2 } });
      annotations.push({ x: el.dataset.onset, y: 0.98, xref: "x", yref: "paper", text: "onset", showarrow: false,
                         xanchor: "right", yanchor: "top", font: { size: 11, color: "#b42318" } });
    }
    Plotly.newPlot(el, traces, layout({ yaxis: { tickformat: ".0%", rangemode: "tozero", title: { text: "failed claims" } },
                                       shapes: shapes, annotations: annotations }), CONFIG);
  }

  function drawMap(el, d) {
    if (!d.points.some(function (p) { return p.member; })) {
      // issues formed from an alert's window (a focused run) are placed by the next full re-cluster
      fail(el, "Not on the map yet: this issue's claims are placed at the next full re-cluster.");
      el.classList.add("map-pending");
      return;
    }
    var groups = { member: { x: [], y: [], text: [] }, other: { x: [], y: [], text: [] } };
    d.points.forEach(function (p) {
      var g = p.member ? groups.member : groups.other;
      g.x.push(p.x); g.y.push(p.y); g.text.push(inert(p.issue_id + ": " + p.text));
    });
    var traces = [
      { x: groups.other.x, y: groups.other.y, text: groups.other.text, type: "scatter", mode: "markers",
        marker: { color: "#b6bec8", size: 6 }, name: "neighbouring issues", hoverinfo: "text" },
      { x: groups.member.x, y: groups.member.y, text: groups.member.text, type: "scatter", mode: "markers",
        marker: { color: "#b42318", size: 7 }, name: "this issue", hoverinfo: "text" }
    ];
    Plotly.newPlot(el, traces, layout({ xaxis: { showticklabels: false, zeroline: false },
                                       yaxis: { showticklabels: false, zeroline: false } }), CONFIG);
  }

  // An SLO's budget remaining from the start of its window to now (GET /api/slos/{name}: burndown).
  function drawBurndown(el, d) {
    if (!d.burndown.length) { fail(el, "No traffic in the window yet."); return; }
    var xs = d.burndown.map(function (p) { return p[0]; });
    var traces = [
      { x: xs, y: d.burndown.map(function (p) { return p[1]; }), type: "scatter", mode: "lines",
        line: { color: "#1f5fa8", width: 2 }, name: "budget remaining",
        hovertemplate: "%{x}<br>%{y:.1%} of the budget left<extra></extra>" },
      { x: [xs[0], xs[xs.length - 1]], y: [0, 0], type: "scatter", mode: "lines",
        line: { color: "#b42318", dash: "dot", width: 1 }, name: "all of it spent", hoverinfo: "skip" }
    ];
    Plotly.newPlot(el, traces, layout({ yaxis: { tickformat: ".0%", title: { text: "budget left" } } }), CONFIG);
  }

  // The verifier's mean score against how often labels agreed, per tenth of the score, one trace per version
  // (GET /api/review/agreement: confidence, every route of a version).
  function drawReliability(el, d) {
    var checks = d.confidence.filter(function (c) { return c.route === "all"; });
    if (!checks.length) { fail(el, "No settled label of a scored claim yet."); return; }
    var colours = ["#0b5cad", "#b42318", "#1a7f37", "#9a6700", "#6639ba"];
    var traces = [{ x: [0, 1], y: [0, 1], type: "scatter", mode: "lines", name: "the score means what it says",
                    line: { color: "#59636e", dash: "dash", width: 1 }, hoverinfo: "skip" }];
    checks.forEach(function (c, i) {
      traces.push({
        x: c.bins.map(function (b) { return b.mean_score; }), y: c.bins.map(function (b) { return b.agreement; }),
        error_y: { type: "data", symmetric: false, array: c.bins.map(function (b) { return b.hi - b.agreement; }),
                   arrayminus: c.bins.map(function (b) { return b.agreement - b.lo; }), thickness: 1 },
        customdata: c.bins.map(function (b) { return b.labels; }), type: "scatter", mode: "lines+markers",
        line: { color: colours[i % colours.length], width: 2 }, name: inert("verifier " + c.verifier_version),
        hovertemplate: "score %{x:.2f}: %{y:.0%} agreed (%{customdata} labels)<extra></extra>" });
    });
    Plotly.newPlot(el, traces, layout({
      margin: { l: 48, r: 12, t: 12, b: 80 }, legend: { orientation: "h", y: -0.32 },
      xaxis: { range: [0, 1], title: { text: "the verifier's score (its confidence in its verdict)" } },
      yaxis: { range: [0, 1.02], tickformat: ".0%", title: { text: "labels that agreed" } } }), CONFIG);
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof window.Plotly === "undefined") { return; }
    ["route-chart", "alert-chart"].forEach(function (id) {
      var chart = document.getElementById(id);
      if (chart) { load(chart, drawRoute); }
    });
    var map = document.getElementById("issue-map");
    if (map) { load(map, drawMap); }
    var burndown = document.getElementById("slo-burndown");
    if (burndown) { load(burndown, drawBurndown); }
    var reliability = document.getElementById("review-reliability");
    if (reliability) { load(reliability, drawReliability); }
  });
}());
