/*
 * Live updates for the server-rendered pages: no framework, no build step.
 *
 * A page marks its changing part with
 *   data-live  data-ws-path="/ws/..."  data-fragment-url="/.../fragment/"  data-last-event-id="N"
 * and this script opens that WebSocket (wss:// on https pages) with ?after=<cursor>, the
 * cursor the page was rendered with. The server replays the events the page has not seen, then
 * sends live ones, each as {"type": "event", "event": {"id": ...}, "after": <cursor>}, and
 * {"type": "cursor", "after": <cursor>} when only the cursor moves (audit/consumers.py). The
 * script keeps the latest "after" and reconnects with it, never with an event's id: a live
 * event may commit before one with a smaller id, so resuming after its id could skip that one.
 * Any event re-fetches the fragment (debounced) and swaps it in, keeping what the user typed
 * and which <details> are open. A dropped connection is retried with exponential backoff and
 * the cursor, so nothing is lost; close codes 4400-4404 are final.
 */
(function () {
  "use strict";

  // A control marked data-submit-on-change submits its form when changed (no inline handler:
  // the Content-Security-Policy runs no inline script).
  document.querySelectorAll("[data-submit-on-change]").forEach(function (control) {
    control.addEventListener("change", function () {
      if (control.form) {
        control.form.submit();
      }
    });
  });

  var region = document.querySelector("[data-live]");
  if (!region || !window.WebSocket) {
    return;
  }
  var indicator = document.querySelector("[data-live-indicator]");
  var wsPath = region.dataset.wsPath;
  var fragmentUrl = region.dataset.fragmentUrl;
  var lastEventId = parseInt(region.dataset.lastEventId || "0", 10) || 0;

  var DEBOUNCE_MS = 100;
  var MIN_BACKOFF_MS = 500;
  var MAX_BACKOFF_MS = 15000;
  var FINAL_CLOSE_CODES = {
    4400: "Bad request",
    4401: "Signed out",
    4403: "No access",
    4404: "Not found",
  };

  var retries = 0;
  var debounceTimer = null;
  var fetching = false;
  var fetchAgain = false;
  var lastHtml = null;

  function setState(state, label) {
    if (!indicator) {
      return;
    }
    indicator.dataset.state = state;
    indicator.querySelector(".label").textContent = label;
  }

  // Form values and open <details> survive a swap, matched by element id.
  function snapshot() {
    var state = { values: {}, open: {}, focusId: null, selection: null };
    region.querySelectorAll("[data-preserve][id]").forEach(function (el) {
      state.values[el.id] = el.type === "checkbox" ? el.checked : el.value;
    });
    region.querySelectorAll("details[id]").forEach(function (el) {
      state.open[el.id] = el.open;
    });
    var active = document.activeElement;
    if (active && active.id && region.contains(active)) {
      state.focusId = active.id;
      if (typeof active.selectionStart === "number") {
        state.selection = [active.selectionStart, active.selectionEnd];
      }
    }
    return state;
  }

  function restore(state) {
    Object.keys(state.values).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && region.contains(el)) {
        if (el.type === "checkbox") {
          el.checked = state.values[id];
        } else {
          el.value = state.values[id];
        }
      }
    });
    Object.keys(state.open).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && region.contains(el) && el.tagName === "DETAILS") {
        el.open = state.open[id];
      }
    });
    var focused = state.focusId && document.getElementById(state.focusId);
    if (focused && region.contains(focused)) {
      focused.focus();
      if (state.selection && typeof focused.setSelectionRange === "function") {
        focused.setSelectionRange(state.selection[0], state.selection[1]);
      }
    }
  }

  function swap(html) {
    if (html === lastHtml) {
      return;
    }
    lastHtml = html;
    var state = snapshot();
    region.innerHTML = html;
    restore(state);
    region.dispatchEvent(new CustomEvent("live:updated", { bubbles: true }));
  }

  function refresh() {
    if (fetching) {
      fetchAgain = true;
      return;
    }
    fetching = true;
    fetch(fragmentUrl + window.location.search, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "text/html" },
    })
      .then(function (response) {
        if (response.redirected || !response.ok) {
          // A redirect here means the session ended (login page) or access was withdrawn.
          setState("offline", response.redirected ? "Signed out" : "Update failed");
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html !== null) {
          swap(html);
        }
      })
      .catch(function () {
        setState("reconnecting", "Update failed, retrying…");
        fetchAgain = true;
      })
      .finally(function () {
        fetching = false;
        if (fetchAgain) {
          fetchAgain = false;
          schedule();
        }
      });
  }

  function schedule() {
    clearTimeout(debounceTimer);
    debounceTimer = setTimeout(refresh, DEBOUNCE_MS);
  }

  function onMessage(message) {
    var data;
    try {
      data = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (typeof data.after === "number") {
      lastEventId = data.after;
      region.dataset.lastEventId = String(lastEventId);
    }
    if (data.type === "event" && data.event && typeof data.event.id === "number") {
      region.dispatchEvent(new CustomEvent("live:event", { bubbles: true, detail: data.event }));
      schedule();
    }
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var url = scheme + window.location.host + wsPath + "?after=" + lastEventId;
    var socket = new WebSocket(url);
    setState(retries ? "reconnecting" : "connecting", retries ? "Reconnecting…" : "Connecting…");
    socket.onopen = function () {
      retries = 0;
      setState("live", "Live");
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      if (FINAL_CLOSE_CODES[event.code]) {
        setState("offline", FINAL_CLOSE_CODES[event.code]);
        return;
      }
      var ceiling = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * Math.pow(2, retries));
      retries += 1;
      setState("reconnecting", "Reconnecting…");
      // Jitter spreads the reconnects of many tabs after a server restart.
      setTimeout(connect, ceiling / 2 + Math.random() * (ceiling / 2));
    };
  }

  connect();
})();
