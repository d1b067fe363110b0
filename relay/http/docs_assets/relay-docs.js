// The start-up of span-relay's /docs (Swagger UI) and /redoc (ReDoc): relay/http/docs.py.
//
// The OpenAPI document is behind the API's own credential, and a page reached by a link
// cannot send an Authorization header. So the page (public: it holds no part of the API)
// fetches the document itself: with the bearer token this tab was given (sessionStorage,
// the SPA's own key, so a tab signed in on the SPA is signed in here), or with none (the
// mode needs none, or an authenticating proxy adds what it needs). A 401 shows the
// server's message and, when the server asks for a bearer token, a form for one. Swagger
// UI's "Try it out" requests to this origin carry the same token. Nothing else is kept;
// no request leaves this origin (the CSP's connect-src says so too).
'use strict';

(() => {
  const TOKEN_KEY = 'span-relay-token'; // relay/spa/token.js
  const root = document.getElementById('relay-docs');
  const config = JSON.parse(root.dataset.config);
  const form = document.getElementById('relay-docs-token');
  const input = document.getElementById('relay-docs-token-input');
  const note = document.getElementById('relay-docs-note');

  function loadToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || null;
    } catch (_) {
      return null; /* storage disabled */
    }
  }

  function saveToken(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) {
      /* storage disabled */
    }
  }

  function sameOrigin(url) {
    try {
      return new URL(url, window.location.href).origin === window.location.origin;
    } catch (_) {
      return false;
    }
  }

  /** A request to this origin with no Authorization of its own gets the tab's token. */
  function withToken(request) {
    const token = loadToken();
    const headers = request.headers || {};
    const named = Object.keys(headers).some((k) => k.toLowerCase() === 'authorization');
    if (token && !named && sameOrigin(request.url)) {
      request.headers = { ...headers, Authorization: `Bearer ${token}` };
    }
    return request;
  }

  function say(text) {
    note.textContent = text;
    note.hidden = !text;
  }

  async function load() {
    let response;
    try {
      const request = withToken({ url: config.spec, headers: { Accept: 'application/json' } });
      response = await fetch(config.spec, { headers: request.headers, credentials: 'same-origin' });
    } catch (err) {
      say(`The API description could not be loaded (${err.message}).`);
      return;
    }
    if (response.status === 401) {
      const body = await response.json().catch(() => null);
      const message = (body && body.error && body.error.message) || 'This API needs a credential.';
      const bearer = /^bearer\b/i.test(response.headers.get('WWW-Authenticate') || '');
      say(loadToken() ? `That token was not accepted. ${message}` : message);
      form.hidden = !bearer;
      if (bearer) input.focus();
      return;
    }
    if (!response.ok) {
      say(`The API description could not be loaded (HTTP ${response.status}).`);
      return;
    }
    const spec = await response.json();
    form.hidden = true;
    say('');
    start(spec);
  }

  function start(spec) {
    if (config.kind === 'redoc') {
      window.Redoc.init(spec, {}, document.getElementById('redoc'));
      return;
    }
    const bundle = window.SwaggerUIBundle;
    const options = {
      ...config.parameters,
      spec,
      presets: [bundle.presets.apis, bundle.SwaggerUIStandalonePreset],
      requestInterceptor: withToken,
    };
    if (config.oauth2RedirectUrl) options.oauth2RedirectUrl = window.location.origin + config.oauth2RedirectUrl;
    const ui = bundle(options);
    if (config.initOAuth) ui.initOAuth(config.initOAuth);
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    saveToken(input.value.trim() || null);
    input.value = '';
    load();
  });

  load();
})();
