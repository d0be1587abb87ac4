/*
 * Confirmation before an action that cannot be taken back, in an accessible <dialog>.
 *
 * A submit button marked data-confirm="question" (and optionally data-confirm-label="Reject")
 * does not submit on its first click: the page's #confirm-dialog asks the question, with the
 * focus on the confirming button; Escape or "Go back" leaves everything as it was. Before
 * asking, a cancelable "confirm:before" event is dispatched on the button, so a page can
 * refuse first (a rejection without a reason). window.agentopsConfirm(button, question,
 * label) asks the same for any submit button (the inbox's keyboard shortcuts use it).
 */
(function () {
  "use strict";

  var dialog = document.getElementById("confirm-dialog");
  if (!dialog || typeof dialog.showModal !== "function") {
    return;
  }
  var text = document.getElementById("confirm-text");
  var ok = dialog.querySelector("[data-confirm-ok]");
  var pending = null;

  function ask(button, question, label) {
    var before = new CustomEvent("confirm:before", { bubbles: true, cancelable: true });
    if (!button.dispatchEvent(before)) {
      return;
    }
    pending = button;
    text.textContent = question;
    ok.textContent = label || "Confirm";
    dialog.returnValue = "";
    dialog.showModal();
    ok.focus();
  }

  dialog.addEventListener("close", function () {
    var button = pending;
    pending = null;
    if (!button) {
      return;
    }
    if (dialog.returnValue === "confirm" && button.form) {
      button.form.requestSubmit(button);
    } else {
      button.focus();
    }
  });

  document.addEventListener(
    "click",
    function (event) {
      var button = event.target.closest && event.target.closest("button[data-confirm]");
      if (!button || !button.form) {
        return;
      }
      event.preventDefault();
      ask(button, button.dataset.confirm, button.dataset.confirmLabel);
    },
    true
  );

  window.agentopsConfirm = ask;
})();
