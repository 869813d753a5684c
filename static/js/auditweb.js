// Small progressive enhancements; every page works without this file.
"use strict";

// The browser's time zone, for the server to show times in (pages say which zone they use).
(() => {
  try {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (zone) {
      // IANA names need no encoding (letters, digits, / _ - +); the server checks the name anyway.
      document.cookie = "tz=" + zone + "; path=/; max-age=31536000; samesite=lax";
    }
  } catch (e) {
    // No Intl: the server's zone is used.
  }
})();

document.addEventListener("htmx:responseError", (event) => {
  const target = event.detail.target;
  if (target) {
    const message = document.createElement("p");
    message.className = "error";
    message.setAttribute("role", "alert");
    message.textContent = "The server could not answer (" + event.detail.xhr.status + "). Try again.";
    target.replaceChildren(message);
  }
});

document.addEventListener("htmx:sendError", (event) => {
  const target = event.detail.target;
  if (target) {
    const message = document.createElement("p");
    message.className = "error";
    message.setAttribute("role", "alert");
    message.textContent = "AuditWeb cannot be reached. Check the connection and try again.";
    target.replaceChildren(message);
  }
});

// Filters left empty stay out of the URL htmx asks for (and pushes): shorter links to share.
document.addEventListener("htmx:configRequest", (event) => {
  const form = event.detail.elt.closest && event.detail.elt.closest("form.filters");
  if (!form || event.detail.verb !== "get") return;
  const params = event.detail.parameters;
  for (const name of Array.from(params.keys())) {
    if (params.getAll(name).every((value) => value === "")) params.delete(name);
  }
});

// The statement-type picker's summary names what is ticked.
document.addEventListener("change", (event) => {
  const picker = event.target.closest && event.target.closest("details.multi");
  if (!picker) return;
  const ticked = Array.from(picker.querySelectorAll("input:checked")).map((input) => input.value);
  picker.querySelector(".chosen").textContent = ticked.length ? ticked.join(", ") : "all";
});

// -- the explorer's timeline ---------------------------------------------------

// Hatches the buckets where a server recorded nothing (gaps): the whole height when the chart is of
// that server alone, else a band along the top (the other servers' events go on below it).
const gapShading = {
  id: "gapShading",
  beforeDatasetsDraw(chart, args, options) {
    const gaps = options.gaps || [];
    if (!gaps.length) return;
    const { ctx, chartArea, scales } = chart;
    const step = scales.x.getPixelForValue(1) - scales.x.getPixelForValue(0) || chartArea.width;
    const top = chartArea.top;
    const bottom = options.fullHeight ? chartArea.bottom : chartArea.top + 8;
    ctx.fillStyle = "rgba(120, 120, 120, 0.2)";
    ctx.strokeStyle = "rgba(80, 80, 80, 0.35)";
    for (const gap of gaps) {
      const left = Math.max(chartArea.left, scales.x.getPixelForValue(gap.first) - step / 2);
      const right = Math.min(chartArea.right, scales.x.getPixelForValue(gap.last) + step / 2);
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, top, right - left, bottom - top);
      ctx.clip();
      ctx.fillRect(left, top, right - left, bottom - top);
      ctx.beginPath();
      for (let x = left - (bottom - top); x < right; x += 8) {
        ctx.moveTo(x, bottom);
        ctx.lineTo(x + (bottom - top), top);
      }
      ctx.stroke();
      ctx.restore();
    }
  },
};

// Shows the buckets a drag has covered so far.
const dragBand = {
  id: "dragBand",
  afterDatasetsDraw(chart) {
    const drag = chart.$drag;
    if (!drag || drag.to === null) return;
    const { ctx, chartArea, scales } = chart;
    const step = scales.x.getPixelForValue(1) - scales.x.getPixelForValue(0) || chartArea.width;
    const left = scales.x.getPixelForValue(Math.min(drag.from, drag.to)) - step / 2;
    const right = scales.x.getPixelForValue(Math.max(drag.from, drag.to)) + step / 2;
    ctx.save();
    ctx.fillStyle = "rgba(11, 92, 173, 0.15)";
    ctx.fillRect(left, chartArea.top, right - left, chartArea.bottom - chartArea.top);
    ctx.restore();
  },
};

