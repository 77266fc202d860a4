// kgen report: expand/collapse every attempt, and open the attempt a link points at. Nothing is fetched.
(function () {
  function setAll(open) {
    document.querySelectorAll("details.attempt").forEach(function (d) { d.open = open; });
  }
  function openTarget() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    if (el) el.scrollIntoView();
  }
  document.addEventListener("click", function (event) {
    var action = event.target && event.target.getAttribute && event.target.getAttribute("data-action");
    if (action === "expand") setAll(true);
    if (action === "collapse") setAll(false);
  });
  window.addEventListener("hashchange", openTarget);
  document.addEventListener("DOMContentLoaded", openTarget);
})();
