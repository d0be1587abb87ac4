/*
 * Confirmation before an action that cannot be taken back, in an accessible <dialog>.
 *
 * A submit button marked data-confirm="question" (and optionally data-confirm-label="Reject",
 * and data-confirm-tone="primary" for an action that destroys nothing, such as an approval)
 * does not submit on its first click, by mouse or keyboard alike: the page's #confirm-dialog
 * asks the question, its confirming button in the action's style (danger unless told), with
 * the focus on "Go back", the least destructive choice (WAI-ARIA Authoring Practices, dialog
 * pattern: focus on the least destructive action before a step that is not easily reversed);
 * Tab reaches the confirming button. Escape or "Go back" leaves everything as it was. Before
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

  var cancel = dialog.querySelector("[data-confirm-cancel]");

  function ask(button, question, label) {
    var before = new CustomEvent("confirm:before", { bubbles: true, cancelable: true });
    if (!button.dispatchEvent(before)) {
      return;
    }
    pending = button;
    text.textContent = question;
    ok.textContent = label || "Confirm";
    var primary = button.dataset.confirmTone === "primary";
    ok.classList.toggle("button-primary", primary);
    ok.classList.toggle("button-danger", !primary);
    dialog.returnValue = "";
    dialog.showModal();
    cancel.focus();
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
