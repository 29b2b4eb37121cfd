// live_test: the site's live page (live.html, tscope's C in WebAssembly) in
// headless chromium, from disk and from a local static server: no console
// error, no request leaving the folder, usable soon after it starts loading.
// Types "And God sa" into the Bible model, presses Tab twice and reads "And
// God said"; with the induction model, clicks a head on the canvas to knock
// it out and compares the page's probabilities with native `tscope run
// --ablate` (REF.json, written by tests/web_test.sh) within 1e-5, and the
// bars' text with them to three decimals; moves the temperature slider,
// samples, restores the head. Prints each model's keystroke p95 (KEYS
// characters typed) for `make bench` beside native `tscope bench live`.
//   node tests/web/live_test.js SITE_DIR REF.json SHOT.png
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');
const { check, finish, launch, watchedPage, fileUrl } = require('./browser');

const [siteDir, refPath, shotPath] = process.argv.slice(2);
const ref = JSON.parse(fs.readFileSync(refPath, 'utf8'));
const TOL = 1e-5;
const KEYS = 'In the beginning God created the heaven and the earth. And the e'; // 64 characters

// A static server of the site's folder on a free port of 127.0.0.1; nothing outside it.
function serve(dir) {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.png': 'image/png', '.svg': 'image/svg+xml' };
  const root = path.resolve(dir);
  const server = http.createServer((req, res) => {
    const p = path.resolve(root, '.' + decodeURIComponent(new URL(req.url, 'http://x').pathname));
    // the browser asks every server for an icon the site does not have: no content, not an error
    if (p === path.join(root, 'favicon.ico')) { res.writeHead(204); res.end(); return; }
    if (!p.startsWith(root + path.sep) || !fs.existsSync(p) || fs.statSync(p).isDirectory()) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(p)] || 'application/octet-stream' });
    fs.createReadStream(p).pipe(res);
  });
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function p95(xs) { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(0.95 * s.length))]; }

// Open live.html?QUERY and wait until the page says it is ready; the time it took.
async function open(page, base, query) {
  const t0 = Date.now();
  await page.goto(base + 'live.html?' + query);
  await page.waitForFunction(() => window.tscopeLive && (window.tscopeLive.ready || window.tscopeLive.error), { timeout: 30000 });
  const error = await page.evaluate(() => window.tscopeLive.error);
  check(!error, `live.html?${query}: ${error}`);
  return Date.now() - t0;
}

const fieldValue = page => page.$eval('#text', e => e.value);
// the address as the page has it now (history.replaceState reaches puppeteer's page.url() late)
const address = page => page.evaluate(() => location.href);
const barTexts = page => page.$$eval('.bar', rows => rows.map(r => ({ id: +r.dataset.id, tok: r.querySelector('.tok').textContent, p: r.querySelector('.p').textContent })));

// Typing KEYS into an empty field: each keystroke's time as the page measured it (model, layout, painting, bars).
async function keystrokes(page) {
  await page.$eval('#text', e => { e.value = ''; e.dispatchEvent(new Event('input')); });
  await page.evaluate(() => { window.tscopeLive.times = []; window.tscopeLive.parts = []; });
  await page.type('#text', KEYS);
  const parts = await page.evaluate(() => window.tscopeLive.parts);
  const med = k => { const v = parts.map(p => p[k]).sort((a, b) => a - b); return v[v.length >> 1].toFixed(2); };
  console.log(`  median keystroke: model ${med('model')} ms, layout ${med('layout')} ms, painting ${med('paint')} ms, bars ${med('bars')} ms`);
  return page.evaluate(() => window.tscopeLive.times);
}

// The point of the canvas where head (layer, head) is: asked of the page's own hit test.
async function headPoint(page, layer, head) {
  return page.evaluate((l, h) => window.tscopeLive.pointOf(l, h), layer, head);
}

