// DOM helpers of the page: an element by id, a new element with its class and text (text
// goes in as textContent, never as HTML), and the two screen-reader lines (the polite
// announcer and the alert). Nothing here touches the DOM at import time.

export const $ = (id) => document.getElementById(id);

export function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

/** announce(text) into a live region: a phrase once (not twice in a row), cleared then set so it is read. */
export function createAnnouncer(region) {
  let lastAnnouncement = '';
  return function announce(text) {
    if (!text || text === lastAnnouncement) return;
    lastAnnouncement = text;
    // Clear then set, so that a repeated phrase is read again.
    region.textContent = '';
    setTimeout(() => {
      region.textContent = text;
    }, 30);
  };
}

/** alertText(text) into the alert region: cleared then set, so that every alert is read. */
export function createAlerter(region) {
  return function alertText(text) {
    region.textContent = '';
    setTimeout(() => {
      region.textContent = text;
    }, 30);
  };
}
