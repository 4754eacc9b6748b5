// Progressive enhancement only: the expiry countdowns tick, and every UTC time also shows in the
// viewer's local time zone (a second line and the title). The console works without it.
"use strict";
(function () {
  var LOCAL = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
    hour12: false, timeZoneName: "short" };

  function tick() {
    document.querySelectorAll("time[data-expires]").forEach(function (el) {
      var left = Math.max(0, Math.floor((Date.parse(el.dataset.expires) - Date.now()) / 1000));
      el.textContent = left >= 3600 ? Math.floor(left / 3600) + "h " + Math.floor((left % 3600) / 60) + "m"
        : Math.floor(left / 60) + "m " + (left % 60) + "s";
    });
  }

  function localTimes() {
    document.querySelectorAll("time.utc[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      var local = when.toLocaleString(undefined, LOCAL);
      el.title = "your local time: " + local;
      var line = document.createElement("span");
      line.className = "local";
      line.textContent = local;
      el.after(line);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { localTimes(); tick(); setInterval(tick, 1000); });
})();
