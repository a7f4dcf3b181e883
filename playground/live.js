// The Flow page's live updates: while the run shown is RUNNING and the page is visible, the page
// reads it again every LIVE_MS; it stops when the run closes, the page is hidden or left, or the
// user pauses it. One timer at most, armed again only when a read has ended, so a slow server
// never has reads piling up.

import { $ } from "./lib.js";

const LIVE_MS = 2000;

// `reload` reads the page again; `open` is whether the run shown is RUNNING.
const live = { reload: null, open: false, paused: false, timer: 0, problem: "" };

// Arm the next read after one ended: `open` says whether the run is still RUNNING, `problem`
// why the last read failed ("" when it did not).
export function armLive(reload, open, problem = "") {
  clearTimeout(live.timer);
  Object.assign(live, { reload, open, problem, timer: 0 });
  if (open && !live.paused && !document.hidden) live.timer = setTimeout(fire, LIVE_MS);
  render();
}

// Stop for good (the user left the page).
export function stopLive() {
  clearTimeout(live.timer);
  Object.assign(live, { reload: null, open: false, problem: "", timer: 0 });
  render();
}

// Read the page again now.
function fire() {
  live.timer = 0;
  live.reload?.();
}

// Show whether the page is live, paused or failing, and the button that pauses or resumes it.
function render() {
  const box = $("fx-live");
  box.hidden = !live.open;
  const state = live.paused ? "paused" : live.problem ? "failing" : "live";
  box.dataset.state = state;
  $("fx-live-text").textContent = live.paused ? "Live updates paused"
    : live.problem ? `Live: the last update failed (${live.problem}); trying again`
    : `Live: updates every ${LIVE_MS / 1000} s`;
  // The visible word is the start of the name, as speech input expects.
  const button = $("fx-live-toggle");
  button.textContent = live.paused ? "Resume" : "Pause";
  button.setAttribute("aria-label", live.paused ? "Resume live updates" : "Pause live updates");
}

// Pause, or resume with a read at once.
function toggle() {
  live.paused = !live.paused;
  clearTimeout(live.timer);
  live.timer = 0;
  render();
  if (!live.paused && live.open) fire();
}

// Wire the pause button once; a hidden page stops reading and reads again when shown.
export function initLive() {
  $("fx-live-toggle").addEventListener("click", toggle);
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(live.timer);
      live.timer = 0;
    } else if (live.open && !live.paused && !live.timer) fire();
  });
}
