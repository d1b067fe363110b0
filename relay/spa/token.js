// The API bearer token: kept for this tab only (sessionStorage), sent as the Authorization
// header, asked for with the token form when the server answers 401.

const TOKEN_KEY = 'span-relay-token';

/** The token this tab was given, else null (also when storage is disabled). */
export function loadToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || null;
  } catch (_) {
    return null; /* storage disabled */
  }
}

export function saveToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch (_) {
    /* storage disabled */
  }
}

/** Authorization, when the server requires a token (GET /config says so). */
export function authHeaders(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** The headers of a run's POST: the token, and the fault to inject (?fault=). */
export function requestHeaders(token, fault) {
  return { ...authHeaders(token), ...(fault ? { 'X-Relay-Fault': fault } : {}) };
}

/**
 * The token form. `page` (app.js): {app, ui, loadGraphs, announce, alertText, render}.
 * showTokenForm(message): show it (a 401); submitToken(): use what was typed in it.
 */
export function createTokenForm(page) {
  const { app, ui } = page;

  function showTokenForm(message) {
    ui.tokenForm.hidden = false;
    if (message) ui.tokenInput.setAttribute('aria-describedby', 'alert');
    ui.tokenInput.focus();
  }

  async function submitToken() {
    app.token = ui.tokenInput.value.trim() || null;
    saveToken(app.token);
    ui.tokenInput.value = '';
    const status = await page.loadGraphs();
    if (status !== 'auth') {
      ui.tokenForm.hidden = true;
      page.announce('Token accepted.');
      if (!ui.composer.hidden) ui.input.focus();
    } else {
      page.alertText('That token was not accepted.');
      ui.tokenInput.focus();
    }
    page.render();
  }

  return { showTokenForm, submitToken };
}
