// cronlock dashboard: buttons call the JSON API, then the page reloads. No dependencies.
(function () {
  "use strict";
  var body = document.body;
  var api = body.getAttribute("data-api");
  var message = document.getElementById("message");
  var TOKEN = "cronlock-api-token";

  function say(text, isError) {
    message.textContent = text;
    message.className = isError ? "error" : "";
  }

  function headers() {
    var h = { "Content-Type": "application/json", "Accept": "application/json" };
    var token = window.sessionStorage.getItem(TOKEN);
    if (token) { h.Authorization = "Bearer " + token; }
    // A framework's CSRF token (Django's X-CSRFToken), when the page carries one.
    var csrfHeader = body.getAttribute("data-csrf-header");
    if (csrfHeader) { h[csrfHeader] = body.getAttribute("data-csrf-token"); }
    return h;
  }

  function call(method, path, payload) {
    return fetch(api + path, {
      method: method,
      headers: headers(),
      credentials: "same-origin",
      body: payload === undefined ? undefined : JSON.stringify(payload)
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (!response.ok) { throw new Error(data.error || response.status + " " + response.statusText); }
        return data;
      });
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-action]");
    if (!button) { return; }
    var key = button.getAttribute("data-key");
    var action = button.getAttribute("data-action");
    button.disabled = true;
    say(action + " " + key + "…", false);
    call("POST", "/jobs/" + encodeURIComponent(key) + "/" + action, {})
      .then(function (data) {
        if (action === "trigger") {
          if (data.warning) {
            say("Run of " + key + " requested (" + data.request_id + "), but " + data.warning, true);
            button.disabled = false;
            return;
          }
          say("Run of " + key + " requested (" + data.request_id + ")", false);
          window.setTimeout(function () { window.location.reload(); }, 1500);
        } else {
          window.location.reload();
        }
      })
      .catch(function (error) { say(error.message, true); button.disabled = false; });
  });

  document.getElementById("refresh").addEventListener("click", function () {
    window.location.reload();
  });

  var form = document.getElementById("token-form");
  function unlockIfToken() {
    if (!window.sessionStorage.getItem(TOKEN)) { return; }
    call("GET", "/auth").then(function (data) {
      if (data.authorized) {
        body.setAttribute("data-authorized", "true");
        if (form) { form.hidden = true; }
      } else {
        window.sessionStorage.removeItem(TOKEN);
        say("That token is not accepted.", true);
      }
    }).catch(function (error) { say(error.message, true); });
  }
  if (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      window.sessionStorage.setItem(TOKEN, document.getElementById("token").value);
      unlockIfToken();
    });
    unlockIfToken();
  }

  // Show times in the reader's own timezone as a tooltip.
  Array.prototype.forEach.call(document.querySelectorAll("time[datetime]"), function (el) {
    var value = el.getAttribute("datetime");
    if (value) { el.title = new Date(value).toLocaleString(); }
  });
}());
