// The segment predicate as rows a person fills in: conditions on fields, tags, lists, events (and,
// inside a funnel's condition, values the run produced), grouped with "all" / "any", each row or
// group negatable. Used by the funnel editor and the segment builder; it reads and writes the same
// predicate JSON the API takes (kinds field, has_tag, in_list, event_count, context, event, all,
// any, not, segment). With options.event it builds an event filter: rows on the event's properties
// only. A "Saved segment" row refers to a segment by id (the server fills in its conditions).
//
//   SweeplinePredicate.render(container, predicate, options, onChange)
//   options: {fields: [{name, type}], tags: [..], lists: [..], segments: [{id, name}],
//             context: bool, event: bool}
(function () {
  "use strict";

  var OPS = {
    eq: "is", ne: "is not", gt: "is more than", gte: "is at least", lt: "is less than",
    lte: "is at most", contains: "contains", exists: "is set", not_exists: "is not set"
  };
  var OPS_BY_TYPE = {
    text: ["eq", "ne", "contains", "exists", "not_exists"],
    number: ["eq", "ne", "gt", "gte", "lt", "lte", "exists", "not_exists"],
    date: ["eq", "ne", "gt", "gte", "lt", "lte", "exists", "not_exists"],
    "boolean": ["eq", "ne", "exists", "not_exists"]
  };
  var COUNT_OPS = ["gte", "gt", "eq", "lte", "lt"];
  var KINDS = [
    ["field", "Field"], ["has_tag", "Has tag"], ["in_list", "Is in list"],
    ["event_count", "Event happened"], ["context", "Value from the run"]
  ];
  var EVENT_KINDS = [["event", "Event property"]];
  var uid = 0;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function labelled(text, control) {
    var id = "pb-" + (++uid);
    control.id = id;
    return el("span", { "class": "pb-cell" }, [el("label", { "for": id, text: text, "class": "pb-label" }), control]);
  }

  function select(options, value) {
    var s = el("select");
    options.forEach(function (o) {
      var opt = el("option", { value: o[0], text: o[1] });
      if (String(o[0]) === String(value)) opt.selected = true;
      s.appendChild(opt);
    });
    return s;
  }

  function datalist(id, names) {
    var existing = document.getElementById(id);
    if (existing) return;
    var dl = el("datalist", { id: id });
    names.forEach(function (n) { dl.appendChild(el("option", { value: n })); });
    document.body.appendChild(dl);
  }

  // predicate JSON -> tree of {group|leaf}; "not" becomes a flag on what it wraps.
  function toTree(p, neg) {
    if (!p) return { type: "group", op: "all", neg: false, items: [] };
    if (p.kind === "not") return toTree(p.predicate, !neg);
    if (p.kind === "all" || p.kind === "any") {
      return { type: "group", op: p.kind, neg: !!neg, items: (p.predicates || []).map(function (c) { return toTree(c, false); }) };
    }
    return { type: "leaf", neg: !!neg, p: JSON.parse(JSON.stringify(p)) };
  }

  function fromTree(t) {
    var out = t.type === "group"
      ? { kind: t.op, predicates: t.items.map(fromTree) }
      : t.p;
    return t.neg ? { kind: "not", predicate: out } : out;
  }

  function fieldType(options, name) {
    for (var i = 0; i < options.fields.length; i++) {
      if (options.fields[i].name === name) return options.fields[i].type;
    }
    return "text";
  }

  function typed(type, raw) {
    if (type === "number") {
      var n = Number(raw);
      return raw.trim() !== "" && !isNaN(n) ? n : raw;
    }
    if (type === "boolean") return raw === "true" ? true : raw === "false" ? false : raw;
    return raw;
  }

  function blankLeaf(kind, options) {
    if (options.event || kind === "event") return { kind: "event", property: "", op: "eq", value: "" };
    if (kind === "field") return { kind: "field", field: options.fields.length ? options.fields[0].name : "email", op: "eq", value: "" };
    if (kind === "has_tag") return { kind: "has_tag", tag: options.tags[0] || "" };
    if (kind === "in_list") return { kind: "in_list", list: options.lists[0] || "" };
    if (kind === "event_count") return { kind: "event_count", event: "", op: "gte", count: 1 };
    if (kind === "segment") return { kind: "segment", segment_id: options.segments.length ? options.segments[0].id : 0 };
    return { kind: "context", path: "", op: "eq", value: "" };
  }

  function render(container, predicate, options, onChange) {
    options = {
      fields: options.fields || [], tags: options.tags || [], lists: options.lists || [],
      segments: options.segments || [], context: !!options.context, event: !!options.event,
      offerName: options.offerName || null
    };
    datalist("pb-tags", options.tags);
    datalist("pb-lists", options.lists);
    var tree = toTree(predicate, false);
    if (tree.type === "leaf") tree = { type: "group", op: "all", neg: false, items: [tree] };

    function changed() { onChange(fromTree(tree)); }
    function redraw() {
      container.textContent = "";
      container.appendChild(group(tree, null));
    }

    function valueInput(leaf, type) {
      var p = leaf.p;
      var input;
      if (type === "boolean") {
        input = select([["true", "true"], ["false", "false"]], String(p.value));
        if (typeof p.value !== "boolean") { p.value = true; }
      } else {
        input = el("input", { type: type === "date" ? "date" : type === "number" ? "number" : "text", step: type === "number" ? "any" : null });
        input.value = p.value === null || p.value === undefined ? "" : String(p.value);
      }
      input.addEventListener("input", function () { p.value = typed(type, input.value); changed(); });
      input.addEventListener("change", function () { p.value = typed(type, input.value); changed(); });
      return input;
    }

    function leafRow(leaf, parent) {
      var p = leaf.p;
      var row = el("div", { "class": "pb-row" });
      var kinds = options.event ? EVENT_KINDS : KINDS.filter(function (k) { return k[0] !== "context" || options.context || p.kind === "context"; });
      if (!options.event && (options.segments.length || p.kind === "segment")) kinds = kinds.concat([["segment", "Is in saved segment"]]);
      if (kinds.every(function (k) { return k[0] !== p.kind; })) kinds = kinds.concat([[p.kind, p.kind]]);
      var kind = select(kinds, p.kind);
      kind.addEventListener("change", function () { leaf.p = blankLeaf(kind.value, options); changed(); redraw(); });
      var neg = el("input", { type: "checkbox" });
      neg.checked = leaf.neg;
      neg.addEventListener("change", function () { leaf.neg = neg.checked; changed(); });
      row.appendChild(el("label", { "class": "pb-not" }, [neg, document.createTextNode(" not")]));
      row.appendChild(labelled("Condition", kind));

      if (p.kind === "field") {
        var fieldNames = options.fields.map(function (f) { return [f.name, f.name.replace(/_/g, " ")]; });
        if (fieldNames.every(function (f) { return f[0] !== p.field; })) fieldNames.push([p.field, p.field]);
        var fsel = select(fieldNames, p.field);
        var type = fieldType(options, p.field);
        var ops = OPS_BY_TYPE[type] || OPS_BY_TYPE.text;
        var osel = select(ops.map(function (o) { return [o, OPS[o]]; }), p.op);
        fsel.addEventListener("change", function () {
          p.field = fsel.value;
          var t = fieldType(options, p.field);
          if ((OPS_BY_TYPE[t] || []).indexOf(p.op) < 0) p.op = "eq";
          p.value = t === "boolean" ? true : "";
          changed(); redraw();
        });
        osel.addEventListener("change", function () {
          p.op = osel.value;
          if (p.op === "exists" || p.op === "not_exists") delete p.value;
          changed(); redraw();
        });
        row.appendChild(labelled("Field", fsel));
        row.appendChild(labelled("Operator", osel));
        if (p.op !== "exists" && p.op !== "not_exists") row.appendChild(labelled("Value", valueInput(leaf, type)));
      } else if (p.kind === "has_tag" || p.kind === "in_list") {
        var key = p.kind === "has_tag" ? "tag" : "list";
        var input = el("input", { type: "text", list: key === "tag" ? "pb-tags" : "pb-lists" });
        input.value = p[key] || "";
        input.addEventListener("input", function () { p[key] = input.value.trim(); changed(); });
        var cell = labelled(key === "tag" ? "Tag" : "List", input);
        row.appendChild(cell);
        // A host page that can create names offers it beside the input (the funnel editor does).
        if (options.offerName) cell.appendChild(options.offerName(key, input, cell));
      } else if (p.kind === "segment") {
        var segs = options.segments.map(function (sg) { return [sg.id, sg.name]; });
        if (segs.every(function (sg) { return String(sg[0]) !== String(p.segment_id); })) segs.push([p.segment_id, "segment " + p.segment_id]);
        var ssel = select(segs, p.segment_id);
        ssel.addEventListener("change", function () {
          p.segment_id = parseInt(ssel.value, 10);
          delete p.predicate;  // the server fills in the chosen segment's conditions
          changed();
        });
        row.appendChild(labelled("Segment", ssel));
      } else if (p.kind === "event_count") {
        var ev = el("input", { type: "text" });
        ev.value = p.event || "";
        ev.addEventListener("input", function () { p.event = ev.value.trim(); changed(); });
        var cop = select(COUNT_OPS.map(function (o) { return [o, OPS[o]]; }), p.op || "gte");
        cop.addEventListener("change", function () { p.op = cop.value; changed(); });
        var count = el("input", { type: "number", min: "0", step: "1" });
        count.value = p.count === undefined ? 1 : p.count;
        count.addEventListener("input", function () { var n = parseInt(count.value, 10); if (!isNaN(n)) { p.count = n; changed(); } });
        var within = el("input", { type: "number", min: "1", step: "1", placeholder: "all time" });
        within.value = p.within_days === undefined || p.within_days === null ? "" : p.within_days;
        within.addEventListener("input", function () {
          var n = parseInt(within.value, 10);
          if (isNaN(n)) delete p.within_days; else p.within_days = n;
          changed();
        });
        row.appendChild(labelled("Event name", ev));
        row.appendChild(labelled("Times", cop));
        row.appendChild(labelled("Count", count));
        row.appendChild(labelled("In the last days", within));
      } else if (p.kind === "context" || p.kind === "event") {
        // Untyped JSON values: a run's answers, or the properties an event carries.
        var key = p.kind === "context" ? "path" : "property";
        var path = el("input", { type: "text", placeholder: p.kind === "context" ? "vars.name or http.node.data.key" : "plan, or customer.country" });
        path.value = p[key] || "";
        path.addEventListener("input", function () { p[key] = path.value.trim(); changed(); });
        var cxop = select(OPS_BY_TYPE.number.concat(["contains"]).map(function (o) { return [o, OPS[o]]; }), p.op);
        cxop.addEventListener("change", function () { p.op = cxop.value; if (p.op === "exists" || p.op === "not_exists") delete p.value; changed(); redraw(); });
        row.appendChild(labelled(p.kind === "context" ? "Value path" : "Property", path));
        row.appendChild(labelled("Operator", cxop));
        if (p.op !== "exists" && p.op !== "not_exists") {
          var cv = el("input", { type: "text" });
          cv.value = p.value === null || p.value === undefined ? "" : String(p.value);
          cv.addEventListener("input", function () {
            var raw = cv.value;
            p.value = raw === "true" ? true : raw === "false" ? false : raw.trim() !== "" && !isNaN(Number(raw)) ? Number(raw) : raw;
            changed();
          });
          row.appendChild(labelled("Value", cv));
        }
      }
      row.appendChild(removeButton(leaf, parent));
      return row;
    }

    function removeButton(item, parent) {
      var b = el("button", { type: "button", "class": "secondary pb-remove", "aria-label": "Remove this condition", text: "Remove" });
      b.disabled = !parent;
      b.addEventListener("click", function () {
        parent.items.splice(parent.items.indexOf(item), 1);
        changed(); redraw();
      });
      return b;
    }

    function group(g, parent) {
      var box = el("fieldset", { "class": "pb-group" });
      var op = select([["all", "all"], ["any", "any"]], g.op);
      op.addEventListener("change", function () { g.op = op.value; changed(); });
      var neg = el("input", { type: "checkbox" });
      neg.checked = g.neg;
      neg.addEventListener("change", function () { g.neg = neg.checked; changed(); });
      var legend = el("legend", {}, [
        el("label", { "class": "pb-not" }, [neg, document.createTextNode(" not ")]),
        labelled("Match", op),
        el("span", { text: " of these" })
      ]);
      box.appendChild(legend);
      g.items.forEach(function (item) {
        box.appendChild(item.type === "group" ? group(item, g) : leafRow(item, g));
      });
      if (!g.items.length) box.appendChild(el("p", { "class": "muted small", text: "No condition yet." }));
      var add = el("button", { type: "button", "class": "secondary pb-add", text: "Add condition" });
      add.addEventListener("click", function () {
        g.items.push({ type: "leaf", neg: false, p: blankLeaf("field", options) });
        changed(); redraw();
      });
      var addGroup = el("button", { type: "button", "class": "secondary pb-add-group", text: "Add group" });
      addGroup.addEventListener("click", function () {
        g.items.push({ type: "group", op: "any", neg: false, items: [{ type: "leaf", neg: false, p: blankLeaf("field", options) }] });
        changed(); redraw();
      });
      var buttons = el("p", { "class": "actions" }, [add, addGroup]);
      if (parent) buttons.appendChild(removeButton(g, parent));
      box.appendChild(buttons);
      return box;
    }

    redraw();
    return { value: function () { return fromTree(tree); } };
  }

  window.SweeplinePredicate = { render: render };
})();
