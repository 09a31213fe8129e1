// Behaviour of the workload pages. Our CSP forbids inline scripts and eval, so everything
// that htmx attributes cannot say on their own lives here.
(() => {
  "use strict";

  // 1. Polls (the list every 5 s, a workload's live part every 3 s) skip their turn while the
  //    tab is hidden: cancelling the request keeps the polling timer, so they resume by themselves.
  //    Only polls: a one-off "load" request (logs) in a tab opened in the background must still run.
  document.addEventListener("htmx:beforeRequest", (event) => {
    const elt = event.detail && event.detail.elt;
    const trigger = (elt && elt.getAttribute && elt.getAttribute("hx-trigger")) || "";
    if (document.hidden && trigger.trim().startsWith("every ")) {
      event.preventDefault();
    }
  });

  // 2. Forms that change something ask first. Without JavaScript the server shows a confirm
  //    page instead, because the hidden "confirmed" field stays empty.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) {
      return;
    }
    if (!window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
      return;
    }
    const confirmed = form.querySelector('input[name="confirmed"]');
    if (confirmed) {
      confirmed.value = "yes";
    }
  });

  // 3. The cost estimate on the request form follows the offering and the replica fields.
  //    Same formula as jobs.forms.cost_estimate (which renders the first line).
  const money = (value) => "$" + value.toFixed(2);
  const whole = (form, name, fallback) => {
    const field = form.elements.namedItem(name);
    if (!field || field.value === "") {
      return fallback;
    }
    const n = Number.parseInt(field.value, 10);
    return Number.isFinite(n) && n >= 0 ? n : fallback;
  };

  function updateEstimate(form) {
    const line = document.getElementById("cost-estimate");
    if (!line) {
      return;
    }
    const chosen = form.querySelector('input[name="offering"]:checked');
    if (!chosen) {
      line.textContent = "Choose an offering to see the estimated cost.";
      return;
    }
    const kind = form.getAttribute("data-kind");
    const price = Number.parseFloat(chosen.getAttribute("data-price") || "0");
    const perReplica = chosen.getAttribute("data-gpu") === "1" ? whole(form, "gpus_per_replica", 1) : 1;
    let replicas = 1;
    let minReplicas = null;
    if (kind === "endpoint") {
      replicas = whole(form, "max_replicas", Math.max(whole(form, "min_replicas", 1), 1));
      minReplicas = Math.min(whole(form, "min_replicas", 1), replicas);
    } else if (kind === "training") {
      replicas = whole(form, "replicas", 1);
    }
    const units = perReplica * replicas;
    const perHour = price * units;
    // The offering's own unit (slice, GPU, share, replica), as portal.units names it on the server.
    const noun = (units > 0 && units <= 1 ? chosen.getAttribute("data-unit") : chosen.getAttribute("data-units")) || "units";
    let text = `Estimated cost: ${money(perHour)} per hour (${units} ${noun} × $${price.toFixed(4)})`;
    const seconds = kind === "training" ? whole(form, "max_runtime_seconds", 0) : 0;
    if (seconds > 0) {
      const hours = seconds / 3600;
      text += `, at most ${money(perHour * hours)} over the maximum runtime of ${Number(hours.toFixed(2))} h`;
    }
    if (minReplicas !== null) {
      // Quota reserves max replicas; spend charges the replicas that run (usage.spend).
      const minPerHour = price * perReplica * minReplicas;
      text += ` at max replicas, which quota reserves; charged for the replicas that run, ${money(minPerHour)} per hour at min replicas`;
    }
    line.textContent = text + ".";
    form.querySelectorAll("#offering-picker tr").forEach((row) => {
      row.classList.toggle("chosen", row.contains(chosen));
    });
  }

  const estimateFields = ["offering", "gpus_per_replica", "replicas", "min_replicas", "max_replicas", "max_runtime_seconds"];
  for (const type of ["input", "change"]) {
    document.addEventListener(type, (event) => {
      const el = event.target;
      const form = el && el.form;
      if (form && form.hasAttribute("data-cost-form") && estimateFields.includes(el.name)) {
        updateEstimate(form);
      }
    });
  }
  // The picker is re-rendered when the team changes; keep the line in step with it.
  document.addEventListener("htmx:afterSwap", (event) => {
    const form = event.target && event.target.closest && event.target.closest("form[data-cost-form]");
    if (form) {
      updateEstimate(form);
    }
  });
})();
