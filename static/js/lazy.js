/*
 * Folded sections filled when first opened: <details data-lazy-src="URL"> holds a
 * [data-lazy-body] element (a link to URL, for readers without script) that is replaced by the
 * HTML fragment at URL the first time the section opens. Pages stay small and fast with many
 * folded sections (a run's per-step state diffs, its earlier audit events). A section opened
 * again after a live refresh (live.js restores which <details> were open) loads again. A
 * failed load says so in the section and is retried when it is opened next.
 */
(function () {
  "use strict";

  function load(details) {
    var body = details.querySelector("[data-lazy-body]");
    if (!body || details.dataset.lazyState === "loading" || details.dataset.lazyState === "loaded") {
      return;
    }
    details.dataset.lazyState = "loading";
    body.setAttribute("aria-busy", "true");
    fetch(details.dataset.lazySrc, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        body.innerHTML = html;
        details.dataset.lazyState = "loaded";
      })
      .catch(function (error) {
        body.textContent = "Could not load this section (" + error.message + "): close it and open it again to retry.";
        details.dataset.lazyState = "failed";
      })
      .finally(function () {
        body.removeAttribute("aria-busy");
      });
  }

  // "toggle" does not bubble: listen in the capture phase, for sections added later as well.
  document.addEventListener(
    "toggle",
    function (event) {
      var details = event.target;
      if (details.tagName === "DETAILS" && details.open && details.dataset.lazySrc) {
        load(details);
      }
    },
    true
  );
  document.querySelectorAll("details[open][data-lazy-src]").forEach(load);
})();
