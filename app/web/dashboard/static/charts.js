// Shared charts of the dashboard, drawn with the vendored uPlot (static/vendor/uplot) from the JSON
// in an element's data-chart attribute (no inline script: the CSP is script-src 'self'):
//
//   <div class="sw-chart" data-chart='{"x": [unix seconds…], "series": [{"label": "sent",
//        "values": [n…], "color": "#2453c7"}], "y_label": "messages", "bars": true}'></div>
//
// A series may also carry "dash" (a line dash pattern, e.g. [6, 4]) and "span_gaps" (draw the line
// across missing values: a series sampled only at some of the x values).
//
// Hourly or daily x values are labelled in UTC; a missing value (null) is a gap. Charts inside
// content htmx swaps in are drawn again, and every chart follows its box's width.
(function () {
  "use strict";
  var PALETTE = ["#2453c7", "#157f3b", "#b42318", "#c98a04", "#7a3fc2", "#0e7490"];
  var HEIGHT = 220;

  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function stamp(ts) {
    var d = new Date(ts * 1000);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) +
      " " + pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + " UTC";
  }
  function tick(ts, span) {
    var d = new Date(ts * 1000);
    var date = pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
    return span > 3 * 86400 ? date : date + " " + pad(d.getUTCHours()) + "h";
  }

  function draw(el) {
    var spec;
    try { spec = JSON.parse(el.getAttribute("data-chart")); } catch (e) { return; }
    if (typeof window.uPlot !== "function" || !spec.x) return;
    var span = spec.x.length > 1 ? spec.x[spec.x.length - 1] - spec.x[0] : 3600;
    var bars = spec.bars && window.uPlot.paths && window.uPlot.paths.bars
      ? window.uPlot.paths.bars({ size: [0.8, 40] }) : null;
    var series = [{ label: "time", value: function (u, v) { return v == null ? "—" : stamp(v); } }];
    var data = [spec.x];
    spec.series.forEach(function (s, i) {
      var colour = s.color || PALETTE[i % PALETTE.length];
      data.push(s.values);
      series.push({
        label: s.label,
        stroke: colour,
        fill: bars ? colour + "99" : undefined,
        width: bars ? 1 : 2,
        paths: bars || undefined,
        dash: s.dash || undefined,
        spanGaps: !!s.span_gaps,
        points: { show: !bars && spec.x.length < 60, size: 6, fill: colour },
        value: function (u, v) { return v == null ? "—" : String(v); }
      });
    });
    var opts = {
      width: Math.max(260, el.clientWidth || 600),
      height: HEIGHT,
      series: series,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, Math.ceil((max || 0) * 1.1))]; } } },
      axes: [
        { values: function (u, splits) { return splits.map(function (s) { return tick(s, span); }); }, space: 70 },
        { label: spec.y_label || "", size: 50 }
      ],
      legend: { show: true }
    };
    if (el.uplot) el.uplot.destroy();
    el.textContent = "";
    el.uplot = new window.uPlot(opts, data, el);
  }

  function drawIn(root) {
    if (root.matches && root.matches(".sw-chart[data-chart]")) draw(root);
    Array.prototype.forEach.call(root.querySelectorAll(".sw-chart[data-chart]"), draw);
  }

  function start() {
    drawIn(document);
    document.body.addEventListener("htmx:afterSwap", function (event) { drawIn(event.target); });
    var resizing = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizing);
      resizing = setTimeout(function () {
        Array.prototype.forEach.call(document.querySelectorAll(".sw-chart"), function (el) {
          if (el.uplot) el.uplot.setSize({ width: Math.max(260, el.clientWidth), height: HEIGHT });
        });
      }, 150);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
