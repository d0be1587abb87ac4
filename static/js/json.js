/*
 * The JSON viewer's copy buttons (agentops/json_view.py writes the trees). A button
 * [data-copy] copies the value that follows it, rebuilt from the tree: text as it is, other
 * values as indented JSON. A button [data-copy-text] copies that text (an id). A value the
 * page shows only in part (a note of class j-cut inside it) is copied as shown, and the
 * button says so. The buttons' text is CSS's ("copy", or data-copied for a moment after a
 * copy), so a tree's text is its value's alone; a polite status tells screen readers.
 */
(function () {
  "use strict";

  var CUT = {};

  function scalar(el) {
    var text = el.textContent;
    if (el.classList.contains("j-str")) {
      if (el.nextElementSibling && el.nextElementSibling.classList.contains("j-cut")) {
        CUT.cut = true;
      }
      return text.slice(1, -1);
    }
    if (el.classList.contains("j-punct")) {
      if (text.length === 1) {
        // An object or array nested too deep to be shown.
        CUT.cut = true;
        return null;
      }
      return text === "{}" ? {} : [];
    }
    return JSON.parse(text);
  }

  function read(el) {
    var asText = false;
    if (el.classList.contains("j-json")) {
      asText = true;
      el = el.nextElementSibling;
    }
    if (el.tagName !== "DETAILS") {
      return scalar(el);
    }
    var isObject = el.querySelector(":scope > summary > .j-punct").textContent === "{";
    var value = isObject ? {} : [];
    el.querySelectorAll(":scope > ul > li").forEach(function (li) {
      var button = li.querySelector(":scope > .j-copy");
      if (!button) {
        CUT.cut = true;
        return;
      }
      var item = read(button.nextElementSibling);
      if (isObject) {
        value[li.querySelector(":scope > .j-key").textContent] = item;
      } else {
        value.push(item);
      }
    });
    return asText ? JSON.stringify(value) : value;
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    var done = document.execCommand("copy");
    area.remove();
    return done ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function status(text) {
    var region = document.getElementById("copy-status");
    if (!region) {
      region = document.createElement("p");
      region.id = "copy-status";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.appendChild(region);
    }
    region.textContent = text;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy], [data-copy-text]");
    if (!button) {
      return;
    }
    event.preventDefault();
    var text;
    CUT.cut = false;
    if (button.dataset.copyText !== undefined) {
      text = button.dataset.copyText;
    } else {
      var value = read(button.nextElementSibling);
      var target = button.nextElementSibling;
      var isJson = target.classList.contains("j-json");
      text = typeof value === "string" && !isJson ? value : JSON.stringify(isJson ? JSON.parse(value) : value, null, 2);
    }
    var label = CUT.cut ? "copied (the part shown)" : "copied";
    copyText(text).then(
      function () {
        button.dataset.copied = label;
        status("Copied to the clipboard" + (CUT.cut ? ": the part of the value this page shows." : "."));
        window.setTimeout(function () {
          delete button.dataset.copied;
        }, 1500);
      },
      function () {
        status("Could not copy: the browser refused the clipboard.");
      }
    );
  });
})();
