// browser: what the web tests share. Debian's chromium, headless, through
// puppeteer-core; every request checked to stay inside one folder; results
// counted and printed as "N passed, N failed" like the shell tests.
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

let passed = 0, failed = 0;
function ok() { passed++; }
function bad(msg) { failed++; console.log('FAIL: ' + msg); }
function check(cond, msg) { cond ? ok() : bad(msg); }
function finish() { console.log(`${passed} passed, ${failed} failed`); process.exit(failed ? 1 : 0); }

async function launch() {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // no sandbox: the tests may run as root in a container; nothing from the network is opened
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A page that records console errors, page errors and requests leaving `root` (a folder),
// opened from disk or (base: the server's address of that folder) from a server.
async function watchedPage(browser, root, base) {
  const page = await browser.newPage();
  base = base || 'file://' + path.resolve(root) + '/';
  page.problems = [];
  page.on('console', m => { if (m.type() === 'error') page.problems.push('console error: ' + m.text()); });
  page.on('pageerror', e => page.problems.push('page error: ' + e.message));
  // a figure replaced before it loaded is aborted, not failed
  page.on('requestfailed', r => {
    const why = r.failure() ? r.failure().errorText : '';
    if (why !== 'net::ERR_ABORTED') page.problems.push('request failed: ' + r.url() + ' ' + why);
  });
  await page.setRequestInterception(true);
  page.on('request', r => {
    const u = r.url();
    if (u.startsWith(base) || u.startsWith('data:') || u === 'about:blank') r.continue();
    else { page.problems.push('request outside the folder: ' + u); r.abort(); }
  });
  return page;
}

// Navigation start to load event, in ms, of the page's last navigation.
async function loadTime(page) {
  return page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0];
    return n ? n.loadEventEnd - n.startTime : NaN;
  });
}

function htmlFiles(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== 'node_modules') out.push(...htmlFiles(p));
    else if (e.name.endsWith('.html')) out.push(p);
  }
  return out.sort();
}

function median(xs) { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)] : NaN; }

module.exports = { ok, bad, check, finish, launch, watchedPage, loadTime, htmlFiles, median, fileUrl: p => 'file://' + path.resolve(p) };
