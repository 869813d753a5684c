// Pinning: the pin popover beside an event, and ticking several events to pin at once.
// Every page works without this file: the popover is a <details> with a link to the pin page,
// and the "pin selected" bar is a plain form the ticked checkboxes belong to.
"use strict";

(() => {
  const MARGIN = 8; // px kept between a popover and the window's edges

  // -- the pin popover ----------------------------------------------------------

  function popOf(details) {
    return details.querySelector(".pop");
  }

  // Beside the button, to its left (the pin column is the table's last: the popover then covers
  // statements, not the next rows' buttons); to its right when there is no room; always inside
  // the window, moved up when it would run off the bottom.
  function place(details) {
    const pop = popOf(details);
    if (!pop || !details.open) return;
    const anchor = details.querySelector("summary").getBoundingClientRect();
    pop.classList.add("placed");
    const box = pop.getBoundingClientRect();
    const width = box.width;
    const height = box.height;
    let left = anchor.left - width - 6;
    if (left < MARGIN) left = anchor.right + 6;
    left = Math.max(MARGIN, Math.min(left, window.innerWidth - width - MARGIN));
    let top = anchor.top;
    top = Math.max(MARGIN, Math.min(top, window.innerHeight - height - MARGIN));
    pop.style.left = left + "px";
    pop.style.top = top + "px";
  }

  function close(details, focus) {
    if (!details.open) return;
    details.open = false;
    if (focus) details.querySelector("summary").focus();
  }

  function openPops() {
    return Array.from(document.querySelectorAll("details.pin-pop[open]"));
  }

  // The form is fetched each time the popover opens without one (after a pin, it holds the answer).
  function load(details) {
    const pop = popOf(details);
    if (!pop || pop.querySelector("form.pin-form") || !window.htmx) return;
    const url = pop.dataset.url;
    if (!url) return;
    htmx.ajax("GET", url, { target: pop, swap: "innerHTML" }).then(() => {
      place(details);
      const first = pop.querySelector("select, input:not([type=hidden]), textarea");
      if (first && details.open) first.focus();
    });
  }

  document.addEventListener(
    "toggle",
    (event) => {
      const details = event.target;
      if (!(details instanceof HTMLDetailsElement) || !details.classList.contains("pin-pop")) return;
      if (!details.open) return;
      for (const other of openPops()) if (other !== details) close(other, false);
      place(details);
      load(details);
    },
    true, // toggle does not bubble
  );

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const open = openPops();
    if (!open.length) return;
    event.preventDefault();
    open.forEach((d) => close(d, d.contains(document.activeElement)));
  });

  document.addEventListener("click", (event) => {
    for (const details of openPops()) if (!details.contains(event.target)) close(details, false);
  });

  window.addEventListener("resize", () => openPops().forEach(place));
  window.addEventListener("scroll", () => openPops().forEach(place), true);

  function announce(text) {
    let region = document.getElementById("pin-status");
    if (!region) {
      region = document.createElement("div");
      region.id = "pin-status";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.appendChild(region);
    }
    region.textContent = text;
  }

  // A pin done: the popover closes (the row's marks were replaced by the same answer). The form
  // swapped itself out, and the popover may have been closed meanwhile (a click elsewhere), so
  // every answer not yet seen is looked for, and marked seen.
  document.addEventListener("htmx:afterSwap", () => {
    document.querySelectorAll("details.pin-pop [data-pinned-ok]").forEach((done) => {
      done.removeAttribute("data-pinned-ok");
      const details = done.closest("details.pin-pop");
      // a new case: the "pin selected" bar offers it from now on, chosen
      const cases = details.querySelector("template.bar-cases");
      const select = document.getElementById("sel-case");
      if (cases && select) {
        const fresh = cases.content.querySelector("select");
        select.replaceChildren(...fresh.cloneNode(true).children);
        const chosen = fresh.querySelector("option[selected]");
        if (chosen) select.value = chosen.value;
        refresh();
      }
      if (cases) cases.remove();
      announce(done.textContent.trim());
      close(details, details.contains(document.activeElement) || document.activeElement === document.body);
    });
    openPops().forEach(place);
  });

  // -- ticking events to pin at once ------------------------------------------------

  let lastTicked = null; // for shift-click ranges

  function bar() {
    return document.getElementById("select-bar");
  }

  function ticks() {
    return Array.from(document.querySelectorAll('input[type=checkbox][form="pin-selected"]'));
  }

  function refresh() {
    const form = bar();
    if (!form) return;
    const all = ticks();
    const ticked = all.filter((box) => box.checked).length;
    const result = form.querySelector("#pin-selected-result");
    form.classList.toggle("idle", ticked === 0 && !(result && result.textContent.trim()));
    form.classList.add("enhanced");
    const count = form.querySelector("[data-selected-count]");
    if (count) count.textContent = String(ticked);
    const label = form.querySelector("[data-selected-label]");
    if (label) label.textContent = "selected";
    const button = form.querySelector("button[type=submit]");
    if (button) {
      button.textContent = "Pin " + ticked + " selected";
      button.disabled = ticked === 0;
    }
    const choice = form.querySelector("select[name=case]");
    const title = form.querySelector("input[name=title]");
    if (choice && title) title.hidden = choice.value !== "new";
    document.querySelectorAll("input.select-all").forEach((head) => {
      const mine = head.closest("table").querySelectorAll('input[form="pin-selected"]');
      const on = Array.from(mine).filter((box) => box.checked).length;
      head.checked = on > 0 && on === mine.length;
      head.indeterminate = on > 0 && on < mine.length;
    });
  }

  function clearResult() {
    const result = document.getElementById("pin-selected-result");
    if (result) result.replaceChildren();
  }

  document.addEventListener("click", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.type !== "checkbox") return;
    if (box.classList.contains("select-all")) {
      box.closest("table").querySelectorAll('input[form="pin-selected"]').forEach((b) => {
        b.checked = box.checked;
      });
      clearResult();
      refresh();
      return;
    }
    if (box.getAttribute("form") !== "pin-selected") return;
    if (event.shiftKey && lastTicked && lastTicked !== box && document.contains(lastTicked)) {
      const all = ticks();
      const [a, b] = [all.indexOf(lastTicked), all.indexOf(box)].sort((x, y) => x - y);
      if (a >= 0) all.slice(a, b + 1).forEach((other) => (other.checked = box.checked));
    }
    lastTicked = box;
    clearResult();
    refresh();
  });

  document.addEventListener("change", (event) => {
    if (event.target.closest && event.target.closest("#pin-selected")) refresh();
  });

  // After "pin selected": the ticks are cleared (a second click would pin nothing new). New rows
  // (the explorer's results, an older page): the last answer is about rows no longer shown.
  document.addEventListener("htmx:afterSwap", (event) => {
    const swapped = event.detail.target;
    if (swapped && swapped.querySelector && swapped.querySelector('input[form="pin-selected"]')) {
      clearResult();
      refresh();
    }
    if (event.detail.target && event.detail.target.id === "pin-selected-result") {
      if (event.detail.target.querySelector("[data-pinned-ok]")) {
        ticks().forEach((box) => (box.checked = false));
        lastTicked = null;
        const form = bar();
        const note = form && form.querySelector("input[name=note]");
        if (note) note.value = "";
      }
      refresh();
    }
  });

  if (window.htmx) htmx.onLoad(refresh);
  document.addEventListener("DOMContentLoaded", refresh);
})();
