/*
 * The approvals inbox for a reviewer working all day: keyboard shortcuts, a reason required
 * to reject, the place kept after a decision, and the pending count in the tab title and the
 * navigation badge as the list updates live (live.js swaps the list in).
 *
 *   j / k        next / previous request        Enter / Space  open or fold it (native)
 *   a            approve (asks to confirm)       r              reject: its reason field
 *   ?            the shortcuts                   Esc            close a dialog (native)
 *
 * Shortcuts never fire while the focus is in a field, with a modifier key, or under a dialog.
 */
(function () {
  "use strict";

  // The inbox's list, or a request's own page (one request, always the current one).
  var region = document.getElementById("live-region") || document.querySelector("[data-approval-page]");
  if (!region) {
    return;
  }
  var help = document.getElementById("shortcuts-dialog");
  var baseTitle = document.title.replace(/^\(\d+\) /, "");

  function summaries() {
    return Array.prototype.slice.call(region.querySelectorAll("[data-card-summary]"));
  }

  function cardOf(element) {
    return element && element.closest ? element.closest("[data-approval-id]") : null;
  }

  function currentCard() {
    return region.dataset.approvalPage !== undefined ? region : cardOf(document.activeElement);
  }

  function focusCard(card) {
    var summary = card && card.querySelector("[data-card-summary]");
    if (summary) {
      summary.focus();
      summary.scrollIntoView({ block: "nearest" });
    }
  }

  function move(step) {
    var all = summaries();
    if (!all.length) {
      return;
    }
    var card = currentCard();
    var at = card ? all.indexOf(card.querySelector("[data-card-summary]")) : -1;
    var next = at < 0 ? (step > 0 ? 0 : all.length - 1) : at + step;
    next = Math.max(0, Math.min(all.length - 1, next));
    focusCard(cardOf(all[next]));
  }

  function open(card) {
    var details = card.querySelector("[data-card]");
    if (details) {
      details.open = true;
    }
  }

  function typing(target) {
    if (!target || !target.tagName) {
      return false;
    }
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }

  function commentMissing(form) {
    var comment = form.querySelector("[data-comment]");
    var error = form.querySelector("[data-comment-error]");
    var missing = comment && !comment.value.trim();
    if (error) {
      error.hidden = !missing;
    }
    if (comment) {
      comment.setAttribute("aria-invalid", missing ? "true" : "false");
    }
    if (missing) {
      open(cardOf(form));
      comment.focus();
    }
    return missing;
  }

  // A rejection needs a reason, a response its text: refused here before the confirmation
  // (and by the server).
  region.addEventListener("confirm:before", function (event) {
    var button = event.target;
    if ((button.value === "reject" || button.value === "respond") && button.form && commentMissing(button.form)) {
      event.preventDefault();
    }
  });
  region.addEventListener("submit", function (event) {
    var submitter = event.submitter;
    if (submitter && (submitter.value === "reject" || submitter.value === "respond") && commentMissing(event.target)) {
      event.preventDefault();
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (typing(event.target) || document.querySelector("dialog[open]")) {
      return;
    }
    var card = currentCard();
    switch (event.key) {
      case "j":
        move(1);
        break;
      case "k":
        move(-1);
        break;
      case "?":
        if (help) {
          help.showModal();
        }
        break;
      case "a": {
        var approve = card && card.querySelector("[data-action=approve]");
        if (!approve) {
          return;
        }
        window.agentopsConfirm(approve, approve.dataset.confirm, approve.dataset.confirmLabel);
        break;
      }
      case "r": {
        var comment = card && card.querySelector("[data-comment]");
        if (!comment) {
          return;
        }
        open(card);
        comment.focus();
        break;
      }
      default:
        return;
    }
    event.preventDefault();
  });

  function showCount() {
    var status = region.querySelector("[data-pending-total]");
    if (!status) {
      return;
    }
    var total = parseInt(status.dataset.pendingTotal, 10) || 0;
    document.title = (total ? "(" + total + ") " : "") + baseTitle;
    var badge = document.querySelector("[data-pending-badge]");
    if (badge) {
      badge.textContent = String(total);
      badge.setAttribute("aria-label", total + " pending");
      badge.classList.toggle("nav-badge-zero", total === 0);
    }
  }

  region.addEventListener("live:updated", showCount);

  // Bulk decisions: select requests (or all on the page), then approve or reject them with
  // one comment; a rejection needs it, and nothing is sent without a selection.
  var bulk = document.getElementById("bulk-form");
  function selected() {
    return region.querySelectorAll("[data-select]:checked").length;
  }
  function showSelected() {
    var count = bulk && bulk.querySelector("[data-selected-count]");
    if (count) {
      count.textContent = selected() + " selected";
    }
  }
  if (bulk) {
    bulk.querySelector("[data-select-all]").addEventListener("change", function (event) {
      region.querySelectorAll("[data-select]").forEach(function (box) {
        box.checked = event.target.checked;
      });
      showSelected();
    });
    region.addEventListener("change", function (event) {
      if (event.target.matches && event.target.matches("[data-select]")) {
        showSelected();
      }
    });
    region.addEventListener("live:updated", showSelected);
    bulk.addEventListener("confirm:before", function (event) {
      var comment = bulk.querySelector("[data-bulk-comment]");
      if (!selected()) {
        event.preventDefault();
        bulk.querySelector("[data-select-all]").focus();
      } else if (event.target.value === "reject" && !comment.value.trim()) {
        event.preventDefault();
        comment.setAttribute("aria-invalid", "true");
        comment.focus();
      }
    });
  }

  // Back from a decision: focus the card named in the address (the next one). A request not
  // on this page (an old link, or one decided meanwhile) focuses nothing, so a shortcut can
  // never act on a request the reviewer did not choose: a notice links to its own page.
  // After "load": the browser's own move to the address's fragment would undo it before.
  function focusWanted() {
    var wanted = /^#approval-(\d+)$/.exec(window.location.hash);
    if (!wanted) {
      return;
    }
    var target = document.getElementById("approval-" + wanted[1]);
    if (!target) {
      var notice = document.querySelector("[data-missing-request]");
      if (notice) {
        notice.querySelector("a").href = notice.dataset.pathTemplate.replace("/0/", "/" + wanted[1] + "/");
        notice.querySelector("[data-missing-id]").textContent = wanted[1];
        notice.hidden = false;
      }
      return;
    }
    focusCard(target);
    if (document.querySelector("[data-messages] .message-error")) {
      // The decision was refused: the card is opened again where the reviewer left it.
      open(target);
    }
  }

  if (document.readyState === "complete") {
    setTimeout(focusWanted, 0);
  } else {
    window.addEventListener("load", function () {
      setTimeout(focusWanted, 0);
    });
  }
})();

/*
 * Browser notifications of new approval requests, opt-in: the inbox's "Notify me of new
 * requests" button asks the browser's permission and remembers the choice in this browser
 * (localStorage). While the inbox is open, each new request (an "approval.created" event of
 * its live stream, live.js's "live:event") that the reviewer's groups may decide (the event's
 * payload "groups": empty for any reviewer; the reviewer's own groups come from
 * /api/v1/approvals/reviewer/ once notifications are on) shows a notification; clicking it
 * opens the request's page. Hidden where the browser has no Notification API.
 */
(function () {
  "use strict";

  var control = document.querySelector("[data-notify-control]");
  if (!control || !("Notification" in window)) {
    return;
  }
  var KEY = "agentops.notify-approvals";
  var toggle = control.querySelector("[data-notify-toggle]");
  var state = control.querySelector("[data-notify-state]");
  // The reviewer's groups, read from the API once notifications are on (not every page).
  var groups = null;

  function loadGroups() {
    if (groups !== null) {
      return;
    }
    groups = [];
    fetch(toggle.dataset.reviewerUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json() : { groups: [] };
      })
      .then(function (body) {
        groups = Array.isArray(body.groups) ? body.groups : [];
      })
      .catch(function () {
        groups = null;
      });
  }

  function enabled() {
    return Notification.permission === "granted" && window.localStorage.getItem(KEY) === "on";
  }

  function show() {
    var on = enabled();
    if (on) {
      loadGroups();
    }
    toggle.setAttribute("aria-pressed", on ? "true" : "false");
    toggle.textContent = on ? "Stop notifying me" : "Notify me of new requests";
    state.textContent =
      Notification.permission === "denied"
        ? "Notifications are blocked in this browser's settings."
        : on
          ? "You will be notified of new requests while this page is open."
          : "";
  }

  toggle.addEventListener("click", function () {
    if (enabled()) {
      window.localStorage.setItem(KEY, "off");
      show();
      return;
    }
    Notification.requestPermission().then(function (permission) {
      window.localStorage.setItem(KEY, permission === "granted" ? "on" : "off");
      show();
    });
  });

  function mayDecide(deciding) {
    if (!Array.isArray(deciding) || deciding.length === 0) {
      return true;
    }
    return deciding.some(function (group) {
      return (groups || []).indexOf(group) >= 0;
    });
  }

  document.addEventListener("live:event", function (event) {
    var found = event.detail;
    if (!enabled() || !found || found.verb !== "approval.created") {
      return;
    }
    var payload = found.payload || {};
    if (!mayDecide(payload.groups)) {
      return;
    }
    var id = String(found.object_id);
    var note = new Notification("New approval request #" + id, {
      body: (payload.tool || "A tool call") + (payload.risk ? " (" + payload.risk + " risk)" : ""),
      tag: "approval-" + id,
    });
    note.onclick = function () {
      window.focus();
      window.location.href = toggle.dataset.requestPath.replace("/0/", "/" + id + "/");
    };
  });

  control.hidden = false;
  show();
})();