function bucketAt(chart, event) {
  const rect = chart.canvas.getBoundingClientRect();
  const x = event.clientX - rect.left;
  if (x < chart.chartArea.left || x > chart.chartArea.right) return null;
  const index = Math.round(chart.scales.x.getValueForPixel(x));
  return Math.max(0, Math.min(chart.data.labels.length - 1, index));
}

// Narrows the filter form's From/Until to buckets first..last and asks for the results again.
function narrowTo(data, first, last) {
  const form = document.getElementById("filters");
  const since = document.getElementById("f-since");
  const until = document.getElementById("f-until");
  if (!form || !since || !until) return;
  since.value = data.from[Math.min(first, last)];
  until.value = data.until[Math.max(first, last)];
  form.requestSubmit();
}

function drawTimeline(canvas) {
  if (typeof Chart === "undefined" || canvas.$chart) return;
  const source = document.getElementById(canvas.dataset.chart);
  if (!source) return;
  const data = JSON.parse(source.textContent);
  // Each series' colour comes with the data: the one palette (investigations/palette.py) the badges use.
  const datasets = data.series.map((series) => ({
    label: series.destructive && series.label !== "other destructive" ? series.label + " (destructive)" : series.label,
    data: series.data,
    backgroundColor: series.colour,
    stack: "events",
  }));
  const chart = new Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets },
    options: {
      animation: false,
      maintainAspectRatio: false,
      responsive: true,
      interaction: { mode: "index", intersect: false },
      scales: {
        x: { stacked: true, grid: { display: false }, ticks: { autoSkip: true, maxRotation: 0 } },
        y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
      },
      plugins: {
        legend: { position: "right", labels: { boxWidth: 12, font: { size: 11 } } },
        tooltip: {
          filter: (item) => item.parsed.y > 0,
          callbacks: { title: (items) => items.length ? data.labels[items[0].dataIndex] + " (" + data.width + ")" : "" },
        },
        gapShading: { gaps: data.gaps, fullHeight: data.gaps_full_height },
      },
    },
    plugins: [gapShading, dragBand],
  });
  chart.$drag = null;
  canvas.$chart = chart;
  canvas.addEventListener("mousedown", (event) => {
    const index = bucketAt(chart, event);
    if (index !== null) chart.$drag = { from: index, to: null };
  });
  canvas.addEventListener("mousemove", (event) => {
    if (!chart.$drag) return;
    const index = bucketAt(chart, event);
    if (index !== null && index !== chart.$drag.to) {
      chart.$drag.to = index;
      chart.draw();
    }
  });
  const finish = (event) => {
    const drag = chart.$drag;
    chart.$drag = null;
    if (!drag) return;
    const index = bucketAt(chart, event);
    const last = index === null ? drag.to : index;
    if (last === null) return;
    narrowTo(data, drag.from, last);
  };
  canvas.addEventListener("mouseup", finish);
  canvas.addEventListener("mouseleave", () => {
    if (chart.$drag) {
      chart.$drag = null;
      chart.draw();
    }
  });
}

function drawTimelines(root) {
  root.querySelectorAll("canvas[data-chart]").forEach(drawTimeline);
}

// Charts in what htmx swaps in, and in the page as it loads.
if (window.htmx) htmx.onLoad(drawTimelines);
document.addEventListener("DOMContentLoaded", () => drawTimelines(document));

// hx-sync="this:replace" cancels a search still running when a newer one starts (typing in a
// filter). htmx logs every cancelled request as an error (htmx:afterRequest, htmx:sendAbort)
// before any listener can act; a cancellation htmx:abort asked for is expected, so exactly those
// two lines are left out of the console while it happens, and every other error still shows.
(() => {
  let cancelling = 0;
  const logError = console.error.bind(console);
  console.error = (...args) => {
    const text = typeof args[0] === "string" ? args[0] : "";
    if (cancelling > 0 && /^htmx:(afterRequest|sendAbort)\b/.test(text)) return;
    logError(...args);
  };
  // Capture: before htmx's own listener (on <body>) aborts the request; bubble: after it.
  document.addEventListener("htmx:abort", () => { cancelling += 1; }, true);
  document.addEventListener("htmx:abort", () => { cancelling = Math.max(0, cancelling - 1); });
})();
