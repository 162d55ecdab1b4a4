// The ad-rule editor's builder: tasks as rows of conditions (AND / OR), an action with the fields
// of its type and a live preview of name templates, a cooldown; and the weekly timetable as a
// grid of hours to click. The JSON textarea (the "Advanced" tab) stays the one thing the form
// submits: the builder writes it on every edit and reads it back when the tab is switched, so the
// server checks one document whichever way it was written.
(function () {
  "use strict";

  var CONDITION_TYPES = {
    metric_value: "Metric compared with a value",
    metric_metric: "Metric compared with another metric",
    clock: "Time of day and weekday",
    custom_metric: "Value from a Google Sheet",
  };
  var ACTIONS = {
    pause_campaign: { label: "Pause the campaign", fields: [] },
    activate_campaign: { label: "Activate the campaign", fields: [] },
    increase_budget: { label: "Increase the daily budget", fields: ["by", "amount", "max"] },
    decrease_budget: { label: "Decrease the daily budget", fields: ["by", "amount", "min"] },
    set_budget: { label: "Set the daily budget", fields: ["amount"] },
    rename: { label: "Rename from a template", fields: ["template"] },
    append_to_name: { label: "Append text to the name", fields: ["text", "separator"] },
    remove_from_name: { label: "Remove text from the name", fields: ["text", "separator"] },
    notify_email: { label: "Send an e-mail", fields: ["recipients", "subject"] },
    notify_webhook: { label: "Call a webhook", fields: ["url", "secret"] },
    log_only: { label: "Only record it in the log", fields: [] },
    increase_bid: { label: "Raise the bid cap or cost cap", fields: ["by", "amount", "max", "strategy"] },
    decrease_bid: { label: "Lower the bid cap or cost cap", fields: ["by", "amount", "min", "strategy"] },
    set_bid: { label: "Set the bid cap or cost cap", fields: ["amount", "strategy"] },
  };
  var ACTION_LABELS = {
    by: "Change by",
    amount: "Amount",
    max: "Never above (daily budget)",
    min: "Never below (daily budget)",
    template: "Name template ({name}, {rule}, {date}, {id})",
    text: "Text",
    separator: "Separator",
    recipients: "Recipients (comma-separated)",
    subject: "Subject ({name}, {rule}, {date})",
    url: "Webhook URL",
    secret: "Signing secret (write-only)",
    strategy: "Ad sets bidding with",
    "increase_bid.max": "Never above (bid)",
    "decrease_bid.min": "Never below (bid)",
  };
  var BID_TARGETS = { any: "a bid cap or a cost cap", bid_cap: "a bid cap only", cost_cap: "a cost cap only" };
  var SAMPLE_NAME = "Summer sale — DE";
  var SAMPLE_ID = "120000000001";

  var catalogue, errors, tasks, textarea, panel, ruleName, uid = 0;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") node.textContent = attrs[key];
      else if (attrs[key] !== null && attrs[key] !== undefined && attrs[key] !== false)
        node.setAttribute(key, attrs[key] === true ? "" : attrs[key]);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function readJson(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : {};
  }

  // -- errors: the server's paths (tasks[0].action.max) are pinned on the matching input --------

  function errorPath(path, message) {
    var missing = /missing required field `([^`]+)`/.exec(message);
    return missing ? path + "." + missing[1] : path;
  }

  function errorsFor(path) {
    var found = [];
    Object.keys(errors).forEach(function (key) {
      if (errorPath(key, errors[key]) === path) found.push(errors[key]);
    });
    return found;
  }

  function withErrors(label, control, path) {
    var messages = errorsFor(path);
    if (!messages.length) return label;
    var id = "err-" + (++uid);
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-describedby", id);
    var message = el("div", { class: "field-error", id: id, "data-error-for": path, text: messages.join(" ") });
    if (label.tagName !== "LABEL") {  // a group: the message is its last line
      label.appendChild(message);
      return label;
    }
    // Outside the label, so the field's name stays its label; read out as its description.
    return el("div", { class: "field" }, [label, message]);
  }

  // -- controls ----------------------------------------------------------------------------------

  function field(text, control, path, onInput) {
    control.setAttribute("data-path", path);
    control.addEventListener(control.tagName === "SELECT" ? "change" : "input", function () {
      onInput(control.value);
      sync();
    });
    return withErrors(el("label", {}, [document.createTextNode(text + " "), control]), control, path);
  }

  // options: a mapping of value to label, or a list of [value, label] pairs shown in its order.
  function select(options, value) {
    var node = el("select");
    var pairs = Array.isArray(options) ? options : Object.keys(options).map(function (key) { return [key, options[key]]; });
    pairs.forEach(function (pair) {
      node.appendChild(el("option", { value: pair[0], selected: pair[0] === value, text: pair[1] }));
    });
    return node;
  }

  function list(values) {
    var out = {};
    values.forEach(function (v) { out[v] = v.replace(/_/g, " "); });
    return out;
  }

  function input(value, extra) {
    var attrs = { value: value === undefined || value === null ? "" : String(value) };
    Object.keys(extra || {}).forEach(function (k) { attrs[k] = extra[k]; });
    return el("input", attrs);
  }

  function setOrDrop(object, key, value) {
    if (value === "" || value === null || value === undefined) delete object[key];
    else object[key] = value;
  }

  // -- conditions -------------------------------------------------------------------------------

  function conditionRow(task, ci, path) {
    var c = task.conditions[ci];
    var row = el("div", { class: "condition row", "data-condition": String(ci) });
    var type = select(CONDITION_TYPES, c.type);
    row.appendChild(field("Condition", type, path + ".type", function (v) {
      task.conditions[ci] = blankCondition(v);
      render();
    }));
    var metrics = list(catalogue.metrics), periods = list(catalogue.periods);
    var operators = catalogue.operators;
    function bind(label, key, control) {
      row.appendChild(field(label, control, path + "." + key, function (v) { setOrDrop(c, key, v); }));
    }
    if (c.type === "metric_value" || c.type === "metric_metric") {
      bind("Metric", "metric", select(metrics, c.metric));
      bind("Period", "period", select(periods, c.period || "today"));
      bind("Is", "operator", select(operators, c.operator));
      if (c.type === "metric_value") {
        bind("Value", "value", input(c.value, { inputmode: "decimal" }));
      } else {
        bind("Times", "multiplier", input(c.multiplier === undefined ? "1" : c.multiplier, { inputmode: "decimal" }));
        bind("Other metric", "other_metric", select(metrics, c.other_metric));
        bind("Its period", "other_period", select(periods, c.other_period || "today"));
      }
    } else if (c.type === "clock") {
      var hours = input((c.hours || []).join(", "), { inputmode: "numeric" });
      row.appendChild(field("Hours (0–23, comma-separated)", hours, path + ".hours", function (v) {
        c.hours = v.split(",").map(function (h) { return h.trim(); }).filter(Boolean)
          .map(function (h) { return /^\d+$/.test(h) ? Number(h) : h; });
      }));
      var days = el("fieldset", { class: "weekdays" }, [el("legend", { text: "Weekdays" })]);
      catalogue.weekdays.forEach(function (d) {
        var box = el("input", { type: "checkbox", value: d, checked: (c.weekdays || catalogue.weekdays).indexOf(d) >= 0 });
        box.addEventListener("change", function () {
          c.weekdays = Array.prototype.filter.call(days.querySelectorAll("input:checked"), function () { return true; })
            .map(function (b) { return b.value; });
          sync();
        });
        days.appendChild(el("label", { class: "inline-check" }, [box, document.createTextNode(" " + d)]));
      });
      row.appendChild(withErrors(days, days, path + ".weekdays"));
    } else if (c.type === "custom_metric") {
      bind("Spreadsheet id", "spreadsheet_id", input(c.spreadsheet_id));
      bind("Sheet", "sheet_name", input(c.sheet_name));
      bind("Campaign id column", "lookup_column", input(c.lookup_column, { size: 3 }));
      bind("Value column", "value_column", input(c.value_column, { size: 3 }));
      bind("Is", "operator", select(operators, c.operator));
      bind("Value", "value", input(c.value, { inputmode: "decimal" }));
    }
    var remove = el("button", { type: "button", class: "secondary remove-condition", text: "Remove condition" });
    remove.addEventListener("click", function () {
      task.conditions.splice(ci, 1);
      render();
    });
    row.appendChild(remove);
    return row;
  }

  function blankCondition(type) {
    if (type === "metric_metric")
      return { type: type, metric: "cpc", period: "today", operator: "gt", other_metric: "cpc", other_period: "last_7d", multiplier: "1.5" };
    if (type === "clock") return { type: type, hours: [9], weekdays: catalogue.weekdays.slice() };
    if (type === "custom_metric")
      return { type: type, spreadsheet_id: "", sheet_name: "Sheet1", lookup_column: "A", value_column: "B", operator: "gt", value: "" };
    return { type: "metric_value", metric: "spend", period: "today", operator: "gt", value: "" };
  }

  // -- actions ----------------------------------------------------------------------------------

  function today() {
    return new Date().toISOString().slice(0, 10);
  }

  function previewName(action) {
    var sep = action.separator === undefined ? " " : action.separator;
    if (action.type === "rename" || action.type === "notify_email") {
      var tpl = (action.type === "rename" ? action.template : action.subject) || "";
      return tpl.split("{name}").join(SAMPLE_NAME).split("{rule}").join(ruleName.value || "this rule")
        .split("{date}").join(today()).split("{id}").join(SAMPLE_ID);
    }
    if (action.type === "append_to_name") return action.text ? SAMPLE_NAME + sep + action.text : SAMPLE_NAME;
    if (action.type === "remove_from_name") {
      if (!action.text) return SAMPLE_NAME;
      return SAMPLE_NAME.split(sep + action.text).join("").split(action.text).join("").trim();
    }
    return null;
  }

  var LEVEL_NOUNS = { campaign: "campaign", adset: "ad set", ad: "ad" };
  var BUDGET_ACTIONS = ["increase_budget", "decrease_budget", "set_budget"];
  var BID_ACTIONS = ["increase_bid", "decrease_bid", "set_bid"];

  function level() {
    var chosen = document.getElementById("rule-level");
    return chosen && LEVEL_NOUNS[chosen.value] ? chosen.value : "campaign";
  }

  // The actions at the rule's level: every level pauses and starts; an ad has no budget, so an ad
  // rule offers no budget action (one already chosen stays, and the server names the problem).
  function actionChoices(current) {
    var noun = LEVEL_NOUNS[level()];
    return Object.keys(ACTIONS).reduce(function (o, k) {
      if (level() === "ad" && BUDGET_ACTIONS.indexOf(k) >= 0 && k !== current) return o;
      // Bids and cost caps live on ad sets (Meta's bid_amount).
      if (level() !== "adset" && BID_ACTIONS.indexOf(k) >= 0 && k !== current) return o;
      o[k] = ACTIONS[k].label.replace("the campaign", "the " + noun).replace("the daily budget", "the budget");
      return o;
    }, {});
  }

  function actionBlock(task, path) {
    var a = task.action;
    var box = el("fieldset", { class: "action" }, [el("legend", { text: "Then" })]);
    var type = select(actionChoices(a.type), a.type);
    box.appendChild(field("Action", type, path + ".type", function (v) {
      task.action = { type: v };
      if (v === "increase_budget" || v === "decrease_budget" || v === "increase_bid" || v === "decrease_bid") task.action.by = "percent";
      render();
    }));
    var preview = null;
    function refreshPreview() {
      if (!preview) return;
      preview.querySelector("output").textContent = previewName(a);
    }
    (ACTIONS[a.type] || { fields: [] }).fields.forEach(function (key) {
      var control;
      if (key === "by") control = select({ percent: "percent", amount: "amount (account currency)" }, a.by || "percent");
      else if (key === "recipients") control = input((a.recipients || []).join(", "), { type: "text", autocomplete: "off" });
      else if (key === "secret") control = input("", { type: "password", autocomplete: "new-password", placeholder: a.has_secret ? "kept (type to replace)" : "" });
      else if (key === "strategy") control = select(BID_TARGETS, a.strategy || "any");
      else if (key === "amount" || key === "max" || key === "min") control = input(a[key], { inputmode: "decimal" });
      else control = input(a[key]);
      box.appendChild(field(ACTION_LABELS[a.type + "." + key] || ACTION_LABELS[key], control, path + "." + key, function (v) {
        if (key === "recipients") a.recipients = v.split(",").map(function (r) { return r.trim(); }).filter(Boolean);
        else setOrDrop(a, key, v);
        refreshPreview();
      }));
    });
    if (previewName(a) !== null) {
      var label = a.type === "notify_email" ? "Subject preview" : "Name preview";
      preview = el("p", { class: "name-preview" }, [
        document.createTextNode(label + " (for a campaign called “" + SAMPLE_NAME + "”): "),
        el("output", { "aria-live": "polite", class: "preview-value" }),
      ]);
      box.appendChild(preview);
      refreshPreview();
      ruleName.addEventListener("input", refreshPreview);
    }
    return withErrors(box, box, path);
  }

  // -- tasks ------------------------------------------------------------------------------------

  function taskBlock(ti) {
    var task = tasks[ti];
    var path = "tasks[" + ti + "]";
    task.conditions = task.conditions || [];
    task.action = task.action || { type: "log_only" };
    var box = el("fieldset", { class: "task card", "data-task": String(ti) }, [el("legend", { text: "Task " + (ti + 1) })]);
    var head = el("div", { class: "row" });
    head.appendChild(field("Task name", input(task.name), path + ".name", function (v) { task.name = v; }));
    head.appendChild(field("Match", select({ and: "all conditions (AND)", or: "any condition (OR)" }, task.group || "and"), path + ".group", function (v) { task.group = v; }));
    head.appendChild(field("Cooldown", select(catalogue.cooldowns, task.cooldown || "1h"), path + ".cooldown", function (v) { task.cooldown = v; }));
    box.appendChild(head);
    var conditions = el("div", { class: "conditions" }, [el("p", { class: "small muted", text: task.conditions.length ? "When" : "No condition: the action applies to every campaign the pre-filters keep." })]);
    task.conditions.forEach(function (_, ci) { conditions.appendChild(conditionRow(task, ci, path + ".conditions[" + ci + "]")); });
    box.appendChild(withErrors(conditions, conditions, path + ".conditions"));
    var add = el("button", { type: "button", class: "secondary add-condition", text: "Add condition" });
    add.addEventListener("click", function () {
      task.conditions.push(blankCondition("metric_value"));
      render();
      var rows = panel.querySelectorAll('[data-task="' + ti + '"] .condition');
      rows[rows.length - 1].querySelector("select").focus();
    });
    box.appendChild(add);
    box.appendChild(actionBlock(task, path + ".action"));
    var remove = el("button", { type: "button", class: "secondary remove-task", text: "Remove task " + (ti + 1) });
    remove.addEventListener("click", function () {
      tasks.splice(ti, 1);
      render();
    });
    box.appendChild(remove);
    return withErrors(box, box, path);
  }

  function render(write) {
    var focused = document.activeElement && document.activeElement.getAttribute("data-path");
    panel.textContent = "";
    tasks.forEach(function (_, ti) { panel.appendChild(taskBlock(ti)); });
    var add = el("button", { type: "button", class: "secondary", id: "add-task", text: "Add task" });
    add.addEventListener("click", function () {
      tasks.push({ name: "", conditions: [blankCondition("metric_value")], group: "and", action: { type: "log_only" }, cooldown: "1h" });
      render();
    });
    panel.appendChild(add);
    if (write !== false) sync();
    if (focused) {
      var again = panel.querySelector('[data-path="' + focused + '"]');
      if (again) again.focus();
    }
  }

  function sync() {
    textarea.value = JSON.stringify(tasks, null, 2);
  }

  // -- tabs -------------------------------------------------------------------------------------

  function showTab(which) {
    var builder = document.getElementById("tab-builder"), json = document.getElementById("tab-json");
    var notice = document.getElementById("json-notice");
    if (which === "builder") {
      try {
        var parsed = JSON.parse(textarea.value || "[]");
        if (!Array.isArray(parsed)) throw new Error("the tasks must be a list");
        tasks = parsed;
      } catch (e) {
        notice.textContent = "The builder cannot show this JSON (" + e.message + "): fix it here first.";
        notice.hidden = false;
        which = "json";
      }
    }
    if (which === "builder") {
      notice.hidden = true;
      render(false);  // showing is not editing: the JSON stays exactly as it was written
    }
    var onBuilder = which === "builder";
    builder.setAttribute("aria-selected", String(onBuilder));
    json.setAttribute("aria-selected", String(!onBuilder));
    builder.tabIndex = onBuilder ? 0 : -1;
    json.tabIndex = onBuilder ? -1 : 0;
    panel.hidden = !onBuilder;
    document.getElementById("panel-json").hidden = onBuilder;
  }

  function setUpTabs() {
    var tabs = document.getElementById("task-tabs");
    tabs.hidden = false;
    var notice = el("p", { class: "error", id: "json-notice", role: "alert", hidden: true });
    document.getElementById("panel-json").prepend(notice);
    ["builder", "json"].forEach(function (which) {
      var tab = document.getElementById("tab-" + which);
      tab.addEventListener("click", function () { showTab(which); });
      tab.addEventListener("keydown", function (event) {
        if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
          var other = which === "builder" ? "json" : "builder";
          showTab(other);
          document.getElementById("tab-" + other).focus();
        }
      });
    });
    showTab("builder");
  }

  // -- weekly grid ------------------------------------------------------------------------------

  function setUpWeekGrid() {
    var grid = document.getElementById("week-grid");
    if (!grid) return;
    var inputs = {};
    document.querySelectorAll(".week-inputs input[data-day]").forEach(function (i) { inputs[i.dataset.day] = i; });
    function times(day) {
      return inputs[day].value.split(",").map(function (t) { return t.trim(); }).filter(Boolean);
    }
    var table = el("table", { class: "grid week" });
    var head = el("tr", {}, [el("th", { scope: "col", text: "Day" })]);
    for (var h = 0; h < 24; h++) head.appendChild(el("th", { scope: "col", text: String(h) }));
    table.appendChild(el("thead", {}, [head]));
    var body = el("tbody");
    Object.keys(inputs).forEach(function (day) {
      var row = el("tr", {}, [el("th", { scope: "row", text: day })]);
      for (var hour = 0; hour < 24; hour++) {
        var slot = (hour < 10 ? "0" : "") + hour + ":00";
        var button = el("button", { type: "button", class: "slot", "data-day": day, "data-slot": slot, "aria-label": day + " " + slot, "aria-pressed": "false" });
        button.addEventListener("click", function (event) {
          var b = event.currentTarget, d = b.dataset.day, s = b.dataset.slot;
          var current = times(d);
          var at = current.indexOf(s);
          if (at >= 0) current.splice(at, 1);
          else current.push(s);
          current.sort();
          inputs[d].value = current.join(", ");
          paint();
        });
        row.appendChild(el("td", {}, [button]));
      }
      body.appendChild(row);
    });
    table.appendChild(body);
    grid.appendChild(table);
    grid.hidden = false;
    function paint() {
      grid.querySelectorAll("button.slot").forEach(function (b) {
        b.setAttribute("aria-pressed", String(times(b.dataset.day).indexOf(b.dataset.slot) >= 0));
      });
    }
    Object.keys(inputs).forEach(function (d) { inputs[d].addEventListener("input", paint); });
    paint();
  }

  function setUpScheduleMode() {
    var mode = document.getElementById("schedule-mode");
    if (!mode) return;
    function apply() {
      document.querySelectorAll(".schedule-interval").forEach(function (n) { n.hidden = mode.value !== "interval"; });
      document.querySelectorAll(".schedule-timetable").forEach(function (n) { n.hidden = mode.value !== "timetable"; });
    }
    mode.addEventListener("change", apply);
    apply();
  }

  function start() {
    textarea = document.getElementById("tasks_json");
    panel = document.getElementById("panel-builder");
    ruleName = document.querySelector('#rule-form input[name="name"]');
    if (!textarea || !panel) return;
    catalogue = readJson("rule-catalogue");
    errors = readJson("rule-task-errors");
    setUpScheduleMode();
    setUpWeekGrid();
    var levelSelect = document.getElementById("rule-level");
    if (levelSelect) levelSelect.addEventListener("change", function () { if (tasks) render(); });
    setUpTabs();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
