// Behaviour every dashboard page shares. Loaded as a file (the Content-Security-Policy allows no
// inline script): the phone menu, confirmations (data-confirm), keyboard access to tables that scroll sideways, forms whose
// controls submit themselves when changed (data-autosubmit), in place of inline handlers, and the
// unsaved-changes guard of the editors (data-unsaved).
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


  // data-unsaved: an editor's form whose edits would be lost by leaving the page. What the form
  // holds is compared with what it held once the page's scripts had run (the visual editors
  // write their graph into the form without input events, so a comparison sees their edits too);
  // a form shown again after a refused save carries data-unsaved="dirty", since what it shows is
  // not saved. Leaving through a link of the dashboard asks first; closing, reloading or typing
  // another address gets the browser's own question; submitting the form (saving) does not ask.
  function unsavedGuard() {
    var forms = Array.prototype.slice.call(document.querySelectorAll("form[data-unsaved]"));
    if (!forms.length) return;
    var leaving = false;
    function state(form) {
      var parts = [];
      new FormData(form).forEach(function (value, key) {
        if (typeof value === "string") parts.push(key + "=" + value);
      });
      return parts.join("\u0000");
    }
    forms.forEach(function (form) { form.dataset.unsavedBase = state(form); });
    window.sweeplineUnsaved = function () {
      return !leaving && forms.some(function (form) {
        return form.getAttribute("data-unsaved") === "dirty" || state(form) !== form.dataset.unsavedBase;
      });
    };
    document.addEventListener("submit", function (event) {
      // Registered after data-confirm: a submit the person called off leaves the guard armed.
      if (!event.defaultPrevented && forms.indexOf(event.target) >= 0) leaving = true;
    });
    // Back from the next page out of the browser's cache: this page is open again, and guarded.
    window.addEventListener("pageshow", function (event) { if (event.persisted) leaving = false; });
    window.addEventListener("beforeunload", function (event) {
      if (!window.sweeplineUnsaved()) return;
      event.preventDefault();
      event.returnValue = "";
    });
    document.addEventListener("click", function (event) {
      if (event.defaultPrevented || event.button !== 0) return;
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
      var link = event.target.closest && event.target.closest("a[href]");
      if (!link || link.hasAttribute("download") || (link.target && link.target !== "_self")) return;
      var to = new URL(link.href, window.location.href);
      if (to.origin !== window.location.origin) return;
      if (to.pathname === window.location.pathname && to.search === window.location.search && to.hash) return;
      if (!window.sweeplineUnsaved()) return;
      if (window.confirm("This page has changes that are not saved. Leave without saving them?")) {
        leaving = true;
      } else {
        event.preventDefault();
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
    // After the page's own scripts (deferred, and those starting on DOMContentLoaded) have
    // filled their forms: what the form holds then is what is saved.
    window.addEventListener("load", function () { setTimeout(unsavedGuard, 0); });
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
