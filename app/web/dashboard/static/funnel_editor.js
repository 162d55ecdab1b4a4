// The visual funnel editor: the draft's graph drawn as SVG boxes and arrows. Steps are added from
// the toolbar, moved by dragging, connected by dragging from a step's exit (the dot under it) onto
// another step, configured in the side panel's form and deleted there or with the Delete key.
//
// The graph JSON lives in the form's #definition textarea (the "advanced" view): every edit here
// rewrites it, and a valid edit typed there redraws the canvas, so Save and Publish post exactly
// what the API takes. After each change the server's validator runs on the unsaved graph and its
// problems are pinned on the steps they concern. Where each box sits is the person's own layout,
// kept in this browser (the graph has no coordinates). A message step's panel previews its unsaved
// creative for a contact picked by name, rendered by the server as a send would render it; once
// the funnel has runs, each box shows the latest version's figures from the funnel's report.
(function () {
  "use strict";

  var dataEl = document.getElementById("fe-data");
  var textarea = document.getElementById("definition");
  var svg = document.getElementById("fe-canvas");
  if (!dataEl || !textarea || !svg) return;
  var D = JSON.parse(dataEl.textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var W = 184, H = D.counts ? 90 : 58, GAPX = 40, GAPY = 64, PAD = 24;
  var layoutKey = "sweepline.funnel." + D.funnel_id + ".layout";
  var panel = document.getElementById("fe-panel");
  var status = document.getElementById("fe-status");
  var triggersBox = document.getElementById("fe-triggers");
  var settingsBox = document.getElementById("fe-settings");

  var model = parse(textarea.value);
  var problems = D.problems || [];
  var selected = null;
  var pos = {};
  try { pos = JSON.parse(window.localStorage.getItem(layoutKey) || "{}") || {}; } catch (e) { pos = {}; }
  var checkTimer = null;
  var checkSeq = 0;
  // The preview's contact survives redrawing the panel: [options HTML, chosen id, search text].
  var preview = { options: null, contact: "", q: "", timer: null, seq: 0, searchTimer: null };
  var uid = 0;

  function parse(text) {
    try {
      var m = JSON.parse(text);
      if (m && typeof m === "object" && !Array.isArray(m)) {
        if (!Array.isArray(m.nodes)) m.nodes = [];
        return m;
      }
    } catch (e) { /* shown below */ }
    return null;
  }

  function say(text) { if (status) status.textContent = text; }

  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["x-csrf-token"] || ""; }
    catch (e) { return ""; }
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function s(tag, attrs) {
    var node = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  function kindLabel(kind) {
    for (var i = 0; i < D.kinds.length; i++) if (D.kinds[i].kind === kind) return D.kinds[i].label;
    return kind;
  }

  function nodeById(id) {
    for (var i = 0; i < model.nodes.length; i++) if (model.nodes[i].id === id) return model.nodes[i];
    return null;
  }

  // The exits of a step: [field, label, branch index or null].
  function ports(node) {
    if (node.kind === "split") {
      return (node.branches || []).map(function (b, i) { return ["next", b.name || "branch " + (i + 1), i]; });
    }
    return (D.ports[node.kind] || [["next", "Then"]]).map(function (p) { return [p[0], p[1], null]; });
  }

  function target(node, port) {
    if (port[2] !== null) return (node.branches[port[2]] || {}).next || null;
    return node[port[0]] || null;
  }

  function connect(node, port, to) {
    if (port[2] !== null) {
      if (to) node.branches[port[2]].next = to; else delete node.branches[port[2]].next;
    } else if (to) node[port[0]] = to;
    else delete node[port[0]];
  }

  function problemsOf(id) {
    return problems.filter(function (p) { return p.node_id === id; });
  }

  // -- layout ------------------------------------------------------------------------------------

  function autoLayout() {
    var rank = {};
    var entry = model.nodes.filter(function (n) { return n.entry; })[0];
    var queue = [];
    if (entry) { rank[entry.id] = 0; queue.push(entry.id); }
    while (queue.length) {
      var id = queue.shift();
      var n = nodeById(id);
      if (!n) continue;
      ports(n).forEach(function (p) {
        var t = target(n, p);
        if (t && rank[t] === undefined && nodeById(t)) { rank[t] = rank[id] + 1; queue.push(t); }
      });
    }
    var maxRank = 0;
    Object.keys(rank).forEach(function (k) { maxRank = Math.max(maxRank, rank[k]); });
    var columns = {};
    model.nodes.forEach(function (n) {
      if (rank[n.id] === undefined) rank[n.id] = ++maxRank;
      var r = rank[n.id];
      columns[r] = (columns[r] || 0) + 1;
      pos[n.id] = { x: PAD + (columns[r] - 1) * (W + GAPX), y: PAD + r * (H + GAPY) };
    });
    saveLayout();
  }

  function saveLayout() {
    try { window.localStorage.setItem(layoutKey, JSON.stringify(pos)); } catch (e) { /* private mode */ }
  }

  function placeNew(id, after) {
    if (after && pos[after]) {
      var x = pos[after].x, y = pos[after].y + H + GAPY;
      while (model.nodes.some(function (n) { return n.id !== id && pos[n.id] && Math.abs(pos[n.id].x - x) < W && Math.abs(pos[n.id].y - y) < H; })) x += W + GAPX;
      pos[id] = { x: x, y: y };
    } else {
      var bottom = PAD - (H + GAPY);
      Object.keys(pos).forEach(function (k) { if (nodeById(k)) bottom = Math.max(bottom, pos[k].y); });
      pos[id] = { x: PAD, y: bottom + H + GAPY };
    }
    saveLayout();
  }

  // -- drawing -----------------------------------------------------------------------------------

  function portPoint(node, index, count) {
    var p = pos[node.id];
    return { x: p.x + (W * (index + 1)) / (count + 1), y: p.y + H };
  }

  function edgePath(a, b) {
    var dy = Math.max(30, Math.abs(b.y - a.y) / 2);
    return "M" + a.x + "," + a.y + " C" + a.x + "," + (a.y + dy) + " " + b.x + "," + (b.y - dy) + " " + b.x + "," + b.y;
  }

  function draw() {
    svg.textContent = "";
    if (!model) return;
    var missing = model.nodes.some(function (n) { return !pos[n.id]; });
    if (missing && model.nodes.every(function (n) { return !pos[n.id]; })) autoLayout();
    else model.nodes.forEach(function (n) { if (!pos[n.id]) placeNew(n.id, null); });

    var defs = s("defs");
    var marker = s("marker", { id: "fe-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    marker.appendChild(s("path", { d: "M0,0 L10,5 L0,10 z", "class": "fe-arrowhead" }));
    defs.appendChild(marker);
    svg.appendChild(defs);

    var maxX = 0, maxY = 0;
    var edgeLayer = s("g", { "class": "fe-edges" });
    var nodeLayer = s("g", { "class": "fe-nodes" });
    svg.appendChild(edgeLayer);
    svg.appendChild(nodeLayer);

    model.nodes.forEach(function (n) {
      var p = pos[n.id];
      maxX = Math.max(maxX, p.x + W);
      maxY = Math.max(maxY, p.y + H + 30);
      var list = ports(n);
      list.forEach(function (port, i) {
        var to = target(n, port);
        var t = to && nodeById(to);
        if (!t) return;
        var a = portPoint(n, i, list.length);
        var b = { x: pos[t.id].x + W / 2, y: pos[t.id].y };
        if (pos[t.id].y <= p.y) b = { x: pos[t.id].x + W / 2, y: pos[t.id].y + 0 };
        var edge = s("path", { d: edgePath(a, b), "class": "fe-edge", "marker-end": "url(#fe-arrow)", "data-from": n.id, "data-to": t.id, "data-port": port[1] });
        edgeLayer.appendChild(edge);
        if (list.length > 1) {
          var lbl = s("text", { x: a.x + 4, y: a.y + 16, "class": "fe-edge-label" });
          lbl.textContent = port[1];
          edgeLayer.appendChild(lbl);
        }
      });

      var bad = problemsOf(n.id);
      var g = s("g", {
        "class": "fe-node" + (n.id === selected ? " selected" : "") + (bad.length ? " invalid" : "") + (n.entry ? " entry" : ""),
        "data-node": n.id, transform: "translate(" + p.x + "," + p.y + ")", tabindex: "0", role: "button"
      });
      g.appendChild(s("rect", { width: W, height: H, rx: 8, "class": "fe-box" }));
      var title = s("text", { x: 10, y: 22, "class": "fe-kind" });
      title.textContent = kindLabel(n.kind);
      g.appendChild(title);
      var sub = s("text", { x: 10, y: 42, "class": "fe-id" });
      sub.textContent = (n.label || n.id).slice(0, 24);
      g.appendChild(sub);
      drawCounts(g, n);
      if (n.entry) {
        var start = s("text", { x: W - 10, y: 22, "class": "fe-start", "text-anchor": "end" });
        start.textContent = "Start";
        g.appendChild(start);
      }
      if (bad.length) {
        var pin = s("g", { "class": "fe-pin", transform: "translate(" + (W - 4) + ",-4)" });
        pin.appendChild(s("circle", { r: 10 }));
        var count = s("text", { "text-anchor": "middle", y: 4 });
        count.textContent = String(bad.length);
        pin.appendChild(count);
        var tip = s("title");
        tip.textContent = bad.map(function (b) { return b.message; }).join("\n");
        pin.appendChild(tip);
        g.appendChild(pin);
      }
      list.forEach(function (port, i) {
        var pt = portPoint(n, i, list.length);
        var c = s("circle", { cx: pt.x - p.x, cy: H, r: 7, "class": "fe-port" + (target(n, port) ? " linked" : ""), "data-port": String(i) });
        var t = s("title");
        t.textContent = "Drag to connect: " + port[1];
        c.appendChild(t);
        g.appendChild(c);
      });
      nodeLayer.appendChild(g);
    });
    svg.setAttribute("width", String(Math.max(maxX + PAD, 320)));
    svg.setAttribute("height", String(Math.max(maxY + PAD, 200)));
    var empty = document.getElementById("fe-empty");
    if (empty) empty.hidden = model.nodes.length > 0;
  }

  // The report's figures of the latest version for this step: people on the first line, and for
  // a message step its messages on the second.
  function drawCounts(g, n) {
    // A step only the draft has (not in the latest version) has no figures yet.
    var c = D.counts && D.counts.nodes[n.id];
    if (!c) return;
    // What happened to the people who came in: still waiting here, through (on to the next step,
    // or finished where the step leads nowhere), ended early. "1 in · 0 waiting · 0 out" for a
    // run that went through said nothing of where it went.
    var through = Math.max(0, c.entered - c.waiting - c.exited);
    var leads = ports(n).some(function (port) { return target(n, port); });
    var parts = [c.entered + " in"];
    if (c.waiting) parts.push(c.waiting + " waiting");
    if (through) parts.push(through + (leads ? " moved on" : " finished"));
    if (c.exited) parts.push(c.exited + " ended early");
    var people = s("text", { x: 10, y: 62, "class": "fe-counts", "data-counts": "people" });
    people.textContent = parts.join(" · ");
    g.appendChild(people);
    var words = "Version " + D.counts.version + ": " + c.entered + " entered, " + c.waiting + " waiting, " + through + (leads ? " moved on" : " finished") + ", " + c.exited + " ended early";
    if (c.sent !== undefined) {
      var mail = s("text", { x: 10, y: 80, "class": "fe-counts", "data-counts": "messages" });
      mail.textContent = c.sent + " sent · " + c.opened + " opened · " + c.clicked + " clicked";
      g.appendChild(mail);
      words += "; " + c.sent + " sent, " + c.opened + " opened, " + c.clicked + " clicked";
    }
    var tip = s("title");
    tip.textContent = words;
    g.appendChild(tip);
  }

  // -- changes -----------------------------------------------------------------------------------

  function changed(opts) {
    textarea.value = JSON.stringify(model, null, 2);
    draw();
    if (opts && opts.panel) drawPanel();
    scheduleCheck();
    schedulePreview();
  }

  function scheduleCheck() {
    clearTimeout(checkTimer);
    say("Checking…");
    checkTimer = setTimeout(check, 350);
  }

  function check() {
    var seq = ++checkSeq;
    fetch(D.check_url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf() },
      credentials: "same-origin",
      body: JSON.stringify({ definition: model })
    }).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      return r.json();
    }).then(function (body) {
      if (seq !== checkSeq) return;
      problems = body.problems || [];
      say(problems.length ? problems.length + " problem(s) in the unsaved graph" : "The unsaved graph is valid");
      draw();
      drawProblems();
      drawPanelProblems();
      drawTriggerProblems();
    }).catch(function () {
      if (seq === checkSeq) say("Could not check the graph; save to see its problems.");
    });
  }

  function drawProblems() {
    var box = document.getElementById("problems");
    if (!box) return;
    box.textContent = "";
    box.appendChild(el("h2", { text: "Validation" }));
    if (!problems.length) {
      box.appendChild(el("p", { id: "valid", text: "The draft is valid and can be published." }));
      return;
    }
    box.appendChild(el("p", { text: "The graph has " + problems.length + " problem(s); it cannot be published until they are fixed." }));
    var body = el("tbody");
    problems.forEach(function (p) {
      var link = p.node_id && nodeById(p.node_id)
        ? el("a", { href: "#fe-canvas", "data-select": p.node_id, text: p.node_id })
        : el("code", { text: p.node_id || "(graph)" });
      body.appendChild(el("tr", { "class": "problem", "data-node": p.node_id || "" }, [
        el("td", {}, [link]), el("td", { text: p.rule }), el("td", { text: p.message })
      ]));
    });
    box.appendChild(el("table", { "class": "grid" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "Step" }), el("th", { text: "Rule" }), el("th", { text: "Problem" })])]),
      body
    ]));
  }

  function freshId(kind) {
    var base = kind.replace(/[^A-Za-z0-9_-]/g, "_");
    for (var i = 1; ; i++) if (!nodeById(base + "_" + i)) return base + "_" + i;
  }

  function addNode(kind) {
    var node = { kind: kind, id: freshId(kind) };
    if (kind === "condition") node.predicate = { kind: "all", predicates: [] };
    if (kind === "split") node.branches = [{ name: "a", weight: 50 }, { name: "b", weight: 50 }];
    if (kind === "wait") node.days = 1;
    if (!model.nodes.length) node.entry = true;
    var after = selected && nodeById(selected);
    model.nodes.push(node);
    if (after) {
      var free = ports(after).filter(function (p) { return !target(after, p); })[0];
      if (free) connect(after, free, node.id);
    }
    placeNew(node.id, after ? after.id : null);
    selected = node.id;
    changed({ panel: true });
    say("Added " + kindLabel(kind) + (after ? " after " + after.id : ""));
  }

  function deleteNode(id) {
    var i = model.nodes.findIndex(function (n) { return n.id === id; });
    if (i < 0) return;
    var wasEntry = model.nodes[i].entry;
    model.nodes.splice(i, 1);
    model.nodes.forEach(function (n) {
      ports(n).forEach(function (p) { if (target(n, p) === id) connect(n, p, null); });
    });
    if (wasEntry && model.nodes.length) model.nodes[0].entry = true;
    delete pos[id];
    saveLayout();
    if (selected === id) selected = null;
    changed({ panel: true });
    say("Deleted " + id);
  }

  function rename(node, to) {
    var from = node.id;
    model.nodes.forEach(function (n) {
      ports(n).forEach(function (p) { if (target(n, p) === from) connect(n, p, to); });
    });
    node.id = to;
    if (pos[from]) { pos[to] = pos[from]; delete pos[from]; saveLayout(); }
    selected = to;
  }

  // -- the property panel ------------------------------------------------------------------------

  function field(labelText, control, hint) {
    var id = "fe-f-" + (++uid);
    control.id = id;
    var wrap = el("div", { "class": "fe-field" }, [el("label", { "for": id, text: labelText }), control]);
    if (hint) wrap.appendChild(el("p", { "class": "muted small", text: hint }));
    return wrap;
  }

  function fieldError(wrap, text) {
    var control = wrap.querySelector("input,select,textarea");
    var msg = wrap.querySelector(".field-error");
    if (!text) {
      if (msg) msg.remove();
      if (control) { control.removeAttribute("aria-invalid"); control.removeAttribute("aria-describedby"); }
      return;
    }
    if (!msg) { msg = el("p", { "class": "field-error", role: "alert", id: "fe-err-" + (++uid) }); wrap.appendChild(msg); }
    msg.textContent = text;
    msg.removeAttribute("data-from");
    if (control) {
      control.setAttribute("aria-invalid", "true");
      control.setAttribute("aria-describedby", msg.id);
    }
  }

  function optionsSelect(pairs, value) {
    var sel = el("select");
    pairs.forEach(function (o) {
      var opt = el("option", { value: o[0], text: o[1] });
      if (String(o[0]) === String(value === undefined || value === null ? "" : value)) opt.selected = true;
      sel.appendChild(opt);
    });
    return sel;
  }

  function fieldTypeOf(name) {
    for (var i = 0; i < D.fields.length; i++) if (D.fields[i].name === name) return D.fields[i].type;
    return "text";
  }

  function variablePicker(textareaEl, obj, key) {
    var names = D.fields.map(function (f) { return f.name; }).concat(["unsubscribe_url", "preferences_url"]);
    model.nodes.forEach(function (n) { if (n.kind === "ai_generate" && n.variable) names.push(n.variable); });
    var sel = optionsSelect([["", "Insert a variable…"]].concat(names.map(function (n) { return [n, "{{" + n + "}}"]; })), "");
    sel.addEventListener("change", function () {
      if (!sel.value) return;
      var text = "{{" + sel.value + "}}";
      var at = textareaEl.selectionStart || textareaEl.value.length;
      textareaEl.value = textareaEl.value.slice(0, at) + text + textareaEl.value.slice(textareaEl.selectionEnd || at);
      obj[key] = textareaEl.value;
      sel.value = "";
      changed();
    });
    return field("Variable", sel);
  }

  // One form control bound to obj[key]; empty optional values are removed (the graph's defaults).
  function control(obj, key, label, type, onStructure) {
    var value = obj[key];
    var input, wrap;
    function set(v) {
      if (v === undefined) delete obj[key]; else obj[key] = v;
      changed();
    }
    if (type === "textarea") {
      input = el("textarea", { rows: "5", "class": "fe-message" });
      input.value = value || "";
      input.addEventListener("input", function () { set(input.value === "" ? undefined : input.value); });
      wrap = field(label, input);
      var box = el("div", { "class": "fe-field-group" }, [wrap, variablePicker(input, obj, key)]);
      return box;
    }
    if (type === "int" || type === "optint") {
      input = el("input", { type: "number", step: "1", inputmode: "numeric" });
      input.value = value === undefined || value === null ? "" : String(value);
      wrap = field(label, input);
      input.addEventListener("input", function () {
        var raw = input.value.trim();
        if (raw === "") { fieldError(wrap, null); set(undefined); return; }
        if (!/^-?\d+$/.test(raw)) { fieldError(wrap, label + ": a whole number"); return; }
        fieldError(wrap, null);
        set(parseInt(raw, 10));
      });
      return wrap;
    }
    if (type.indexOf("select:") === 0 || type.indexOf("optselect:") === 0) {
      var optional = type.indexOf("opt") === 0;
      var pairs = type.split(":")[1].split("|").map(function (o) {
        var kv = o.split("=");
        return [kv[0], kv[1] || kv[0]];
      });
      if (optional) pairs.unshift(["", "—"]);
      input = optionsSelect(pairs, value);
      input.addEventListener("change", function () {
        var v = input.value;
        set(v === "" ? undefined : /^\d+$/.test(v) ? parseInt(v, 10) : v);
      });
      return field(label, input);
    }
    if (type === "bool") {
      input = el("input", { type: "checkbox" });
      input.checked = !!value;
      input.addEventListener("change", function () { set(input.checked ? true : undefined); });
      var id = "fe-f-" + (++uid);
      input.id = id;
      return el("div", { "class": "fe-field" }, [input, el("label", { "for": id, "class": "inline-check", text: " " + label })]);
    }
    if (type === "funnel" || type === "optfunnel") {
      var choices = D.funnels.filter(function (f) { return f.id !== D.funnel_id || type === "optfunnel"; })
        .map(function (f) { return [String(f.id), f.name + " (#" + f.id + ")"]; });
      choices.unshift(["", type === "funnel" ? "Choose a funnel…" : "This funnel"]);
      input = optionsSelect(choices, value);
      input.addEventListener("change", function () { set(input.value === "" ? undefined : parseInt(input.value, 10)); });
      return field(label, input);
    }
    if (type === "strings") {
      input = el("input", { type: "text" });
      input.value = (value || []).join(", ");
      input.addEventListener("input", function () {
        var list = input.value.split(",").map(function (x) { return x.trim(); }).filter(Boolean);
        set(list.length ? list : undefined);
      });
      return field(label, input);
    }
    if (type === "headers") {
      input = el("textarea", { rows: "3" });
      input.value = Object.keys(value || {}).map(function (k) { return k + ": " + value[k]; }).join("\n");
      input.addEventListener("input", function () {
        var out = {};
        input.value.split("\n").forEach(function (line) {
          var at = line.indexOf(":");
          if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
        });
        set(Object.keys(out).length ? out : undefined);
      });
      return field(label, input);
    }
    if (type === "value") {
      input = el("input", { type: "text" });
      input.value = value === undefined || value === null ? "" : String(value);
      input.addEventListener("input", function () {
        var raw = input.value;
        var t = fieldTypeOf(obj.field);
        if (raw === "") set(undefined);
        else if (t === "number" && raw.trim() !== "" && !isNaN(Number(raw))) set(Number(raw));
        else if (t === "boolean" && (raw === "true" || raw === "false")) set(raw === "true");
        else set(raw);
      });
      return field(label, input, "Numbers for number fields, true or false for yes/no fields.");
    }
    if (type === "opteventpredicate") {
      return eventFilter(obj, key, label, onStructure);
    }
    if (type === "predicate" || type === "optpredicate") {
      var holder = el("div", { "class": "fe-predicate" });
      var wrapP = el("fieldset", { "class": "fe-field" }, [el("legend", { text: label })]);
      if (type === "optpredicate") {
        var on = el("input", { type: "checkbox" });
        on.checked = !!value;
        var onId = "fe-f-" + (++uid);
        on.id = onId;
        on.addEventListener("change", function () {
          set(on.checked ? { kind: "all", predicates: [] } : undefined);
          onStructure();
        });
        wrapP.appendChild(el("div", {}, [on, el("label", { "for": onId, "class": "inline-check", text: " Use a condition" })]));
        if (!value) return wrapP;
      }
      wrapP.appendChild(holder);
      window.SweeplinePredicate.render(holder, value || { kind: "all", predicates: [] }, {
        fields: D.fields, tags: D.tags, lists: D.lists, segments: D.segments || [],
        context: obj.kind === "condition",
        offerName: function (kind, nameInput, cell) { return createOffer(kind, nameInput, cell); }
      }, function (p) { obj[key] = p; changed(); });
      if (value === undefined) obj[key] = { kind: "all", predicates: [] };
      return wrapP;
    }
    if (type === "branches") {
      return branchesEditor(obj, onStructure);
    }
    if (type === "experiment") {
      return experimentEditor(obj, onStructure);
    }
    // text, tag, list, field, datefield, datetime
    var listId = { tag: "pb-tags", list: "pb-lists", field: "fe-fields", datefield: "fe-datefields" }[type];
    input = el("input", { type: "text", list: listId || null });
    input.value = value === undefined || value === null ? "" : String(value);
    input.addEventListener("input", function () { set(input.value.trim() === "" ? undefined : input.value.trim()); });
    wrap = field(label, input);
    if (NEW_NAMES[type]) wrap.appendChild(createOffer(type, input, wrap));
    return wrap;
  }

  // -- names created in place --------------------------------------------------------------------
  // A step naming a tag, list or field the workspace does not have yet offers to create it here,
  // through the same service as the Tags, lists and fields page: a new name no longer blocks
  // publishing, and nobody leaves the editor (and its unsaved graph) to make one.

  var NEW_NAMES = {
    tag: { kind: "tag", words: "tag" },
    list: { kind: "list", words: "list" },
    field: { kind: "field", words: "field" },
    datefield: { kind: "field", words: "date field", type: "date" }
  };
  var NAME_LIMITS = { tag: 100, list: 100, field: 64 };

  function known(kind, name) {
    if (kind === "tag") return D.tags.indexOf(name) >= 0;
    if (kind === "list") return D.lists.indexOf(name) >= 0;
    return D.fields.some(function (f) { return f.name === name; });
  }

  function refreshNames() {
    var lists = {
      "pb-tags": D.tags,
      "pb-lists": D.lists,
      "fe-fields": D.fields.map(function (f) { return f.name; }),
      "fe-datefields": D.fields.filter(function (f) { return f.type === "date"; }).map(function (f) { return f.name; })
    };
    Object.keys(lists).forEach(function (id) {
      var dl = document.getElementById(id);
      if (!dl) return;
      dl.textContent = "";
      lists[id].forEach(function (n) { dl.appendChild(el("option", { value: n })); });
    });
  }

  function createOffer(type, input, wrap) {
    var spec = NEW_NAMES[type];
    var box = el("div", { "class": "fe-create" });
    var typeSel = null;
    if (spec.kind === "field" && !spec.type) {
      typeSel = optionsSelect(D.field_types.map(function (t) { return [t, t]; }), "text");
      box.appendChild(field("Type of the new field", typeSel));
    }
    var button = el("button", { type: "button", "class": "secondary fe-create-name", "data-kind": spec.kind });
    box.appendChild(button);
    function refresh() {
      var name = input.value.trim();
      box.hidden = name === "" || known(spec.kind, name);
      button.textContent = "Create " + spec.words + " \u201c" + name + "\u201d";
    }
    button.addEventListener("click", function () {
      var name = input.value.trim();
      var what = spec.words.charAt(0).toUpperCase() + spec.words.slice(1);
      if (name.length > NAME_LIMITS[spec.kind]) {
        fieldError(wrap, what + " name: at most " + NAME_LIMITS[spec.kind] + " characters.");
        return;
      }
      button.disabled = true;
      fetch(D.names_url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", "x-csrf-token": csrf() },
        credentials: "same-origin",
        body: JSON.stringify({ kind: spec.kind, name: name, type: spec.type || (typeSel ? typeSel.value : "text") })
      }).then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, body: body || {} }; },
          function () { return { ok: false, body: {} }; });
      }).then(function (res) {
        button.disabled = false;
        if (!res.ok) {
          fieldError(wrap, res.body.message || what + " not created: try again.");
          return;
        }
        fieldError(wrap, null);
        if (spec.kind === "tag") D.tags = res.body.names;
        else if (spec.kind === "list") D.lists = res.body.names;
        else D.fields = res.body.fields;
        refreshNames();
        refresh();
        say(what + " \u201c" + name + "\u201d created");
        scheduleCheck();
      }).catch(function () {
        button.disabled = false;
        fieldError(wrap, what + " not created: the server could not be reached.");
      });
    });
    input.addEventListener("input", refresh);
    refresh();
    return box;
  }

  // An optional filter on the event's properties (a trigger's "filter", a wait's "event_filter").
  function eventFilter(obj, key, label, onStructure) {
    var wrapE = el("fieldset", { "class": "fe-field fe-event-filter", "data-key": key }, [el("legend", { text: label })]);
    var on = el("input", { type: "checkbox", "class": "fe-filter-on" });
    on.checked = !!obj[key];
    var onId = "fe-f-" + (++uid);
    on.id = onId;
    on.addEventListener("change", function () {
      if (on.checked) obj[key] = { kind: "all", predicates: [{ kind: "event", property: "", op: "eq", value: "" }] };
      else delete obj[key];
      changed();
      onStructure();
    });
    wrapE.appendChild(el("div", {}, [on, el("label", { "for": onId, "class": "inline-check", text: " Test the event's properties" })]));
    if (!obj[key]) return wrapE;
    var holder = el("div", { "class": "fe-predicate" });
    wrapE.appendChild(holder);
    window.SweeplinePredicate.render(holder, obj[key], { fields: [], tags: [], lists: [], event: true },
      function (p) { obj[key] = p; changed(); });
    return wrapE;
  }

  // A split run as an experiment (docs/funnel-experiments.md): its goal, the evidence a verdict
  // needs and whether the verdict routes new entrants by itself.
  function experimentEditor(node, onStructure) {
    var box = el("fieldset", { "class": "fe-field fe-experiment" }, [el("legend", { text: "Experiment" })]);
    var on = el("input", { type: "checkbox", id: "fe-f-" + (++uid) });
    on.checked = !!node.experiment;
    on.addEventListener("change", function () {
      if (on.checked) {
        var goal = model.nodes.filter(function (n) { return n.kind === "goal"; })[0];
        node.experiment = goal ? { goal_node: goal.id } : {};
      } else {
        delete node.experiment;
      }
      changed(); onStructure();
    });
    box.appendChild(el("div", { "class": "fe-field" }, [on, el("label", { "for": on.id, "class": "inline-check", text: " Judge the branches: report a winner" })]));
    var exp = node.experiment;
    if (!exp) return box;
    var goals = model.nodes.filter(function (n) { return n.kind === "goal"; }).map(function (n) { return n.id; });
    box.appendChild(control(exp, "goal_node", "Converted when they reach the goal", "optselect:" + goals.join("|"), onStructure));
    box.appendChild(control(exp, "goal_event", "Or when this event happens (e.g. purchase)", "text", onStructure));
    box.appendChild(control(exp, "value_property", "The event's value property (revenue, optional)", "text", onStructure));
    box.appendChild(control(exp, "value_minor", "Or a fixed value per conversion, in cents", "optint", onStructure));
    box.appendChild(control(exp, "window_days", "Counted within days of the split (default 30)", "optint", onStructure));
    box.appendChild(control(exp, "min_sample", "People every branch needs before a verdict (default 100)", "optint", onStructure));
    var confidence = optionsSelect([["", "95 % (default)"], ["0.9", "90 %"], ["0.95", "95 %"], ["0.99", "99 %"]], exp.confidence === undefined ? "" : String(exp.confidence));
    confidence.addEventListener("change", function () {
      if (confidence.value === "") delete exp.confidence; else exp.confidence = parseFloat(confidence.value);
      changed();
    });
    box.appendChild(field("Confidence", confidence));
    box.appendChild(control(exp, "auto_winner", "After the verdict, send new entrants to the winner", "bool", onStructure));
    return box;
  }

  function branchesEditor(node, onStructure) {
    var box = el("fieldset", { "class": "fe-field fe-branches" }, [el("legend", { text: "Branches (weights share the contacts)" })]);
    (node.branches || []).forEach(function (b, i) {
      var row = el("div", { "class": "row" });
      var name = el("input", { type: "text" });
      name.value = b.name || "";
      name.addEventListener("change", function () { b.name = name.value.trim(); changed(); });
      var weight = el("input", { type: "number", min: "1", step: "1" });
      weight.value = String(b.weight);
      var wWrap = field("Weight", weight);
      weight.addEventListener("input", function () {
        if (!/^\d+$/.test(weight.value.trim())) { fieldError(wWrap, "Weight: a whole number"); return; }
        fieldError(wWrap, null);
        b.weight = parseInt(weight.value, 10);
        changed();
      });
      var rm = el("button", { type: "button", "class": "secondary", text: "Remove", "aria-label": "Remove branch " + (b.name || i + 1) });
      rm.addEventListener("click", function () { node.branches.splice(i, 1); changed(); onStructure(); });
      row.appendChild(field("Branch name", name));
      row.appendChild(wWrap);
      row.appendChild(el("div", { "class": "fe-field" }, [rm]));
      box.appendChild(row);
    });
    var add = el("button", { type: "button", "class": "secondary", text: "Add branch" });
    add.addEventListener("click", function () {
      node.branches = node.branches || [];
      node.branches.push({ name: String.fromCharCode(97 + node.branches.length), weight: 50 });
      changed(); onStructure();
    });
    box.appendChild(add);
    return box;
  }

  function drawPanelProblems() {
    var box = document.getElementById("fe-node-problems");
    if (!box || !selected) return;
    var bad = problemsOf(selected);
    box.textContent = "";
    box.hidden = !bad.length;
    bad.forEach(function (p) { box.appendChild(el("li", { text: p.message })); });
    drawFieldProblems(bad);
  }

  // A problem about one setting is also said next to that setting; a message the check put
  // there goes when the check no longer finds it (what the browser itself said stays).
  function drawFieldProblems(bad) {
    panel.querySelectorAll("[data-fe-key]").forEach(function (wrap) {
      var key = wrap.getAttribute("data-fe-key");
      var mine = bad.filter(function (p) { return p.field === key; });
      var msg = wrap.querySelector(".field-error");
      if (mine.length) {
        fieldError(wrap, mine[0].message);
        wrap.querySelector(".field-error").setAttribute("data-from", "check");
      } else if (msg && msg.getAttribute("data-from") === "check") {
        fieldError(wrap, null);
      }
    });
  }

  function drawPanel() {
    panel.textContent = "";
    var node = selected && nodeById(selected);
    if (!node) {
      selected = null;
      panel.appendChild(el("p", { "class": "muted", text: "Select a step on the canvas to configure it, or add one." }));
      return;
    }
    panel.appendChild(el("h3", { id: "fe-panel-title", text: kindLabel(node.kind) }));
    if (D.help && D.help[node.kind]) panel.appendChild(el("p", { id: "fe-node-help", "class": "muted", text: D.help[node.kind] }));
    panel.appendChild(el("ul", { id: "fe-node-problems", "class": "fe-node-problems error" }));
    drawPanelProblems();

    var idInput = el("input", { type: "text", name: "fe-node-id", maxlength: "64" });
    idInput.value = node.id;
    var idWrap = field("Name", idInput, "Letters, digits, _ and -; other steps refer to it.");
    idInput.addEventListener("change", function () {
      var to = idInput.value.trim();
      if (to === node.id) { fieldError(idWrap, null); return; }
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(to)) { fieldError(idWrap, "Name: letters, digits, _ and - only"); return; }
      if (nodeById(to)) { fieldError(idWrap, "Name: another step is already called " + to); return; }
      fieldError(idWrap, null);
      rename(node, to);
      changed();
    });
    panel.appendChild(idWrap);

    var entry = el("input", { type: "checkbox", id: "fe-entry" });
    entry.checked = !!node.entry;
    entry.addEventListener("change", function () {
      model.nodes.forEach(function (n) { delete n.entry; });
      if (entry.checked) node.entry = true;
      changed();
    });
    panel.appendChild(el("div", { "class": "fe-field" }, [entry, el("label", { "for": "fe-entry", "class": "inline-check", text: " Runs start here" })]));

    idWrap.setAttribute("data-fe-key", "id");
    (D.forms[node.kind] || []).forEach(function (f) {
      var c = control(node, f[0], f[1], f[2], drawPanel);
      var wrap = c.classList.contains("fe-field") ? c : (c.querySelector(".fe-field") || c);
      wrap.setAttribute("data-fe-key", f[0]);
      panel.appendChild(c);
    });

    var links = ports(node);
    if (links.length) {
      var fs = el("fieldset", { "class": "fe-field fe-links" }, [el("legend", { text: "Where contacts go next" })]);
      links.forEach(function (port) {
        var choices = [["", "End the run"]].concat(model.nodes.filter(function (n) { return n.id !== node.id; })
          .map(function (n) { return [n.id, n.id + " (" + kindLabel(n.kind) + ")"]; }));
        var sel = optionsSelect(choices, target(node, port) || "");
        sel.setAttribute("data-port", port[1]);
        sel.addEventListener("change", function () { connect(node, port, sel.value || null); changed(); });
        fs.appendChild(field(port[1], sel));
      });
      panel.appendChild(fs);
    }

    if (D.preview_kinds.indexOf(node.kind) >= 0) {
      panel.appendChild(previewSection());
      if (preview.options === null) findContacts(); else renderPreview();
    }

    drawFieldProblems(problemsOf(node.id));

    var del = el("button", { type: "button", id: "fe-delete", "class": "secondary fe-danger", text: "Delete this step" });
    del.addEventListener("click", function () { deleteNode(node.id); });
    panel.appendChild(el("p", { "class": "actions" }, [del]));
  }

  // -- the message preview -------------------------------------------------------------------------

  function previewSection() {
    var box = el("fieldset", { "class": "fe-field fe-preview", id: "fe-preview" }, [el("legend", { text: "Preview for a contact" })]);
    var search = el("input", { type: "search", id: "fe-preview-search", autocomplete: "off", placeholder: "Name or e-mail" });
    search.value = preview.q;
    var pick = el("select", { id: "fe-preview-contact" });
    if (preview.options !== null) { pick.innerHTML = preview.options; pick.value = preview.contact; }
    box.appendChild(el("div", { "class": "fe-field" }, [el("label", { "for": "fe-preview-search", text: "Find a contact" }), search]));
    box.appendChild(el("div", { "class": "fe-field" }, [el("label", { "for": "fe-preview-contact", text: "Render for" }), pick]));
    box.appendChild(el("div", { id: "fe-preview-out", "aria-live": "polite" }));
    search.addEventListener("input", function () {
      preview.q = search.value;
      clearTimeout(preview.searchTimer);
      preview.searchTimer = setTimeout(findContacts, 250);
    });
    pick.addEventListener("change", function () { preview.contact = pick.value; renderPreview(); });
    return box;
  }

  function findContacts() {
    var q = preview.q;
    fetch(D.preview_contacts_url + "?q=" + encodeURIComponent(q.trim()), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
      .then(function (html) {
        if (q !== preview.q) return;
        preview.options = html;
        var pick = document.getElementById("fe-preview-contact");
        if (!pick) return;
        var before = preview.contact;
        pick.innerHTML = html;
        pick.value = before;
        if (pick.value !== before || !before) pick.selectedIndex = 0;
        preview.contact = pick.value;
        renderPreview();
      })
      .catch(function () { say("Could not search the contacts."); });
  }

  function schedulePreview() {
    var node = selected && nodeById(selected);
    if (!node || D.preview_kinds.indexOf(node.kind) < 0 || !document.getElementById("fe-preview-out")) return;
    clearTimeout(preview.timer);
    preview.timer = setTimeout(renderPreview, 300);
  }

  function renderPreview() {
    clearTimeout(preview.timer);
    var node = selected && nodeById(selected);
    var out = document.getElementById("fe-preview-out");
    if (!node || !out) return;
    var seq = ++preview.seq;
    fetch(D.preview_url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf() },
      credentials: "same-origin",
      body: JSON.stringify({ node: node, contact_id: preview.contact ? parseInt(preview.contact, 10) : null })
    }).then(function (r) {
      if (r.status !== 200 && r.status !== 422) throw new Error(String(r.status));
      return r.text();
    }).then(function (html) {
      var target = document.getElementById("fe-preview-out");
      if (seq !== preview.seq || !target) return;
      target.innerHTML = html;
    }).catch(function () {
      var target = document.getElementById("fe-preview-out");
      if (seq === preview.seq && target) target.textContent = "Could not render the preview.";
    });
  }

  function select(id) {
    selected = id;
    draw();
    drawPanel();
  }

  // -- triggers ----------------------------------------------------------------------------------

  function drawTriggers() {
    if (!triggersBox || !model) return;
    triggersBox.textContent = "";
    model.triggers = model.triggers || [];
    model.triggers.forEach(function (t, i) {
      var spec = D.triggers[t.kind] || { label: t.kind, form: [] };
      var fs = el("fieldset", { "class": "fe-trigger", "data-trigger": String(i + 1) }, [el("legend", { text: spec.label })]);
      spec.form.forEach(function (f) { fs.appendChild(control(t, f[0], f[1], f[2], drawTriggers)); });
      var rm = el("button", { type: "button", "class": "secondary", text: "Remove", "aria-label": "Remove the trigger " + spec.label });
      rm.addEventListener("click", function () { model.triggers.splice(i, 1); changed(); drawTriggers(); });
      fs.appendChild(rm);
      fs.appendChild(el("ul", { "class": "fe-trigger-problems error" }));
      triggersBox.appendChild(fs);
    });
    if (!model.triggers.length) triggersBox.appendChild(el("p", { "class": "muted", text: "Nothing starts this funnel yet." }));
    drawTriggerProblems();
  }

  // The validator names a trigger by its place in the list ("Trigger 2 (api_event): …").
  function drawTriggerProblems() {
    if (!triggersBox) return;
    Array.prototype.forEach.call(triggersBox.querySelectorAll(".fe-trigger"), function (fs) {
      var box = fs.querySelector(".fe-trigger-problems");
      var prefix = "Trigger " + fs.getAttribute("data-trigger") + " (";
      var mine = problems.filter(function (p) { return !p.node_id && p.message.indexOf(prefix) === 0; });
      box.textContent = "";
      box.hidden = !mine.length;
      mine.forEach(function (p) { box.appendChild(el("li", { text: p.message })); });
    });
  }

  // -- settings: entering again ---------------------------------------------------------------------

  function drawSettings() {
    if (!settingsBox || !model) return;
    settingsBox.textContent = "";
    var st = model.settings || {};
    var mode = st.reentry ? (st.reentry_days ? "days" : "ended") : "never";
    var sel = optionsSelect([
      ["never", "Never: a contact goes through this funnel once"],
      ["ended", "Again, once their previous run has ended"],
      ["days", "Again, but at most once every so many days"]
    ], mode);
    sel.id = "fe-reentry";
    settingsBox.appendChild(el("div", { "class": "fe-field" }, [el("label", { "for": "fe-reentry", text: "Entering again" }), sel]));
    var days = el("input", { type: "number", id: "fe-reentry-days", min: "1", max: "3650", step: "1", inputmode: "numeric" });
    days.value = st.reentry_days ? String(st.reentry_days) : "";
    var daysWrap = el("div", { "class": "fe-field" }, [el("label", { "for": "fe-reentry-days", text: "Days between two entries" }), days,
      el("p", { "class": "muted small", text: "A contact who entered less than this many days ago (in any version) is not entered again." })]);
    daysWrap.hidden = mode !== "days";
    settingsBox.appendChild(daysWrap);
    function store() {
      model.settings = model.settings || {};
      if (sel.value === "never") { delete model.settings.reentry; delete model.settings.reentry_days; }
      else model.settings.reentry = true;
      if (sel.value === "ended") delete model.settings.reentry_days;
      if (sel.value === "days") {
        var raw = days.value.trim();
        var n = parseInt(raw, 10);
        if (!/^\d+$/.test(raw) || n < 1 || n > 3650) { fieldError(daysWrap, "Days between two entries: a whole number from 1 to 3650"); return; }
        fieldError(daysWrap, null);
        model.settings.reentry_days = n;
      }
      changed();
    }
    sel.addEventListener("change", function () {
      daysWrap.hidden = sel.value !== "days";
      if (sel.value === "days" && !days.value) days.value = "30";
      store();
    });
    days.addEventListener("input", store);
  }

  // -- pointer: drag boxes, drag exits onto steps --------------------------------------------------

  var drag = null;

  function svgPoint(evt) {
    var r = svg.getBoundingClientRect();
    return { x: evt.clientX - r.left, y: evt.clientY - r.top };
  }

  svg.addEventListener("pointerdown", function (evt) {
    var g = evt.target.closest && evt.target.closest(".fe-node");
    if (!g) return;
    var node = nodeById(g.getAttribute("data-node"));
    var pt = svgPoint(evt);
    if (evt.target.classList.contains("fe-port")) {
      var idx = parseInt(evt.target.getAttribute("data-port"), 10);
      var start = portPoint(node, idx, ports(node).length);
      var line = s("path", { "class": "fe-edge fe-drawing", d: edgePath(start, pt) });
      svg.appendChild(line);
      drag = { mode: "connect", node: node, port: ports(node)[idx], start: start, line: line };
    } else {
      drag = { mode: "move", node: node, dx: pt.x - pos[node.id].x, dy: pt.y - pos[node.id].y, moved: false, g: g, at: pt };
    }
    svg.setPointerCapture(evt.pointerId);
    evt.preventDefault();
  });

  svg.addEventListener("pointermove", function (evt) {
    if (!drag) return;
    var pt = svgPoint(evt);
    if (drag.mode === "connect") {
      drag.line.setAttribute("d", edgePath(drag.start, pt));
      return;
    }
    if (!drag.moved && Math.abs(pt.x - drag.at.x) + Math.abs(pt.y - drag.at.y) < 4) return;
    drag.moved = true;
    pos[drag.node.id] = { x: Math.max(0, Math.round(pt.x - drag.dx)), y: Math.max(0, Math.round(pt.y - drag.dy)) };
    drag.g.setAttribute("transform", "translate(" + pos[drag.node.id].x + "," + pos[drag.node.id].y + ")");
  });

  svg.addEventListener("pointerup", function (evt) {
    if (!drag) return;
    var d = drag;
    drag = null;
    try { svg.releasePointerCapture(evt.pointerId); } catch (e) { /* already released */ }
    if (d.mode === "connect") {
      d.line.remove();
      var under = document.elementFromPoint(evt.clientX, evt.clientY);
      var g = under && under.closest && under.closest(".fe-node");
      var to = g && g.getAttribute("data-node");
      if (to && to !== d.node.id) {
        connect(d.node, d.port, to);
        changed({ panel: selected === d.node.id });
        say("Connected " + d.node.id + " (" + d.port[1] + ") to " + to);
      }
      return;
    }
    if (d.moved) { saveLayout(); draw(); }
    else select(d.node.id);
  });

  svg.addEventListener("keydown", function (evt) {
    var g = evt.target.closest && evt.target.closest(".fe-node");
    if (!g) return;
    if (evt.key === "Enter" || evt.key === " ") { evt.preventDefault(); select(g.getAttribute("data-node")); }
    if (evt.key === "Delete") { evt.preventDefault(); deleteNode(g.getAttribute("data-node")); }
  });

  document.addEventListener("click", function (evt) {
    var a = evt.target.closest && evt.target.closest("[data-select]");
    if (a) { evt.preventDefault(); select(a.getAttribute("data-select")); }
  });

  // -- start ------------------------------------------------------------------------------------

  function datalist(id, names) {
    if (document.getElementById(id)) return;
    var dl = el("datalist", { id: id });
    names.forEach(function (n) { dl.appendChild(el("option", { value: n })); });
    document.body.appendChild(dl);
  }
  datalist("pb-tags", D.tags);
  datalist("pb-lists", D.lists);
  datalist("fe-fields", D.fields.map(function (f) { return f.name; }));
  datalist("fe-datefields", D.fields.filter(function (f) { return f.type === "date"; }).map(function (f) { return f.name; }));

  var kindSelect = document.getElementById("fe-kind");
  D.kinds.forEach(function (k) { kindSelect.appendChild(el("option", { value: k.kind, text: k.label })); });
  document.getElementById("fe-add").addEventListener("click", function () {
    if (model) addNode(kindSelect.value);
  });
  document.getElementById("fe-tidy").addEventListener("click", function () {
    if (!model) return;
    autoLayout();
    draw();
  });
  var triggerSelect = document.getElementById("fe-trigger-kind");
  Object.keys(D.triggers).forEach(function (k) { triggerSelect.appendChild(el("option", { value: k, text: D.triggers[k].label })); });
  document.getElementById("fe-add-trigger").addEventListener("click", function () {
    if (!model) return;
    var t = Object.assign({ kind: triggerSelect.value }, JSON.parse(JSON.stringify(D.trigger_required[triggerSelect.value] || {})));
    model.triggers = model.triggers || [];
    model.triggers.push(t);
    changed();
    drawTriggers();
  });

  textarea.addEventListener("input", function () {
    var m = parse(textarea.value);
    if (!m) { say("The JSON does not parse; the canvas shows the last graph that did."); return; }
    model = m;
    if (selected && !nodeById(selected)) selected = null;
    draw();
    drawPanel();
    drawTriggers();
    drawSettings();
    scheduleCheck();
  });

  document.getElementById("fe-editor").hidden = false;
  if (!model) {
    model = null;
    say("The JSON below does not parse: fix it in the advanced view, or reload the saved draft.");
    var adv = document.getElementById("advanced");
    if (adv) adv.open = true;
    return;
  }
  draw();
  drawPanel();
  drawTriggers();
  drawSettings();
})();