async function origin(browser, base, label, report) {
  const root = siteDir;
  // the Bible model: type, then Tab twice
  let page = await watchedPage(browser, root, base.startsWith('http') ? base : undefined);
  const ms = await open(page, base, 'model=kjv');
  console.log(`${label}: the Bible model's page usable ${ms} ms after it started loading`);
  check(ms < 2000 * 4, `${label}: the page took ${ms} ms to be usable`);
  await page.focus('#text');
  await page.type('#text', 'And God sa');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  const typed = await fieldValue(page);
  check(typed === 'And God said', `${label}: typed "And God sa" and Tab twice, read "${typed}"`);
  const at = await address(page);
  check(/text=And%20God%20said/.test(at), `${label}: the address does not carry the text: ${at}`);
  const bars = await barTexts(page);
  check(bars.length === 10 && bars.every(b => /^\d\.\d{3}$/.test(b.p)), `${label}: the bars: ${JSON.stringify(bars.slice(0, 3))}`);
  if (report) {
    const times = await keystrokes(page);
    report.kjv = p95(times);
    check(times.length === KEYS.length, `${label}: ${times.length} keystrokes timed of ${KEYS.length}`);
    if (shotPath) await page.screenshot({ path: shotPath, fullPage: true });
  }
  check(page.problems.length === 0, `${label}: kjv: ${page.problems.join('; ')}`);
  await page.close();

  // the induction model with the reference text, then one head knocked out by a click
  page = await watchedPage(browser, root, base.startsWith('http') ? base : undefined);
  await open(page, base, 'model=induction&text=' + encodeURIComponent(ref.text));
  const probs = () => page.evaluate(() => window.tscopeLive.probs());
  const worst = (got, want) => got.reduce((m, g, i) => Math.max(m, Math.abs(g - want[i])), 0);
  let d = worst(await probs(), ref.plain);
  check(d <= TOL, `${label}: the page's probabilities differ from native run by ${d}`);
  // the lens read from the last layer is the model's own prediction: its top bar
  const lensTop = await page.evaluate(() => window.tscopeLive.lensTop());
  const topBar = (await barTexts(page))[0];
  check(topBar && lensTop === topBar.id, `${label}: the lens's last layer says token ${lensTop}, the top bar ${topBar && topBar.id}`);
  const pt = await headPoint(page, ref.layer, ref.head);
  check(pt !== null, `${label}: head ${ref.layer}.${ref.head} is nowhere on the canvas`);
  if (pt) await page.mouse.click(pt.x, pt.y);
  d = worst(await probs(), ref.knocked);
  console.log(`${label}: head ${ref.layer}.${ref.head} knocked out by a click: largest difference from native run --ablate ${d.toExponential(2)}`);
  check(d <= TOL, `${label}: knocked out, the page's probabilities differ from native run --ablate by ${d}`);
  const knockedAt = await address(page);
  check(new RegExp(`knock=${ref.layer}\\.${ref.head}`).test(knockedAt), `${label}: the address does not carry the knock-out: ${knockedAt}`);
  const after = await barTexts(page);
  const fmt = x => x.toFixed(3);
  const shown = after.every(b => b.p === `${fmt(ref.plain[b.id])} \u2192 ${fmt(ref.knocked[b.id])}`);
  check(after.length > 0 && shown, `${label}: the bars say ${JSON.stringify(after.slice(0, 2))}, native ${after.slice(0, 2).map(b => fmt(ref.plain[b.id]) + ' -> ' + fmt(ref.knocked[b.id]))}`);
  // the temperature slider changes the bars; sampling appends a character
  const before = JSON.stringify(await barTexts(page));
  await page.$eval('#temp', e => { e.value = '0.3'; e.dispatchEvent(new Event('input')); });
  check(JSON.stringify(await barTexts(page)) !== before, `${label}: the temperature slider changed no bar`);
  const n0 = (await fieldValue(page)).length;
  await page.click('#sample');
  check((await fieldValue(page)).length === n0 + 1, `${label}: sampling did not append one character`);
  const again = await headPoint(page, ref.layer, ref.head); // the button's click may have scrolled the page
  if (again) await page.mouse.click(again.x, again.y); // restored
  const restoredAt = await address(page);
  check(!/knock=/.test(restoredAt), `${label}: the head was not restored: ${restoredAt}`);
  if (report) report.induction = p95(await keystrokes(page));
  // the state in the address: a prepared sentence with heads out opens as it was left
  await open(page, base, 'model=kjv&text=And%20God%20sa&knock=1.0,1.1');
  check(await fieldValue(page) === 'And God sa', `${label}: the text from the address`);
  check((await barTexts(page)).every(b => /\u2192/.test(b.p)), `${label}: heads knocked out from the address show no before/after bars`);
  check(page.problems.length === 0, `${label}: induction: ${page.problems.join('; ')}`);
  await page.close();
}

(async () => {
  const browser = await launch();
  const server = await serve(siteDir);
  try {
    const report = {};
    await origin(browser, fileUrl(siteDir) + '/', 'file://', report);
    await origin(browser, `http://127.0.0.1:${server.address().port}/`, 'http://', null);
    console.log(`live keystroke p95: Bible model ${report.kjv.toFixed(2)} ms at ${KEYS.length} characters (target 16), ` +
                `induction model ${report.induction.toFixed(2)} ms (target 5)`);
  } catch (e) {
    check(false, 'live_test: ' + (e.stack || e));
  }
  server.close();
  await browser.close();
  finish();
})();
