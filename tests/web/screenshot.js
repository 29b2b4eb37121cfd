// screenshot: a page as headless chromium shows it, for README's pictures.
//   node tests/web/screenshot.js FILE.html OUT.png [WIDTH HEIGHT [SCALE [print]]]
// SCALE 2 is the page at 200% zoom; "print" shows it with the print style sheet.
'use strict';
const t = require('./browser');
(async () => {
  const [file, out, w = '1280', h = '760', scale = '1', media] = process.argv.slice(2);
  const browser = await t.launch();
  const page = await browser.newPage();
  await page.setViewport({ width: +w, height: +h, deviceScaleFactor: +scale });
  if (media === 'print') await page.emulateMediaType('print');
  await page.goto(t.fileUrl(file), { waitUntil: 'load' });
  await page.screenshot({ path: out });
  await browser.close();
})().catch(e => { console.error(e.message); process.exit(1); });
