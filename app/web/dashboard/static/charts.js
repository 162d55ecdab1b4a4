// Shared charts of the dashboard, drawn with the vendored uPlot (static/vendor/uplot) from the JSON
// in an element's data-chart attribute (no inline script: the CSP is script-src 'self'):
//
//   <div class="sw-chart" data-chart='{"x": [unix seconds…], "series": [{"label": "sent",
//        "values": [n…], "color": "#2453c7"}], "y_label": "messages", "bars": true}'></div>
//
// A series may also carry "dash" (a line dash pattern, e.g. [6, 4]) and "span_gaps" (draw the line
// across missing values: a series sampled only at some of the x values).
//
// Times are labelled in UTC, each tick as precisely as the ticks' spacing needs (dates, hours,
// minutes, seconds), so no two ticks read the same; a missing value (null) is a gap. The time axis
// spans the data (a single time gets an hour either side), never uPlot's automatic range, which
// for one x runs years ahead and squeezes every point against the left edge. Charts inside
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
  var HOUR = 3600, DAY = 86400;

  // A tick at one of four precisions: 0 the date, 1 the hour and minute, 2 the seconds too;
  // the date is kept before the time while the axis spans more than a day.
  function tick(ts, precision, withDate) {
    var d = new Date(ts * 1000);
    var date = pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
    if (precision === 0) return date;
    var time = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    if (precision === 2) time += ":" + pad(d.getUTCSeconds());
    return withDate ? date + " " + time : time;
  }

  // The labels of the ticks uPlot chose: the coarsest precision their spacing allows, made finer
  // until no two labels are the same.
  function ticks(splits, range) {
    var step = splits.length > 1 ? splits[1] - splits[0] : range;
    var precision = step >= DAY ? 0 : (step >= 60 ? 1 : 2);
    var withDate = range > DAY;
    for (;;) {
      var labels = splits.map(function (s) { return tick(s, precision, withDate); });
      var distinct = labels.filter(function (l, i) { return labels.indexOf(l) === i; });
      if (distinct.length === labels.length || (precision === 2 && withDate)) return labels;
      if (precision < 2) precision += 1;
      else withDate = true;
    }
  }

  // The x range from the data itself: a single time (a first run) gets an hour either side,
  // anything else a small margin, wide enough for half a bar at each end.
  function xRange(xs, bars) {
    var min = xs[0], max = xs[xs.length - 1];
    if (min == null || max == null) return [0, HOUR];
    if (max - min < HOUR) {
      var mid = (min + max) / 2;
      return [mid - HOUR, mid + HOUR];
    }
    var gap = max - min;
    for (var i = 1; i < xs.length; i++) gap = Math.min(gap, xs[i] - xs[i - 1] || gap);
    var margin = Math.max((max - min) * 0.03, bars ? gap / 2 : 0);
    return [min - margin, max + margin];
  }

  function draw(el) {
    var spec;
    try { spec = JSON.parse(el.getAttribute("data-chart")); } catch (e) { return; }
    if (typeof window.uPlot !== "function" || !spec.x) return;
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
      scales: {
        x: { time: true, range: function () { return xRange(spec.x, !!bars); } },
        y: { range: function (u, min, max) { return [0, Math.max(1, Math.ceil((max || 0) * 1.1))]; } }
      },
      axes: [
        {
          values: function (u, splits) {
            return ticks(splits, u.scales.x.max - u.scales.x.min);
          },
          space: 90
        },
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
