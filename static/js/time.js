/*
 * Times in the viewer's time zone. The server prints every time as
 *   <time datetime="2026-05-01T14:03:07Z" data-local="datetime">2026-05-01 14:03:07 UTC</time>
 * (agentops/jinja2.py time_tag). This script rewrites the text of those with data-local to
 * the browser's time zone in the same shape ("datetime", "time" or "minutes"), and gives every
 * <time datetime> a title with the absolute time, its zone and UTC. Runs again on the part a
 * live update swapped in (the "live:updated" event of live.js). Filter forms read date-times
 * in the same zone: the script puts the browser's zone name into every
 * <input data-zone-input> (sent as ?tz=, which the server reads date-times in; a link that
 * already names a zone for its date-times keeps it) and into the [data-zone-name] of its form
 * that names it, so a page shows one zone and its filters agree with it.
 * A file, not inline: the Content-Security-Policy runs no inline script.
 */
(function () {
  "use strict";

  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  var zoneName = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" });
  var full = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function shortZone(date) {
    var part = zoneName.formatToParts(date).filter(function (p) {
      return p.type === "timeZoneName";
    })[0];
    return part ? part.value : zone;
  }

  function text(date, show) {
    var day = date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate());
    var minutes = pad(date.getHours()) + ":" + pad(date.getMinutes());
    var seconds = minutes + ":" + pad(date.getSeconds());
    var shapes = { datetime: day + " " + seconds, time: seconds, minutes: day + " " + minutes };
    return shapes[show] === undefined ? null : shapes[show] + " " + shortZone(date);
  }

  function utc(date) {
    return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  function localize(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) {
        return;
      }
      var local = el.dataset.local ? text(date, el.dataset.local) : null;
      if (local) {
        el.textContent = local;
      }
      el.title = full.format(date) + " (" + zone + ") · " + utc(date);
    });
  }

  function nameZone(root) {
    root.querySelectorAll("input[data-zone-input]").forEach(function (input) {
      // A link's date-times were written in the zone it names: keep that zone for them.
      var dated = Array.prototype.some.call(
        input.form.querySelectorAll("input[type=datetime-local]"),
        function (field) {
          return field.value !== "";
        }
      );
      if (!input.value || !dated) {
        input.value = zone;
      }
      input.form.querySelectorAll("[data-zone-name]").forEach(function (el) {
        el.textContent = input.value;
      });
    });
  }

  localize(document);
  nameZone(document);
  document.addEventListener("live:updated", function (event) {
    localize(event.target);
    nameZone(event.target);
  });
})();
