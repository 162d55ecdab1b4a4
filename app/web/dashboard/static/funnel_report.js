/* The funnel page's report chart, drawn with the vendored uPlot from the JSON in each
   .funnel-chart element's data-chart attribute (no inline script: the page's CSP is
   script-src 'self'). One group of bars per node of the version, in graph order: people who
   entered it, who wait on it now, who ended there early, and for message nodes the messages sent
   and opened. The table beside the chart holds the same figures, with the rates. */
(function () {
  "use strict";
  var COLOURS = ["#2453c7", "#c98a04", "#b42318", "#157f3b", "#7a3fc2", "#0e7490"];

  function draw(el) {
    var spec;
    try { spec = JSON.parse(el.getAttribute("data-chart")); } catch (e) { return; }
    var n = spec.labels.length;
    if (!n || typeof uPlot === "undefined") { return; }
    var x = [];
    for (var i = 0; i < n; i++) { x.push(i); }
    var data = [x];
    var k = spec.series.length;
    var group = 0.8;
    var series = [{ label: "node", value: function (u, v) { return v == null ? "—" : spec.labels[v]; } }];
    spec.series.forEach(function (s, j) {
      data.push(s.values);
      var colour = COLOURS[j % COLOURS.length];
      series.push({
        label: s.label,
        stroke: colour,
        fill: colour,
        width: 1,
        points: { show: false },
        // Bars side by side within each node's slot.
        paths: uPlot.paths.bars({
          disp: {
            x0: { unit: 1, values: function () { return x.map(function (v) { return v - group / 2 + (j * group) / k; }); } },
            size: { unit: 1, values: function () { return [group / k]; } }
          }
        }),
        value: function (u, v) { return v == null ? "—" : String(v); }
      });
    });
    var opts = {
      title: spec.title,
      width: Math.max(280, el.clientWidth || 600),
      height: 260,
      scales: {
        x: { time: false, range: function () { return [-0.6, n - 0.4]; } },
        y: { range: function (u, min, max) { return [0, Math.max(1, Math.ceil((max || 0) * 1.15))]; } }
      },
      series: series,
      axes: [
        { splits: function () { return x; }, values: function (u, splits) { return splits.map(function (v) { return spec.labels[v] || ""; }); }, space: 40 },
        { label: spec.y_label }
      ],
      legend: { show: true }
    };
    el.textContent = "";
    el.uplot = new uPlot(opts, data, el);
  }

  function drawAll() {
    Array.prototype.forEach.call(document.querySelectorAll(".funnel-chart[data-chart]"), draw);
  }

  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      Array.prototype.forEach.call(document.querySelectorAll(".funnel-chart"), function (el) {
        if (el.uplot) { el.uplot.setSize({ width: Math.max(280, el.clientWidth), height: 260 }); }
      });
    }, 150);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
