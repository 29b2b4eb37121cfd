// site_test: `tscope site` in a real browser.
//   node tests/web/site_test.js SITE_DIR SHOTS_DIR
// Every page loads from disk with no console error and no request leaving
// the folder; links are relative; the arrow keys, Home and End move through a
// lesson; a small heatmap's cell shows its value under the mouse; figure text
// is at least 12 px on screen in a 1280x800 window; printed, a step is one
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

  // a heatmap cell's value under the mouse: the figure's script reads it from the figure's data
  let hovered = null;
  for (const file of pages) {
    if (!file.includes('/step')) continue;
    await page.goto(t.fileUrl(file), { waitUntil: 'load' });
    // a panel with token labels; the cell in the middle of its grid, in page pixels
    const at = await page.evaluate(() => {
      const svg = document.querySelector('figure svg'), json = svg && svg.querySelector('script.ts-cells');
      if (!json) return null;
      const panels = JSON.parse(json.textContent).panels;
      const k = panels.findIndex(p => p.rl && p.cl && Object.keys(p.rl).length && Object.keys(p.cl).length);
      if (k < 0) return null;
      const p = panels[k], r = Math.floor(p.rows / 2), c = Math.floor(p.cols / 2);
      const box = svg.querySelector(`rect.panel[data-panel="${k}"]`).getBoundingClientRect();
      return { k, row: p.r0 + r, col: p.c0 + c, x: box.x + (c + 0.5) * box.width / p.cols, y: box.y + (r + 0.5) * box.height / p.rows };
    });
    if (!at) continue;
    await page.mouse.move(at.x, at.y);
    hovered = await page.evaluate(at => {
      const svg = document.querySelector('figure svg'), tip = svg.querySelector('g.tip');
      const want = svg.tsCellText ? svg.tsCellText(at.k, at.row, at.col) : null;
      return { file: location.pathname, tip: tip && tip.style.display !== 'none' ? tip.textContent : '',
               want: want ? want.text : '', cell: `row ${at.row} · column ${at.col}` };
    }, at);
    break;
  }
  t.check(hovered !== null, 'no page has a heatmap with labelled cells to read under the mouse');
  if (hovered) {
    console.log(`hovered ${hovered.file}: "${hovered.tip}"`);
    t.check(/row \d+ ‘.+’ · column \d+ ‘.+’: (−?∞|-?[0-9.]+|masked|NaN)$/.test(hovered.tip), `the hovered cell reads "${hovered.tip}"`);
    t.check(hovered.tip === hovered.want, `under the mouse "${hovered.tip}", but that cell is "${hovered.want}"`);
    const [, r, c] = /row (\d+) .*column (\d+)/.exec(hovered.tip) || [];
    t.check(`row ${r} · column ${c}` === hovered.cell, `the mouse is on ${hovered.cell}, the tip says row ${r}, column ${c}`);
    await page.mouse.move(1, 1);
    const gone = await page.evaluate(() => document.querySelector('figure svg g.tip').style.display === 'none');
    t.check(gone, 'the cell\'s value stays on screen after the mouse left the cells');
  }

  // figure text on screen in a 1280x800 window: every <text> of every step's figure, its font size
  // times the figure's scale; the smallest of each lesson printed, none under MIN_PX
  const MIN_PX = 12;
  await page.setViewport({ width: 1280, height: 800 });
  const smallest = {};
  for (const file of pages) {
    if (!file.includes('/step')) continue;
    await page.goto(t.fileUrl(file), { waitUntil: 'load' });
    const m = await page.evaluate(() => {
      let low = { px: Infinity, text: '' };
      for (const e of document.querySelectorAll('figure svg text')) {
        if (e.closest('g.tip') || !e.textContent.trim()) continue;
        const ctm = e.getScreenCTM(), px = parseFloat(getComputedStyle(e).fontSize) * Math.hypot(ctm.a, ctm.b);
        if (px < low.px) low = { px, text: e.textContent };
      }
      const svg = document.querySelector('figure svg');
      return { ...low, wide: svg ? svg.getBoundingClientRect().width : 0 };
    });
    const lesson = path.dirname(path.relative(site, file)), step = path.basename(file);
    if (!smallest[lesson] || m.px < smallest[lesson].px) smallest[lesson] = { ...m, step };
  }
  for (const [lesson, m] of Object.entries(smallest).sort()) {
    console.log(`${lesson}: smallest figure text ${m.px.toFixed(1)} px at 1280x800 (${m.step}, "${m.text.slice(0, 30)}")`);
    t.check(m.px >= MIN_PX, `${lesson}/${m.step}: figure text "${m.text.slice(0, 40)}" is ${m.px.toFixed(1)} px on screen, under ${MIN_PX}`);
  }
  await page.setViewport({ width: 1400, height: 900 });

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
