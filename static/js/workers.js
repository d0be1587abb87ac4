/*
 * The workers page's live part: re-fetches the fragment at data-url (queues, workers, active
 * tasks; fleet.views.workers_live) every data-poll-seconds and swaps it in. The server renders
 * it from the workers' last report in its cache and has a worker ask them again when that
 * report is old, so a poll never waits for the workers. No inline script (CSP): this file
 * only. The container's data-updates counts the fragments swapped in (tests wait on it).
 */
(function () {
  "use strict";

  var region = document.querySelector("[data-workers-live]");
  if (!region) {
    return;
  }
  var url = region.dataset.url;
  var pollMs = (parseInt(region.dataset.pollSeconds, 10) || 5) * 1000;
  var inFlight = false;

  function poll() {
    if (inFlight || document.hidden) {
      return;
    }
    inFlight = true;
    fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (response) {
        // A redirect is the login page: the session ended; leave the last figures shown.
        if (response.redirected || !response.ok) {
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html !== null) {
          region.innerHTML = html;
          region.dataset.updates = String((parseInt(region.dataset.updates, 10) || 0) + 1);
        }
      })
      .catch(function () {
        // A network error: the next poll tries again.
      })
      .then(function () {
        inFlight = false;
      });
  }

  window.setInterval(poll, pollMs);
  document.addEventListener("visibilitychange", poll);
})();
