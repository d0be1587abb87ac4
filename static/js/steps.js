/*
 * A run's steps at any length (templates/runs/_run_body.html): the status filter hides the
 * steps in other statuses; "Jump to step", a timeline bar and a link to #step-N or
 * #approval-N open that step (a folded one loads its body, lazy.js) and scroll to it; a
 * "Fork a new run from #N" link puts N in the page's one fork form and opens it. Delegated
 * from the document, so it keeps working when live.js swaps the page's body.
 */
(function () {
  "use strict";

  function stepOf(target) {
    var match = /^#?(step|approval)-(\d+)$/.exec(target);
    if (!match) {
      return null;
    }
    if (match[1] === "step") {
      return document.getElementById("step-" + match[2]);
    }
    return document.querySelector('.step[data-approval="' + match[2] + '"]');
  }

  function reveal(step, focus) {
    if (!step) {
      return false;
    }
    var filter = document.querySelector("[data-step-filter]");
    if (step.hidden && filter) {
      filter.value = "";
      applyFilter(filter);
    }
    var body = step.querySelector(":scope > details.step-fold");
    if (body && !body.open) {
      body.open = true;
    }
    document.querySelectorAll(".step.jumped").forEach(function (el) {
      el.classList.remove("jumped");
    });
    step.classList.add("jumped");
    step.scrollIntoView({ block: "start" });
    if (focus) {
      var summary = step.querySelector("summary");
      if (summary) {
        summary.focus({ preventScroll: true });
      }
    }
    return true;
  }

  function applyFilter(select) {
    var wanted = select.value;
    var shown = 0;
    var steps = document.querySelectorAll(".steps > .step");
    steps.forEach(function (step) {
      var keep = !wanted || step.dataset.stepStatus === wanted;
      step.hidden = !keep;
      shown += keep ? 1 : 0;
    });
    var count = document.querySelector("[data-filter-count]");
    if (count) {
      count.textContent = wanted ? shown + " of " + steps.length + " steps shown" : "";
    }
  }

  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-step-filter]")) {
      applyFilter(event.target);
    }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target.closest("[data-jump-form]");
    if (!form) {
      return;
    }
    event.preventDefault();
    var input = form.querySelector("input");
    var step = stepOf("step-" + input.value.trim());
    if (!reveal(step, true)) {
      input.setCustomValidity("This run has no step #" + input.value);
      input.reportValidity();
      input.setCustomValidity("");
    }
  });

  document.addEventListener("click", function (event) {
    var jump = event.target.closest("[data-jump]");
    if (jump) {
      event.preventDefault();
      reveal(stepOf("step-" + jump.dataset.jump), true);
      return;
    }
    var fork = event.target.closest("[data-fork-from]");
    if (fork) {
      event.preventDefault();
      var details = document.getElementById("fork");
      var from = document.getElementById("fork-from");
      if (!details || !from) {
        return;
      }
      from.value = fork.dataset.forkFrom;
      details.open = true;
      details.scrollIntoView({ block: "start" });
      from.focus({ preventScroll: true });
    }
  });

  function fromHash() {
    reveal(stepOf(decodeURIComponent(window.location.hash)), false);
  }
  window.addEventListener("hashchange", fromHash);
  if (window.location.hash) {
    fromHash();
  }
  // After a live refresh the filter's value is restored (live.js): apply it again.
  document.addEventListener("live:updated", function () {
    var filter = document.querySelector("[data-step-filter]");
    if (filter && filter.value) {
      applyFilter(filter);
    }
  });
})();
