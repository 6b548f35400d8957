// Stepway console: optional enhancements; every page works without this script.
// 1. Times: <time datetime> elements are shown in the reader's local time zone.
// 2. Live parts: an element with data-poll="URL" is refreshed from that URL every
//    2 seconds while the tab is visible; when a run's status changes, or a task starts or
//    stops waiting for a person (data-waiting), the page reloads to show its new forms.
// 3. Forms with data-confirm="question" ask before they are sent.
(function () {
  "use strict";
  var fmt = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit"
  });

  function ago(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min ago";
    return null;
  }

  function localTimes(root) {
    var nodes = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var t = new Date(nodes[i].getAttribute("datetime"));
      if (isNaN(t.getTime())) continue;
      var rel = ago(Date.now() - t.getTime());
      nodes[i].textContent = fmt.format(t) + (rel ? " (" + rel + ")" : "");
    }
  }

  function poll(el) {
    var url = el.getAttribute("data-poll");
    var status = el.getAttribute("data-status");
    var waiting = el.getAttribute("data-waiting");
    function tick() {
      if (document.hidden) { setTimeout(tick, 2000); return; }
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) { setTimeout(tick, 5000); return; }
          var box = document.createElement("div");
          box.innerHTML = text;
          var fresh = box.firstElementChild;
          if (!fresh) { setTimeout(tick, 2000); return; }
          var newStatus = fresh.getAttribute("data-status");
          if (status && newStatus && newStatus !== status) { location.reload(); return; }
          if (waiting !== null && fresh.getAttribute("data-waiting") !== waiting) {
            location.reload(); return;
          }
          el.innerHTML = fresh.innerHTML;
          localTimes(el);
          if (fresh.hasAttribute("data-poll")) setTimeout(tick, 2000);
        })
        .catch(function () { setTimeout(tick, 5000); });
    }
    setTimeout(tick, 2000);
  }

  document.addEventListener("submit", function (e) {
    var q = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (q && !window.confirm(q)) e.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    var live = document.querySelectorAll("[data-poll]");
    for (var i = 0; i < live.length; i++) poll(live[i]);
    if (location.hash === "#task") {
      var task = document.getElementById("task");
      if (task) task.focus();
    }
  });
})();
