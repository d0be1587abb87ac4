/*
 * The overview's charts (Chart.js, vendored in static/vendor/chartjs): fetches the figures
 * from the page's data-url (JSON of fleet.selectors.overview) for the chosen window, draws
 * them, and fetches again every data-poll-seconds. No inline script (CSP): this file only.
 * The container's data-updates counts the figures drawn (tests wait on it).
 */
(function () {
  "use strict";

  var root = document.querySelector("[data-overview]");
  if (!root || !window.Chart) {
    return;
  }
  var url = root.dataset.url;
  var windowName = root.dataset.window;
  var versions = root.dataset.versions || "";
  var byVersion = root.querySelector("[data-by-version] tbody");
  var pollMs = (parseInt(root.dataset.pollSeconds, 10) || 5) * 1000;
  var picker = document.querySelector("[data-overview-window]");
  var errorBox = root.querySelector("[data-overview-error]");
  var updated = root.querySelector("[data-overview-updated]");
  var timer = null;
  var inFlight = false;

  var COLORS = ["#2457c5", "#1d6b3f", "#c0392b", "#8a3f00", "#7a5200", "#616e7c"];

  function lineChart(name, datasets, yOptions) {
    var canvas = root.querySelector('[data-chart="' + name + '"]');
    return new window.Chart(canvas, {
      type: "line",
      data: {
        labels: [],
        datasets: datasets.map(function (label, i) {
          return {
            label: label,
            data: [],
            borderColor: COLORS[i],
            backgroundColor: COLORS[i],
            pointRadius: 2,
            borderWidth: 2,
            spanGaps: false,
          };
        }),
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: { x: { ticks: { maxTicksLimit: 8 } }, y: Object.assign({ beginAtZero: true }, yOptions) },
      },
    });
  }

  var charts = {
    throughput: lineChart(
      "throughput",
      ["Runs created / min", "Steps finished / min", "Tool errors / min"],
      {}
    ),
    failures: lineChart("failures", ["Failed runs (%)"], { suggestedMax: 100 }),
    approvals: lineChart("approvals", ["p50 (s)", "p95 (s)"], {}),
    cost: new window.Chart(root.querySelector('[data-chart="cost"]'), {
      type: "bar",
      data: { labels: [], datasets: [{ label: "USD", data: [], backgroundColor: COLORS[0] }] },
      options: { animation: false, maintainAspectRatio: false, scales: { y: { beginAtZero: true } } },
    }),
  };

  function bucketLabel(iso, seconds) {
    var date = new Date(iso);
    var time = date.toISOString().slice(11, 16);
    return seconds >= 3600 ? date.toISOString().slice(5, 10) + " " + time : time;
  }

  function seconds(value) {
    if (value === null || value === undefined) {
      return "—";
    }
    return value < 60 ? value.toFixed(1) + " s" : (value / 60).toFixed(1) + " min";
  }

  function showTotals(totals) {
    var shown = {
      runs: String(totals.runs),
      steps: String(totals.steps),
      step_tool_errors: String(totals.step_tool_errors),
      failure_rate:
        totals.failure_rate === null ? "—" : (totals.failure_rate * 100).toFixed(1) + " %",
      runs_compensated: String(totals.runs_compensated),
      runs_compensation_failed: String(totals.runs_compensation_failed),
      approval_wait_p50: seconds(totals.approval_wait_p50),
      approval_wait_p95: seconds(totals.approval_wait_p95),
      cost_usd: totals.cost_usd.toFixed(4),
    };
    Object.keys(shown).forEach(function (key) {
      var el = root.querySelector('[data-total="' + key + '"]');
      if (el) {
        el.textContent = shown[key];
      }
    });
  }

  function draw(data) {
    var labels = data.buckets.map(function (iso) {
      return bucketLabel(iso, data.bucket_seconds);
    });
    charts.throughput.data.labels = labels;
    charts.throughput.data.datasets[0].data = data.runs_per_minute;
    charts.throughput.data.datasets[1].data = data.steps_per_minute;
    charts.throughput.data.datasets[2].data = data.tool_errors_per_minute;
    charts.failures.data.labels = labels;
    charts.failures.data.datasets[0].data = data.failure_rate.map(function (rate) {
      return rate === null ? null : rate * 100;
    });
    charts.approvals.data.labels = labels;
    charts.approvals.data.datasets[0].data = data.approval_wait_p50;
    charts.approvals.data.datasets[1].data = data.approval_wait_p95;
    charts.cost.data.labels = data.cost_by_agent.map(function (row) {
      return row.label;
    });
    charts.cost.data.datasets[0].data = data.cost_by_agent.map(function (row) {
      return row.cost_usd;
    });
    Object.keys(charts).forEach(function (name) {
      charts[name].update("none");
    });
    showTotals(data.totals);
    showVersions(data.by_version);
    updated.textContent = new Date(data.now).toISOString().slice(11, 19) + " UTC";
    updated.setAttribute("datetime", data.now);
    root.dataset.updates = String((parseInt(root.dataset.updates, 10) || 0) + 1);
  }

  function showVersions(rows) {
    byVersion.replaceChildren();
    rows.forEach(function (row) {
      var tr = document.createElement("tr");
      [
        row.agent_name || "—",
        row.agent_version || "—",
        row.prompt_name || "—",
        row.prompt_version || "—",
        row.runs.toLocaleString(),
        row.failed.toLocaleString(),
        row.tokens.toLocaleString(),
        row.cost_usd.toFixed(4),
      ].forEach(function (text, i) {
        var td = document.createElement("td");
        td.textContent = text;
        if (i >= 4) {
          td.className = "num";
        }
        tr.appendChild(td);
      });
      byVersion.appendChild(tr);
    });
  }

  function query() {
    return "?window=" + encodeURIComponent(windowName) + (versions ? "&" + versions : "");
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = !text;
  }

  function poll() {
    if (inFlight) {
      return;
    }
    inFlight = true;
    fetch(url + query(), {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        if (response.redirected) {
          throw new Error("Signed out: reload the page to sign in again.");
        }
        return response.json().then(function (body) {
          if (!response.ok) {
            throw new Error(body.detail || "The figures could not be loaded.");
          }
          return body;
        });
      })
      .then(function (data) {
        showError("");
        draw(data);
      })
      .catch(function (error) {
        showError(error.message);
      })
      .then(function () {
        inFlight = false;
      });
  }

  function start() {
    if (timer) {
      window.clearInterval(timer);
    }
    poll();
    timer = window.setInterval(poll, pollMs);
  }

  if (picker) {
    picker.addEventListener("change", function () {
      windowName = picker.value;
      var kept = document.querySelector('[data-overview-versions] input[name="window"]');
      if (kept) {
        kept.value = windowName;
      }
      window.history.replaceState(null, "", query());
      start();
    });
  }
  start();
})();
