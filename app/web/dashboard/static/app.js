// Behaviour every dashboard page shares. Loaded as a file (the Content-Security-Policy allows no
// inline script): the phone menu, confirmations (data-confirm), keyboard access to tables that scroll sideways, and forms whose
// controls submit themselves when changed (data-autosubmit), in place of inline handlers.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function onReady(fn) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn);
    else fn();
  }

  // A table that scrolls inside its box must be reachable by keyboard (WCAG 2.1.1); give it a
  // tab stop only when it really overflows.
  function markScrollers(root) {
    root.querySelectorAll("table.grid, .table-scroll, pre").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth + 1) {
        if (!el.hasAttribute("tabindex")) {
          el.setAttribute("tabindex", "0");
          el.dataset.scrollTab = "1";
        }
      } else if (el.dataset.scrollTab) {
        el.removeAttribute("tabindex");
        delete el.dataset.scrollTab;
      }
    });
  }

  onReady(function () {
    var toggle = document.querySelector(".menu-toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        var bar = toggle.closest(".topbar");
        var open = bar.classList.toggle("open");
        toggle.setAttribute("aria-expanded", open ? "true" : "false");
      });
    }
    document.addEventListener("change", function (event) {
      var control = event.target;
      if (control.matches && control.matches("[data-autosubmit]") && control.form) {
        control.form.requestSubmit();
      }
    });
    // data-confirm: ask before a destructive submit.
    document.addEventListener("submit", function (event) {
      var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
      if (question && !window.confirm(question)) event.preventDefault();
    });
    markScrollers(document);
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { markScrollers(document); }, 150);
    });
    document.body.addEventListener("htmx:afterSwap", function (event) {
      markScrollers(event.target);
    });
  });
})();
