// Progressive enhancement only: the expiry countdowns tick. The console works without it.
"use strict";
(function () {
  function tick() {
    document.querySelectorAll("time[data-expires]").forEach(function (el) {
      var left = Math.max(0, Math.floor((Date.parse(el.dataset.expires) - Date.now()) / 1000));
      el.textContent = left >= 3600 ? Math.floor(left / 3600) + "h " + Math.floor((left % 3600) / 60) + "m"
        : Math.floor(left / 60) + "m " + (left % 60) + "s";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 1000); });
})();
