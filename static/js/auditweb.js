// Small progressive enhancements; every page works without this file.
document.addEventListener("htmx:responseError", (event) => {
  const target = document.getElementById("results");
  if (target) {
    target.textContent = "The server could not answer (" + event.detail.xhr.status + "). Try again.";
    target.classList.add("error");
  }
});
