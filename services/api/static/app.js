// Dashboard behaviour: the API token (kept for this tab in sessionStorage) and forms that call the JSON API.
// No inline scripts anywhere: the Content-Security-Policy allows only files under /static/.
(function () {
  "use strict";
  var TOKEN_KEY = "claimwatch.token";
  var BY_KEY = "claimwatch.by";
  var FLASH_KEY = "claimwatch.flash";  // what the last action did, shown once after the reload

  function token() { return window.sessionStorage.getItem(TOKEN_KEY) || ""; }

  function say(text, isError) {
    var box = document.getElementById("action-status");
    if (!box) { return; }
    box.textContent = text;
    box.classList.toggle("error", Boolean(isError));
  }

  function detailText(detail) {
    if (typeof detail === "string") { return detail; }
    if (Array.isArray(detail)) {
      return detail.map(function (d) { return (d.loc || []).join(".") + ": " + d.msg; }).join("; ");
    }
    return JSON.stringify(detail);
  }

  function bodyOf(form) {
    var body = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.disabled || el.type === "submit" || el.type === "button") { return; }
      var kind = el.getAttribute("data-list");
      if (kind === "checked") {
        body[el.name] = body[el.name] || [];
        if (el.checked) { body[el.name].push(el.value); }
        return;
      }
      if (kind === "lines") {
        // newlines only: a comma belongs to the regex in a matcher such as route=~a{1,3}
        var lines = el.value.split(/\r?\n/).map(function (s) { return s.trim(); }).filter(Boolean);
        body[el.name] = (body[el.name] || []).concat(lines);
        return;
      }
      if (el.value === "" && !el.required) { return; }
      body[el.name] = el.value;
    });
    Object.keys(body).forEach(function (k) {
      if (Array.isArray(body[k]) && body[k].length === 0) { delete body[k]; }
    });
    return body;
  }

  function submitToApi(event) {
    var form = event.currentTarget;
    if (event.submitter && event.submitter.hasAttribute("formaction")) { return; }  // a page's own GET (Preview)
    event.preventDefault();
    var method = form.getAttribute("data-method") || "POST";
    var headers = { "Accept": "application/json" };
    if (token()) { headers.Authorization = "Bearer " + token(); }
    var init = { method: method, headers: headers, credentials: "same-origin" };
    if (method !== "DELETE" || form.querySelector("[name]")) {  // a DELETE sends a body only when it has fields (by)
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(bodyOf(form));
    }
    var remembered = form.querySelector("[data-remember='by']");
    if (remembered && remembered.value) { window.localStorage.setItem(BY_KEY, remembered.value); }
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    say("Sending…");
    fetch(form.getAttribute("data-path"), init).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        buttons.forEach(function (b) { b.disabled = false; });
        if (!response.ok) {
          var hint = response.status === 401 || response.status === 403 ? " Enter a token in the API token field." : "";
          say("Refused (HTTP " + response.status + "): " + detailText(data.detail) + hint, true);
          return;
        }
        var done = form.getAttribute("data-ok") || "Done";
        say(done + ". Reloading…");
        window.sessionStorage.setItem(FLASH_KEY, done + ".");
        window.location.reload();
      });
    }).catch(function (err) {
      buttons.forEach(function (b) { b.disabled = false; });
      say("Could not reach the API: " + err, true);
    });
  }

  function setUpToken() {
    var form = document.getElementById("token-form");
    if (!form) { return; }
    var input = document.getElementById("token-input");
    var status = document.getElementById("token-status");
    function show() { status.textContent = token() ? "token set for this tab" : "no token: read only"; }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (input.value.trim()) { window.sessionStorage.setItem(TOKEN_KEY, input.value.trim()); }
      input.value = "";
      show();
    });
    document.getElementById("token-forget").addEventListener("click", function () {
      window.sessionStorage.removeItem(TOKEN_KEY);
      show();
    });
    show();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var flash = window.sessionStorage.getItem(FLASH_KEY);
    if (flash) {
      window.sessionStorage.removeItem(FLASH_KEY);
      say(flash);
    }
    setUpToken();
    var by = window.localStorage.getItem(BY_KEY) || "";
    document.querySelectorAll("[data-remember='by']").forEach(function (el) { if (!el.value) { el.value = by; } });
    document.querySelectorAll("[data-mine]").forEach(function (link) {  // the issues you own or were assigned
      if (by) { link.href = "/issues?owner=" + encodeURIComponent(by); link.hidden = false; }
    });
    document.querySelectorAll("form.api-form").forEach(function (form) {
      form.addEventListener("submit", submitToApi);
    });
  });
}());
