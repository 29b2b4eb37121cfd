// html_test: `tscope html` on a training trace, in a real browser.
//   node tests/web/html_test.js DIR [VALUE]
// The page loads from disk with no console error and no request leaving the
// folder; the step tree folds by layer and module; the search box filters
// the names and Enter opens the first match; a step's figure is loaded when
// it is shown (an SVG with text as text); the snapshot slider and the head
// choice change the figure and the statistics line; the mouse on a cell of
// one head shows its value (VALUE: what the trace holds there); ↓ moves to the next step.
'use strict';
const path = require('path');
const t = require('./browser');

(async () => {
  const [dir, wantArg] = process.argv.slice(2);
  const want = wantArg === undefined ? undefined : +wantArg; // head 2's row 40, column 9 at the second-last snapshot
  const browser = await t.launch();
  const page = await t.watchedPage(browser, dir);
  await page.setViewport({ width: 1400, height: 900 });
  await page.goto(t.fileUrl(path.join(dir, 'index.html')), { waitUntil: 'load' });
  console.log(`index.html loads in ${(await t.loadTime(page)).toFixed(0)} ms`);
  const current = () => page.evaluate(() => {
    const o = document.querySelector('#figure object');
    return { name: document.getElementById('step-name').textContent, stats: document.getElementById('stats').textContent,
             data: o ? o.getAttribute('data') : '', snap: document.getElementById('snap-label').textContent };
  });
  // the figure shown has loaded (a frame of its own: file:// pages cannot read
  // each other, the browser's debugger can), and is an SVG with text as text
  const figureFrame = async () => {
    const data = (await current()).data;
    for (let n = 0; n < 50; n++) {
      const f = page.frames().find(fr => fr.url().endsWith('/' + data));
      if (f) {
        const texts = await f.evaluate(() => document.readyState === 'complete' ? document.querySelectorAll('text').length : 0).catch(() => 0);
        if (texts > 0) return f;
      }
      await new Promise(r => setTimeout(r, 100));
    }
    return null;
  };
  const figureText = async () => {
    const f = await figureFrame();
    return f ? f.evaluate(() => document.querySelectorAll('text').length) : 0;
  };

  // the tree
  const tree = await page.evaluate(() => ({
    links: document.querySelectorAll('#tree a').length,
    layers: [...document.querySelectorAll('#tree > details > summary')].map(s => s.textContent),
    modules: [...document.querySelectorAll('#tree details details > summary')].map(s => s.textContent),
  }));
  t.check(tree.links > 5, `the tree has ${tree.links} steps`);
  t.check(tree.layers.includes('decoder.layers.0') && tree.layers.includes('decoder.layers.1'),
    `the tree's folders are ${tree.layers.join(', ')}`);
  t.check(tree.modules.includes('self_attn'), `no module folder self_attn under a layer: ${tree.modules.join(', ')}`);
  const closed = await page.$$eval('#tree > details', ds => ds.filter(d => !d.open).length);
  t.check(closed >= 2, `only ${closed} folders folded at the start`);

  // a step opened from the tree
  await page.evaluate(() => { for (const d of document.querySelectorAll('#tree details')) d.open = true; });
  const link = await page.$$('#tree a');
  let attn = -1;
  for (let i = 0; i < link.length; i++) if ((await link[i].evaluate(a => a.textContent)) === 'decoder.layers.1.self_attn.weights') attn = i;
  t.check(attn >= 0, 'no decoder.layers.1.self_attn.weights in the tree');
  if (attn >= 0) {
    await link[attn].click();
    let c = await current();
    t.check(c.name === 'decoder.layers.1.self_attn.weights', `clicking the step shows ${c.name}`);
    t.check(/^s\/\d+-0\.svg$/.test(c.data), `its figure is ${c.data}`);
    t.check(await figureText() > 3, `the figure ${c.data} did not load as SVG with text`);
    const stats0 = c.stats;
    // the snapshot slider: the last snapshot
    const max = await page.$eval('#snap', s => +s.max);
    t.check(max >= 10, `the slider has ${max + 1} snapshots`);
    await page.$eval('#snap', (s, v) => { s.value = v; s.dispatchEvent(new Event('input')); }, max);
    c = await current();
    t.check(c.data.endsWith(`-${max}.svg`), `at the last snapshot the figure is ${c.data}`);
    t.check(/training step [1-9]\d*/.test(c.snap), `the last snapshot is called "${c.snap}"`);
    t.check(c.stats !== stats0, 'the statistics line did not change with the snapshot');
    t.check(await figureText() > 3, `the figure ${c.data} did not load`);
    await page.keyboard.press('[');
    c = await current();
    t.check(c.data.endsWith(`-${max - 1}.svg`), `[ goes back a snapshot: ${c.data}`);
    t.check(await figureText() > 3, `the figure ${c.data} did not load`);
    // one head
    const heads = await page.$eval('#head', s => s.options.length);
    t.check(heads >= 3, `the head choice has ${heads} options`);
    await page.select('#head', '2');
    c = await current();
    t.check(c.data.endsWith('-h2.svg'), `head 2's figure is ${c.data}`);
    t.check(await figureText() > 3, `the figure ${c.data} did not load`);
    // the mouse on row 40, column 9: the figure's script shows its value, as the trace holds it
    const ff = await figureFrame();
    const cell = ff ? await ff.evaluate(() => {
      const p = JSON.parse(document.querySelector('script.ts-cells').textContent).panels[0];
      const box = document.querySelector('rect.panel[data-panel="0"]').getBoundingClientRect();
      return { x: box.x + (9 - p.c0 + 0.5) * box.width / p.cols, y: box.y + (40 - p.r0 + 0.5) * box.height / p.rows, d: p.d };
    }).catch(() => null) : null;
    t.check(cell !== null, `head 2's figure has no cell data`);
    if (cell) {
      const o = await page.$eval('#figure object', e => { const b = e.getBoundingClientRect(); return { x: b.x, y: b.y }; });
      await page.mouse.move(o.x + cell.x, o.y + cell.y);
      const tip = await ff.evaluate(() => { const g = document.querySelector('g.tip'); return g && g.style.display !== 'none' ? g.textContent : ''; });
      console.log(`hovered head 2's row 40, column 9: "${tip}" (the trace: ${want})`);
      const m = /row 40 .*column 9 .*: (-?[0-9.]+)$/.exec(tip);
      t.check(m !== null, `the cell under the mouse reads "${tip}", not row 40, column 9's value`);
      if (m && want !== undefined)
        t.check(Math.abs(+m[1] - want) <= 0.5 * Math.pow(10, -cell.d) + 1e-9, `row 40, column 9 reads ${m[1]}; the trace holds ${want}`);
    }
    await page.select('#head', '-1');
    // ↓: the next step
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
    await page.keyboard.press('ArrowDown');
    c = await current();
    t.check(c.name !== 'decoder.layers.1.self_attn.weights', `↓ stays on ${c.name}`);
  }

  // search: part of a name, then a glob; Enter opens the first match
  await page.click('#search');
  await page.keyboard.type('induction');
  let s = await page.evaluate(() => ({
    shown: [...document.querySelectorAll('#tree a:not(.hidden)')].map(a => a.textContent),
    found: document.getElementById('found').textContent,
  }));
  t.check(s.shown.length >= 1 && s.shown.every(n => n.includes('induction')), `searching "induction" shows ${s.shown.join(', ')}`);
  t.check(new RegExp(`^${s.shown.length} of \\d+ steps match`).test(s.found), `the search says "${s.found}"`);
  await page.keyboard.press('Enter');
  let c = await current();
  t.check(c.name === s.shown[0], `Enter opens ${c.name}, not the first match ${s.shown[0]}`);
  await page.$eval('#search', e => { e.value = ''; });
  await page.keyboard.type('train.grad_norm.*');
  s = await page.evaluate(() => [...document.querySelectorAll('#tree a:not(.hidden)')].map(a => a.textContent));
  t.check(s.length >= 2 && s.every(n => n.startsWith('train.grad_norm.')), `the glob shows ${s.join(', ')}`);
  await page.$eval('#search', e => { e.value = 'no such step'; e.dispatchEvent(new Event('input')); });
  const none = await page.$eval('#found', e => e.textContent);
  t.check(/^0 of/.test(none), `a search that matches nothing says "${none}"`);

  t.check(page.problems.length === 0, `the explorer: ${page.problems.join('; ')}`);
  await browser.close();
  t.finish();
})().catch(e => { t.bad(e.stack || String(e)); t.finish(); });
