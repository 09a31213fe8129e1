// Usage charts: pause htmx polling of elements marked data-poll-visible while the tab
// is hidden, and refresh them once when it is shown again. Loaded with each usage
// fragment, so it guards against adding its listeners twice.
(() => {
  if (window.gpuPortalCharts) return;
  window.gpuPortalCharts = true;
  document.addEventListener("htmx:beforeRequest", (event) => {
    const el = event.detail && event.detail.elt;
    if (document.hidden && el && el.hasAttribute && el.hasAttribute("data-poll-visible")) {
      event.preventDefault();
    }
  });
  document.addEventListener("visibilitychange", () => {
    if (document.hidden || !window.htmx) return;
    document.querySelectorAll("[data-poll-visible][hx-get]").forEach((el) => {
      window.htmx.ajax("GET", el.getAttribute("hx-get"), { target: el, swap: "outerHTML" });
    });
  });
})();
