// Small behaviours that would otherwise need inline scripts (forbidden by our CSP).
document.addEventListener("change", (event) => {
  const el = event.target;
  if (el instanceof HTMLSelectElement && el.hasAttribute("data-autosubmit")) {
    el.form.requestSubmit();
  }
});
