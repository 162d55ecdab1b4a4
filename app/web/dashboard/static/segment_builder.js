// Segment builders on a page ([data-segment-builder]): predicate rows (predicate_builder.js) with
// the number of contacts matching now, counted by the server after each change. A builder may
// write its predicate into a form's hidden input (.sb-input), e.g. a campaign's audience, and
// start from the predicate its data names ("initial").
(function () {
  "use strict";

  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["x-csrf-token"] || ""; }
    catch (e) { return ""; }
  }

  function setup(box) {
    var data = JSON.parse(box.querySelector(".sb-data").textContent);
    var rows = box.querySelector(".sb-rows");
    var count = box.querySelector(".sb-count");
    var sample = box.querySelector(".sb-sample");
    var problems = box.querySelector(".sb-problems");
    var campaign = box.querySelector(".sb-campaign");
    var json = box.querySelector(".sb-json");
    var input = box.querySelector(".sb-input");
    var timer = null;
    var seq = 0;

    function show(body) {
      problems.textContent = "";
      problems.hidden = !body.problems.length;
      body.problems.forEach(function (p) {
        var li = document.createElement("li");
        li.textContent = p;
        problems.appendChild(li);
      });
      count.textContent = body.count === null ? "—" : String(body.count);
      if (sample) {
        sample.textContent = "";
        body.sample.forEach(function (c) {
          var li = document.createElement("li");
          var a = document.createElement("a");
          a.href = "/ui/funnels/contacts/" + c.id;
          a.textContent = c.email;
          li.appendChild(a);
          sample.appendChild(li);
        });
      }
      if (campaign && body.campaign_url) campaign.href = body.campaign_url;
    }

    function recount(predicate) {
      var mine = ++seq;
      count.textContent = "…";
      fetch(data.count_url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-csrf-token": csrf() },
        body: JSON.stringify({ predicate: predicate })
      }).then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.json();
      }).then(function (body) {
        if (mine === seq) show(body);
      }).catch(function () {
        if (mine === seq) count.textContent = "could not count";
      });
    }

    // No row at all means everyone (the API's "no audience").
    function changed(predicate) {
      var everyone = predicate.kind === "all" && !predicate.predicates.length;
      if (json) json.value = everyone ? "" : JSON.stringify(predicate, null, 2);
      if (input) input.value = everyone ? "" : JSON.stringify(predicate);
      clearTimeout(timer);
      timer = setTimeout(function () { recount(everyone ? null : predicate); }, 300);
    }

    var initial = data.initial || { kind: "all", predicates: [] };
    window.SweeplinePredicate.render(rows, initial, data, changed);
    box.hidden = false;
    changed(initial);
  }

  function start() { document.querySelectorAll("[data-segment-builder]").forEach(setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
