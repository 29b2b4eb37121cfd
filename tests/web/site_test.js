// site_test: `tscope site` in a real browser.
//   node tests/web/site_test.js SITE_DIR SHOTS_DIR
// Every page loads from disk with no console error and no request leaving
// the folder; links are relative; the arrow keys, Home and End move through a
// lesson; a small heatmap's cells carry their tooltips; printed, a step is one
// page. Writes a screenshot of each lesson's first figure, at one CSS pixel
// a point, to SHOTS_DIR/NAME.png for the shell test to compare with the
// lesson's PNG export (thumb.png). Prints the load times (budget: 300 ms).
'use strict';
const fs = require('fs');
const path = require('path');
const t = require('./browser');

(async () => {
  const [site, shots] = process.argv.slice(2);
  const browser = await t.launch();
  const pages = t.htmlFiles(site);
  t.check(pages.length > 2, `only ${pages.length} pages in ${site}`);
  const times = [];
  const page = await t.watchedPage(browser, site);
  await page.setViewport({ width: 1400, height: 900 });
  for (const file of pages) {
    const name = path.relative(site, file);
    page.problems = [];
    await page.goto(t.fileUrl(file), { waitUntil: 'load' });
    times.push(await t.loadTime(page));
    t.check(page.problems.length === 0, `${name}: ${page.problems.join('; ')}`);
    // what the page loads, and its own navigation, is relative; a lesson's narration may cite a web page
    const links = await page.$$eval('a[href], link[href], script[src], img[src], iframe[src], object[data]',
      els => els.filter(e => !(e.tagName === 'A' && e.closest('.narration') && /^https?:/.test(e.getAttribute('href'))))
                .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('data')));
    const absolute = links.filter(h => /^([a-z]+:|\/)/i.test(h));
    t.check(absolute.length === 0, `${name}: links that are not relative: ${absolute.join(' ')}`);
    if (name.includes('/step')) {
      const fig = await page.evaluate(() => {
        const svg = document.querySelector('figure svg');
        if (!svg) return null;
        const label = document.getElementById(svg.getAttribute('aria-labelledby'));
        return { texts: svg.querySelectorAll('text').length, label: label ? label.textContent : '',
                 glyphs: svg.querySelectorAll('symbol').length };
      });
      t.check(fig && fig.texts >= 3, `${name}: the figure has ${fig ? fig.texts : 0} <text> elements`);
      t.check(fig && fig.glyphs === 0, `${name}: the figure draws glyph outlines`);
      t.check(fig && fig.label.length > 10, `${name}: the figure has no text alternative`);
    }
  }
  const ms = times.filter(Number.isFinite);
  console.log(`load times of ${ms.length} pages: median ${t.median(ms).toFixed(0)} ms, slowest ${Math.max(...ms).toFixed(0)} ms (budget 300 ms)`);

  // keys: right, left, End, Home in the first lesson that has three steps or more
  const lessons = fs.readdirSync(site).filter(d => fs.existsSync(path.join(site, d, 'step03.html'))).sort();
  const l = lessons[0];
  const here = () => path.basename(new URL(page.url()).pathname);
  const press = async key => { await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.keyboard.press(key)]); return here(); };
  await page.goto(t.fileUrl(path.join(site, l, 'step01.html')), { waitUntil: 'load' });
  t.check(await press('ArrowRight') === 'step02.html', `${l}: right arrow on step 1 goes to ${here()}`);
  t.check(await press('ArrowRight') === 'step03.html', `${l}: right arrow on step 2 goes to ${here()}`);
  t.check(await press('ArrowLeft') === 'step02.html', `${l}: left arrow on step 3 goes to ${here()}`);
  const last = fs.readdirSync(path.join(site, l)).filter(f => /^step\d+\.html$/.test(f)).sort().pop();
  t.check(await press('End') === last, `${l}: End goes to ${here()}, not ${last}`);
  t.check(await press('Home') === 'step01.html', `${l}: Home goes to ${here()}`);
  const title = await page.$eval('.count', e => e.textContent);
  t.check(/^step 1 \/ \d+$/.test(title), `${l}: step 1's counter reads "${title}"`);

  // a heatmap cell's tooltip, under the mouse
  let hovered = null;
  for (const file of pages) {
    if (!file.includes('/step')) continue;
    await page.goto(t.fileUrl(file), { waitUntil: 'load' });
    // a cell with token labels, in the middle of its grid
    const k = await page.evaluate(() => {
      const rs = [...document.querySelectorAll('figure svg .cells rect:not(.panel)')];
      const labelled = rs.map((r, i) => [r, i]).filter(([r]) => /row \d+ ‘.*column \d+ ‘/.test(r.textContent));
      return labelled.length ? labelled[Math.floor(labelled.length / 2)][1] : -1;
    });
    if (k < 0) continue;
    const cell = (await page.$$('figure svg .cells rect:not(.panel)'))[k];
    await cell.hover();
    hovered = await page.evaluate(k => {
      const box = document.querySelectorAll('figure svg .cells rect:not(.panel)')[k].getBoundingClientRect();
      const under = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
      const r = document.querySelector('figure svg .cells rect:hover');
      return { file: location.pathname, tip: r && r.querySelector('title') ? r.querySelector('title').textContent : '',
               under: under && under.querySelector('title') ? under.querySelector('title').textContent : '' };
    }, k);
    break;
  }
  t.check(hovered !== null, 'no page has a heatmap with labelled cell tooltips');
  if (hovered) {
    console.log(`hovered ${hovered.file}: "${hovered.tip}"`);
    t.check(/row \d+ ‘.+’ · column \d+ ‘.+’: (-?[0-9.e+-]+|masked|NaN)$/.test(hovered.tip), `the hovered cell's tooltip reads "${hovered.tip}"`);
    t.check(hovered.under === hovered.tip, 'the element under the mouse is not the cell with the tooltip');
  }

  // printed: one step is one page
  await page.goto(t.fileUrl(path.join(site, l, 'step02.html')), { waitUntil: 'load' });
  const pdf = Buffer.from(await page.pdf({ preferCSSPageSize: true }));
  const n = (pdf.toString('latin1').match(/\/Type\s*\/Page[^s]/g) || []).length;
  t.check(n === 1, `${l}/step02.html prints on ${n} pages, not 1`);

  // each lesson's first figure at one CSS pixel a point, for the comparison with its PNG
  fs.mkdirSync(shots, { recursive: true });
  for (const d of fs.readdirSync(site).filter(d => fs.existsSync(path.join(site, d, 'thumb.png'))).sort()) {
    await page.goto(t.fileUrl(path.join(site, d, 'step01.html')), { waitUntil: 'load' });
    const svg = await page.$('figure svg');
    const size = await page.evaluate(() => {
      const s = document.querySelector('figure svg');
      const [, , w, h] = s.getAttribute('viewBox').split(/\s+/).map(Number);
      s.style.width = w + 'px';
      s.style.height = h + 'px';
      s.style.maxWidth = 'none';
      return [w, h];
    });
    await page.setViewport({ width: Math.ceil(size[0]) + 900, height: Math.ceil(size[1]) + 200 });
    await svg.screenshot({ path: path.join(shots, d + '.png') });
  }
  await browser.close();
  t.finish();
})().catch(e => { t.bad(e.stack || String(e)); t.finish(); });
