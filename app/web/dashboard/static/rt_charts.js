/* Position tracking charts, drawn with the vendored uPlot from the JSON in each
   .rt-chart element's data-chart attribute (no inline script: the page's CSP is script-src 'self').
   One x per measurement (desktop and mobile of a request share it), every point drawn (a single
   measurement shows), a gap where a run measured nothing, dates on the time axis, and a legend. */
(function () {
  "use strict";
  var COLOURS = { desktop: "#2453c7", mobile: "#c98a04" };
  var FALLBACK = ["#157f3b", "#7a3fc2", "#b42318", "#0e7490", "#6b7385"];
  var DAY = 86400;

  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function day(ts) {
    var d = new Date(ts * 1000);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
  }
  function stamp(ts) {
    var d = new Date(ts * 1000);
    return day(ts) + " " + pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + " UTC";
  }

  function xRange(u, min, max) {
    // A single measurement (or several on one day) still gets a readable span of dates. The
    // bounds are read from the data itself: with a single x, uPlot passes an automatic range of
    // years here.
    var xs = u.data && u.data[0];
    if (xs && xs.length) { min = xs[0]; max = xs[xs.length - 1]; }
    if (min == null || max == null) { return [0, DAY]; }
    return max - min < DAY ? [min - DAY, max + DAY] : [min - DAY / 2, max + DAY / 2];
  }

  function yRange(inverted) {
    return function (u, min, max) {
      if (min == null || max == null) { return inverted ? [1, 10] : [0, 100]; }
      if (inverted) { return [Math.max(1, Math.floor(min) - 1), Math.ceil(max) + 1]; }
      return [0, Math.max(10, Math.ceil(max * 1.1))];
    };
  }

  // Notes on the time axis: a dotted vertical line per note inside the plotted range (purple:
  // a person's note; grey: a change found on the results page). Their text is listed below.
  function drawNotes(u, notes) {
    var ctx = u.ctx, box = u.bbox, drawn = 0;
    ctx.save();
    ctx.setLineDash([3, 4]);
    ctx.lineWidth = 1.5;
    notes.forEach(function (n) {
      var x = Math.round(u.valToPos(n.x, "x", true));
      if (x < box.left || x > box.left + box.width) { return; }
      ctx.strokeStyle = n.kind === "user" ? "#7a3fc2" : "#8a8f9c";
      ctx.beginPath();
      ctx.moveTo(x, box.top);
      ctx.lineTo(x, box.top + box.height);
      ctx.stroke();
      drawn += 1;
    });
    ctx.restore();
    u.root.parentNode.setAttribute("data-notes-drawn", String(drawn));
  }

  function draw(el) {
    var spec;
    try { spec = JSON.parse(el.getAttribute("data-chart")); } catch (e) { return; }
    var data = [spec.x];
    var series = [{ label: "measured", value: function (u, v) { return v == null ? "—" : stamp(v); } }];
    spec.series.forEach(function (s, i) {
      data.push(s.values);
      var colour = s.color || COLOURS[s.label] || FALLBACK[i % FALLBACK.length];
      // A competitor ("domain (device)") is dashed beside the tracked domain's solid lines; a
      // series with its own colour (the balance) is not a competitor.
      var competitor = !s.color && s.label.indexOf(" (") > 0;
      series.push({
        label: s.label,
        stroke: colour,
        width: competitor ? 1.5 : 2,
        dash: competitor ? [6, 4] : undefined,
        spanGaps: false,
        points: { show: true, size: 8, fill: colour, stroke: colour },
        value: function (u, v) { return v == null ? "—" : String(v); }
      });
    });
    var opts = {
      title: spec.title,
      width: Math.max(280, el.clientWidth || 600),
      height: 240,
      scales: {
        x: { time: true, range: xRange },
        y: { dir: spec.inverted ? -1 : 1, range: yRange(spec.inverted) }
      },
      series: series,
      axes: [
        {
          incrs: [DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY, 91 * DAY, 182 * DAY, 364 * DAY],
          values: function (u, splits) { return splits.map(day); },
          space: 90
        },
        { label: spec.y_label }
      ],
      legend: { show: true },
      hooks: { draw: [function (u) { drawNotes(u, spec.notes || []); }] }
    };
    el.textContent = "";
    el.uplot = new uPlot(opts, data, el);
  }

  function drawAll() {
    Array.prototype.forEach.call(document.querySelectorAll(".rt-chart[data-chart]"), draw);
  }

  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      Array.prototype.forEach.call(document.querySelectorAll(".rt-chart"), function (el) {
        if (el.uplot) { el.uplot.setSize({ width: Math.max(280, el.clientWidth), height: 240 }); }
      });
    }, 150);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
