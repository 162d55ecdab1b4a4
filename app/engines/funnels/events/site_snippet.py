"""The site snippet (``page_visit``): a few lines of JavaScript served at ``/t/s.js``.

A page includes ``<script src="…/t/s.js" data-key="<site key>" async></script>``. The snippet
remembers the visitor's signed contact token (tracked links carry it as ``?swl=…``) in
``localStorage`` and reports each page view to ``/t/c`` with ``sendBeacon``. Anonymous visitors
are not reported: a visit can only start a funnel for a known contact, and the token is what
proves who they are.
"""

from __future__ import annotations

SNIPPET = """(function () {
  var script = document.currentScript;
  if (!script) { return; }
  var key = script.getAttribute("data-key");
  var base = script.src.replace(/\\/t\\/s\\.js.*$/, "");
  var params = new URLSearchParams(window.location.search);
  var token = params.get("swl");
  try {
    if (token) { window.localStorage.setItem("swl", token); }
    else { token = window.localStorage.getItem("swl"); }
  } catch (e) { /* storage disabled: use the token from the URL only */ }
  if (!key || !token) { return; }
  var id = (window.crypto && window.crypto.randomUUID) ? window.crypto.randomUUID()
    : String(Date.now()) + Math.random();
  var body = JSON.stringify({
    key: key, visitor: token, id: id, url: window.location.href, title: document.title
  });
  var url = base + "/t/c";
  if (navigator.sendBeacon && navigator.sendBeacon(url, new Blob([body], {type: "text/plain"}))) {
    return;
  }
  fetch(url, {method: "POST", body: body, keepalive: true, mode: "no-cors"});
})();
"""


def snippet_tag(base_url: str, site_key: str) -> str:
    """The ``<script>`` tag a site owner pastes into their pages."""
    return f'<script src="{base_url.rstrip("/")}/t/s.js" data-key="{site_key}" async></script>'
